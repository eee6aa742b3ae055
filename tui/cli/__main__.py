"""`python -m tui.cli`."""

import sys

from tui.cli.main import main

if __name__ == "__main__":  # importing the module (every module is, by the wheel check) runs nothing
    sys.exit(main())
