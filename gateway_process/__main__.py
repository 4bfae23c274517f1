import sys

from gateway_process.cli import main

sys.exit(main())
