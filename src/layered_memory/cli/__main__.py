"""`python -m layered_memory.cli ...`: the console script without its launcher."""

import sys

from layered_memory.cli import main

sys.exit(main())
