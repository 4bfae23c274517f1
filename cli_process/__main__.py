import sys

from cli_process.cli import main

sys.exit(main())
