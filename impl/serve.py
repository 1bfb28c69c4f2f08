"""``python -m wgk.impl.serve``: the kernel served over the conformance protocol
(``wgk.impl.protocol.serve``), at the path its users run."""
from .protocol.serve import main

if __name__ == "__main__":
    raise SystemExit(main())
