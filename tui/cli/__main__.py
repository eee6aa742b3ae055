"""`python -m tui.cli`."""

import sys

from .main import main

sys.exit(main())
