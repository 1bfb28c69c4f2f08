"""The implementation's own copy of the contract's words: names of kinds, codes and phases, the name and path grammars, the wire form of a request, errors."""
