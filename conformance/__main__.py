import sys

from wgk.conformance.cli import main

sys.exit(main())
