"""`python -m renderer_process [--connection PATH] [--name NAME]`"""

import sys

from renderer_process.app import run

if __name__ == "__main__":
    sys.exit(run())
