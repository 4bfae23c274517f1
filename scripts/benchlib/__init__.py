"""Pieces of `scripts/bench`: one module per figure, plus the scripted peers they drive.

Mains, peers, the contract oracle and the window probe come from the testing kit (tests/kit,
imported as `kit`), the same the test suite uses: written from wire contract v1 (DESIGN.md
section 3) with raw pyzmq + msgpack, so what the benchmark measures is what a third-party peer
would see.
"""

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[2] / "tests")
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)  # the kit, also in a figure's own child process (`-m benchlib.roundtrip`)
