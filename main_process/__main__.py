"""`python -m main_process ...` runs `python -m cli_process ...`, for commands written down before the
CLI had its own package (`serve --print-config` from a checkout printed `-m main_process serve`
into hosts' configs). Nothing in the project runs it. The CLI is exec'd, not imported: main never
depends on the CLI's package."""

import os
import sys

if __name__ == "__main__":
    os.execv(sys.executable, [sys.executable, "-m", "cli_process", *sys.argv[1:]])
