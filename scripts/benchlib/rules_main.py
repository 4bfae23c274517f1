"""main for the `rules` figure: `python rules_main.py CONFIG CONNECTION with-rules|no-rules`.

The MainApp that `elicitron main` builds, with its consent layer (`with-rules`) or with no rule
store at all (`no-rules`: a host's call goes straight to its server, every elicitation to the
windows). Both sides start the same way, so only the consent layer differs between them.
"""

import asyncio
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from main_process.app import MainApp
from main_process.config import load_config

config, connection, mode = sys.argv[1:4]
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
asyncio.run(MainApp(load_config(Path(config)), Path(connection), rules=mode == "with-rules").run())
