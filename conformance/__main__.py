import sys

from wgk.conformance.cli.main import main

sys.exit(main())
