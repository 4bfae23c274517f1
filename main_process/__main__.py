import sys

from main_process.cli import main

sys.exit(main())
