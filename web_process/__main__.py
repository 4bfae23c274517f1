import sys

from web_process.cli import main

sys.exit(main())
