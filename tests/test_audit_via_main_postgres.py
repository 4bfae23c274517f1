"""`elicitron audit` through a running main on a PostgreSQL store (issue 37, friction 7): a shell
with another HOME and no store URL sees main's rows from the database, `--json` byte for byte what
reading the store directly prints; and while the database is down, `audit` says so in one line,
without the store's password, and exits non-zero rather than hanging. Real main, demo server,
private PostgreSQL server (tests/kit/postgres.py), the CLI as a user runs it."""

import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit.postgres import PostgresServer
from team_kit import Mains
from test_audit_via_main import audit_file, decline_a_booking, elicitron

from main_process.store.url import redact

pytestmark = pytest.mark.slow  # a main, a PostgreSQL server, the CLI

UNREACHABLE_WITHIN_S = 30.0  # main's own reader gives up on a down store well before the CLI's wait


@pytest.fixture
def mains(pg_url: str) -> Iterator[Mains]:
    started = Mains(pg_url)
    yield started
    started.close()


def test_audit_from_another_home_reads_mains_postgresql_store_and_says_when_it_is_down(
        mains: Mains, postgres: PostgresServer, tmp_path: Path) -> None:
    main = mains.start("laptop-a")
    decline_a_booking(main)

    elsewhere = Path(tempfile.mkdtemp(prefix="other-home-", dir=tmp_path))
    table = elicitron(elsewhere, "audit", ELICITRON_CONNECTION=str(main.connection))
    assert table.returncode == 0, table.stderr
    header, *lines = table.stdout.splitlines()
    assert header.split() == ["CREATED", "MACHINE", "SERVER", "MODE", "OUTCOME", "BY", "ASKED", "MESSAGE"]
    assert len(lines) == 1 and "laptop-a" in lines[0] and "decline" in lines[0] and "kitchen" in lines[0], lines
    assert "Book a table at Noma?" in lines[0]

    through_main = elicitron(elsewhere, "audit", "--json", ELICITRON_CONNECTION=str(main.connection))
    assert through_main.returncode == 0, through_main.stderr
    rows = json.loads(through_main.stdout)
    assert [(r["machine"], r["outcome"], r["windowName"]) for r in rows] == [("laptop-a", "decline", "kitchen")]
    direct = elicitron(elsewhere, "audit", "--json", "--store", mains.url)
    assert direct.returncode == 0, direct.stderr
    assert direct.stdout == through_main.stdout
    assert not audit_file(elsewhere).exists(), "the other shell's HOME got no store of its own"

    said: dict[str, tuple[int, str, str, float]] = {}
    via_main = {"ELICITRON_CONNECTION": str(main.connection)}
    shapes = {"table": ["audit"], "json": ["audit", "--json"], "direct": ["audit", "--json", "--store", mains.url]}

    def while_down() -> None:
        for shape, args in shapes.items():
            began = time.monotonic()
            done = elicitron(elsewhere, *args, **via_main)
            said[shape] = (done.returncode, done.stdout, done.stderr, time.monotonic() - began)

    postgres.restart(while_down=while_down)
    for shape, (code, stdout, stderr, took) in said.items():
        assert (code, stdout) == (1, ""), f"{shape}: {stdout} {stderr}"
        [line] = stderr.splitlines()
        # main's store is open and its read fails; the CLI's own store cannot even be opened
        said_by = "elicitron: main says: cannot read the audit log: " if shape != "direct" else "elicitron: "
        assert line.startswith(f"{said_by}the store {redact(mains.url)} is unreachable: "), f"{shape}: {line}"
        assert postgres.password not in line, shape
        assert took < UNREACHABLE_WITHIN_S, f"{shape}: took {took:.1f} s"

    logged = main.stderr.text()
    assert "a peer's request failed" not in logged and postgres.password not in logged  # an answer, not a fault

    back = elicitron(elsewhere, "audit", "--json", ELICITRON_CONNECTION=str(main.connection))  # and back again
    assert (back.returncode, back.stdout) == (0, through_main.stdout), back.stderr
