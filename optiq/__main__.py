"""``python -m optiq``: the command line."""

import sys

from .cli import main

sys.exit(main())
