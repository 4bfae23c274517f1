"""`python -m renderer_process [--connection PATH] [--name NAME]`; `--preflight` only checks that
there is a display and the system libraries Qt needs are there (exit 0, or 2 with one line saying
what to do)."""

import sys

from renderer_process.preflight import check

if __name__ == "__main__":
    # Before anything imports Qt: no display or a missing library must be one clear line, not Qt's abort.
    problem = check()
    if problem or "--preflight" in sys.argv[1:]:
        sys.exit(problem)
    from renderer_process.app import run

    sys.exit(run())
