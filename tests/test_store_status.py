"""`elicitron status` lists main's store from main's msgStatus reply (StatusReport.store): the
SQLite default with no PostgreSQL anywhere, and a PostgreSQL store with every main on it."""

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from consent_kit import ConsentMain, demo
from kit.env import short_tmp_dir
from kit.main import start_main
from kit.postgres import PostgresServer
from team_kit import Mains

from main_process.store.url import redact


@pytest.fixture
def mains(pg_url: str) -> Iterator[Mains]:
    started = Mains(pg_url)
    yield started
    started.close()


@pytest.mark.slow
def test_status_lists_the_sqlite_store_of_the_default() -> None:
    home = short_tmp_dir("eli-status-home-")
    config = home / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"demo": demo()}}))
    main = ConsentMain(start_main(config, home, home=home), config, home)
    try:
        shown = main.cli("status")
        assert shown.returncode == 0, shown.stderr
        [line] = [line for line in shown.stdout.splitlines() if line.startswith("store:")]
        assert line == f"store: SQLite {Path(home) / 'data' / 'elicitron'}"
        store = json.loads(main.cli("status", "--json").stdout)["store"]
        assert store["kind"] == "SQLite" and "mains" not in store
    finally:
        main.stop()
        shutil.rmtree(home, ignore_errors=True)


def _status_once_both_are_listed(main: ConsentMain, other: str) -> str:
    deadline = time.monotonic() + 15.0  # each main reads the store's mains with its heartbeat (every second)
    while True:
        shown = main.cli("status")
        assert shown.returncode == 0, shown.stderr
        if f"{other} (pid" in shown.stdout:
            return shown.stdout
        assert time.monotonic() < deadline, f"status never listed both mains: {shown.stdout}"


def test_status_lists_the_postgresql_store_and_both_mains_on_it(mains: Mains, postgres: PostgresServer) -> None:
    first, second = mains.start_all("laptop-a", "laptop-b")
    shown = _status_once_both_are_listed(first, "laptop-b")
    lines = shown.splitlines()
    assert f"store: PostgreSQL {redact(mains.url)} (machine laptop-a): reachable" in lines
    [listed] = [line for line in lines if "mains on it" in line]
    assert listed.startswith("  mains on it (2): laptop-a (pid "), listed  # the main asked comes first
    [listed] = [line for line in _status_once_both_are_listed(second, "laptop-a").splitlines() if "mains on it" in line]
    assert listed.startswith("  mains on it (2): laptop-b (pid "), listed
    assert postgres.password not in shown
    store = json.loads(first.cli("status", "--json").stdout)["store"]
    assert (store["kind"], store["reachable"], store["machine"]) == ("PostgreSQL", True, "laptop-a")
    assert sorted(m["machine"] for m in store["mains"]) == ["laptop-a", "laptop-b"]
    assert postgres.password not in json.dumps(store)
