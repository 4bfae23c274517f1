"""The official MCP conformance suite (server mode, default suite) can tell no difference between our
conformance server direct and the same server through Elicitron (`elicitron main --mcp-http`,
`/mcp/<server>`): every check that passes direct passes through, for a stdio server in main's
default protocolMode ("auto") and for a `url` server in "legacy". `scripts/conformance` runs every
target and `--suite all`; this is the part that runs in about a minute.

Needs npm (the suite and the Node >= 22 it runs on come from the npm registry, installed once into
~/.cache/elicitron, as scripts/conformance does): skipped without it.
"""

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from kit.zygote import launched

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import conformance

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")]

Checks = dict[str, list[dict[str, Any]]]


@pytest.fixture(scope="module")
def suite() -> tuple[Path, Path]:
    return conformance.ensure_suite()


@pytest.fixture(scope="module")
def direct(suite: tuple[Path, Path]) -> Checks:
    with conformance.conformance_server_over_http() as url:
        checks, problem = conformance.run_suite(*suite, url, "default")
    assert not problem, problem
    return checks


def judged(checks: Checks) -> dict[tuple[str, str], str]:
    """(scenario, check) -> SUCCESS or FAILURE: what the suite counts."""
    return {(scenario, str(check.get("id"))): str(check.get("status")) for scenario, items in checks.items()
            for check in items if check.get("status") in ("SUCCESS", "FAILURE")}


@pytest.mark.parametrize("transport,mode", [("stdio", "auto"), ("http", "legacy")])
def test_the_suite_sees_the_same_server_through_elicitron(suite: tuple[Path, Path], direct: Checks,
                                                          transport: str, mode: str) -> None:
    # main starts a server per host session (dozens in a run): forked from the zygote, not exec'd
    with conformance.through_elicitron(transport, mode, command=launched(conformance.CONFORMANCE_SERVER)) as url:
        through, problem = conformance.run_suite(*suite, url, "default")
    assert not problem, problem
    baseline = judged(direct)
    assert baseline and all(status == "SUCCESS" for status in baseline.values()), \
        f"the conformance server itself fails: {[k for k, v in baseline.items() if v != 'SUCCESS']}"
    seen = judged(through)
    lost = {key: seen.get(key, "not run") for key, status in baseline.items() if seen.get(key) != status}
    assert not lost, f"through Elicitron ({transport}, {mode}) differs from direct: {lost}"
    assert sorted(through) == sorted(direct)
