"""DeviceMirror (main_process/device_mirror.py) round by round, on a real web dir and the web
window's own pairing and revoking (web_process/devices.py), with the store's table faked in
memory: what is paired or revoked while the store is away is kept and written once it is back,
a device revoked elsewhere leaves this main's file, and a revoked device never comes back."""

import asyncio
from collections.abc import Iterable, Sequence
from pathlib import Path

from main_process.device_mirror import DeviceMirror
from shared.web_devices import write_device_entries
from web_process.devices import WebDir


class FakeTable:
    """The store's web_devices in memory; `away` makes every call fail as an unreachable store's does."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, object]] = {}
        self.revoked: set[str] = set()
        self.away = False

    async def entries(self) -> tuple[list[dict[str, object]], set[str]] | None:
        if self.away:
            return None
        return [dict(row) for i, row in self.rows.items() if i not in self.revoked], set(self.revoked)

    async def add(self, entries: Sequence[dict[str, object]]) -> bool:
        if self.away:
            return False
        for entry in entries:
            self.rows.setdefault(str(entry["id"]), dict(entry))
        return True

    async def revoke(self, device_ids: Iterable[str]) -> bool:
        if self.away:
            return False
        self.revoked |= {i for i in device_ids if i in self.rows}
        return True


def names(web: WebDir) -> list[str]:
    return sorted(device.name for device in web.devices())


def test_two_mains_mirror_pairings_and_revokes_both_ways_and_keep_them_while_the_store_is_away(tmp_path: Path) -> None:
    table = FakeTable()
    web_a, web_b = WebDir(tmp_path / "a"), WebDir(tmp_path / "b")
    mirror_a, mirror_b = DeviceMirror(table, web_a.path), DeviceMirror(table, web_b.path)

    async def both() -> None:
        assert await mirror_a.mirror_once() and await mirror_b.mirror_once()

    async def scenario() -> None:
        phone, credential = web_a.redeem(web_a.new_code("ana's phone"))
        await both()
        assert web_b.device_for(credential) == phone

        table.away = True  # paired on B and revoked on B while the store is away: kept, files unchanged
        tablet, tablet_credential = web_b.redeem(web_b.new_code("ben's tablet"))
        web_b.revoke("ana's phone")
        assert not await mirror_b.mirror_once()
        assert names(web_b) == ["ben's tablet"] and names(web_a) == ["ana's phone"]

        table.away = False  # back: B's round writes both, A's round takes them
        await mirror_b.mirror_once()
        await mirror_a.mirror_once()
        assert web_a.device_for(credential) is None and web_a.device_for(tablet_credential) == tablet
        assert names(web_b) == ["ben's tablet"]

        # A file that still lists a revoked device (a copy restored, a main that was down) loses it.
        entries = [{"id": phone.id, "name": phone.name, "tokenSha256": table.rows[phone.id]["tokenSha256"],
                    "pairedAt": phone.paired_at}, *[dict(row) for i, row in table.rows.items() if i != phone.id]]
        restarted = DeviceMirror(table, web_a.path)
        write_device_entries(web_a.path, entries)
        assert await restarted.mirror_once()
        assert web_a.device_for(credential) is None and names(web_a) == ["ben's tablet"]
        assert phone.id not in {str(row["id"]) for row in (await table.entries() or ([], set()))[0]}

    asyncio.run(scenario())
