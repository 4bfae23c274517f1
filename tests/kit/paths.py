"""Where the project, its tests and its demo MCP server are."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
DEMO_SERVER = ROOT / "main_process" / "demo_server.py"
PYTHON = sys.executable
