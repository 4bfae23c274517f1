"""Descriptors closed twice, caught in the processes a test starts (kit/ebadf_site/sitecustomize.py).

`DoubleCloses(dir).env(base)` is a child's environment in which every `os.close` that finds its
descriptor already closed (EBADF) is reported on the child's stderr and in a file; `check()` fails
the test with the reports. Nothing in the product reads the variable: the site directory on the
child's PYTHONPATH is what installs the check.

    closes = DoubleCloses(tmp_path)
    main = start_main_with(closes.env(child_env(home)), config, runtime, home)
    ... serve processes with closes.env(child_env()) ...
    closes.check()
"""

import os
from pathlib import Path

from kit.main import RunningMain, start_main

SITE = Path(__file__).parent / "ebadf_site"
LOG_ENV = "ELICITRON_TEST_EBADF_LOG"


class DoubleCloses:
    def __init__(self, directory: Path) -> None:
        self.log = directory / "ebadf.log"

    def env(self, base: dict[str, str]) -> dict[str, str]:
        path = os.pathsep.join(part for part in (str(SITE), base.get("PYTHONPATH", "")) if part)
        return {**base, "PYTHONPATH": path, LOG_ENV: str(self.log)}

    def reports(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def check(self) -> None:
        reports = self.reports()
        assert not reports, f"a descriptor was closed twice:\n{reports}"


def start_main_with(env: dict[str, str], config: Path, runtime: Path, home: Path) -> RunningMain:
    """`elicitron main` as kit.main.start_main starts it, in `env`; up when this returns."""
    return start_main(config, runtime, home=home, env=env)
