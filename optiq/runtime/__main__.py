"""``mpiexec -n N python -m optiq.runtime PLAN.json [options]``: the same as ``optiq run``."""

import sys

from ..cli.launcher import main

if __name__ == "__main__":
    sys.exit(main())
