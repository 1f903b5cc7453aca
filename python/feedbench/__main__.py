"""`python -m feedbench`: the same as the console script."""

import sys

from feedbench import main

sys.exit(main())
