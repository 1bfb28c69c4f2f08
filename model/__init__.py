"""wgk.model: the executable specification."""
