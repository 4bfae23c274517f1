"""The official MCP conformance suite in client mode judges Elicitron's main as an OAuth client:
`conformance client --command "python tests/conformance_client.py" --scenario S` starts the
scenario's servers, and tests/conformance_client.py runs a fresh main against them and signs in as a
person would (every sign-in card accepted, its URL opened by a redirect-following HTTP client).

Here: the 2025-03-26 scenarios, a server that publishes its authorization-server metadata at its
root with no protected-resource metadata, and one with no metadata at all (main signs in at the
fallback endpoints with PKCE S256). Needs npm (the suite and its Node 22 come from the npm
registry, installed once into ~/.cache/elicitron, as scripts/conformance does): skipped without it.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import conformance

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")]

CLIENT = Path(__file__).resolve().parent / "conformance_client.py"


@pytest.fixture(scope="module")
def suite() -> tuple[Path, Path]:
    return conformance.ensure_suite()


def run_client_scenario(suite: tuple[Path, Path], scenario: str, out: Path) -> tuple[list[dict[str, Any]], str]:
    """The scenario's checks, and the suite's log (its stderr, which holds the client's)."""
    node, entry = suite
    done = subprocess.run([str(node), str(entry), "client", "--command", f"{sys.executable} {CLIENT}",
                           "--scenario", scenario, "--output-dir", str(out)],
                          capture_output=True, text=True, timeout=180, check=False)
    found = sorted(out.glob("**/checks.json"))
    assert found, f"the suite wrote no checks for {scenario} (exit {done.returncode}):\n{done.stderr[-3000:]}"
    return json.loads(found[0].read_text()), done.stderr


@pytest.mark.parametrize("scenario", ["auth/2025-03-26-oauth-metadata-backcompat",
                                      "auth/2025-03-26-oauth-endpoint-fallback"])
def test_main_signs_in_to_a_2025_03_26_server(suite: tuple[Path, Path], scenario: str, tmp_path: Path) -> None:
    checks, log = run_client_scenario(suite, scenario, tmp_path)
    judged = {str(c.get("id")): str(c.get("status")) for c in checks if c.get("status") in ("SUCCESS", "FAILURE")}
    failed = {key: status for key, status in judged.items() if status != "SUCCESS"}
    assert judged and not failed, f"{scenario}: {failed}\n{log[-4000:]}"
    for expected in ("client-registration", "authorization-request", "token-request"):
        assert judged.get(expected) == "SUCCESS", f"{scenario}: no {expected}\n{log[-4000:]}"
    assert "Client exited with code" not in log, log[-4000:]  # the tool call after sign-in came back
    warnings = [c for c in checks if c.get("status") == "WARNING"]
    assert not warnings, warnings
