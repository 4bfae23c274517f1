"""Paired web devices on a store many mains share: this main's web dir's devices.json and the
store's `web_devices` (interface.py: DeviceTable) kept the same, both ways, every MIRROR_S.

The web window goes on pairing, checking and revoking in devices.json alone (web_process/devices.py
reads the file again on every check), so it needs no new topic and works the same on SQLite. Each
round, under the file's lock (shared/web_devices.py: the web window's pairing and `elicitron devices
revoke` take it too, so no change is undone):
- a device in the file that this mirror did not put there was paired through this main: to the store;
- one this mirror saw in the file and that is gone from it was revoked here: revoked in the store;
- the file becomes the store's devices not revoked, with what is still to be written added and
  what is still to be revoked left out (a store that is away keeps both until it is back).
A device paired through main A is so in main B's file within about a second, and a revoke on any
main reaches every main's file as fast; a revoked id never comes back (its row stays, marked).
"""

import asyncio
import logging
from pathlib import Path
from typing import Final

from main_process.store.interface import DeviceTable
from shared.web_devices import device_entries, devices_locked, write_device_entries

logger = logging.getLogger(__name__)

MIRROR_S: Final = 1.0  # one small read of the store per main per round (a team pairs a handful of devices)

Entry = dict[str, object]


class DeviceMirror:
    def __init__(self, table: DeviceTable, web_dir: Path, interval_s: float = MIRROR_S) -> None:
        self._table = table
        self._web_dir = web_dir
        self._interval_s = interval_s
        self._known: set[str] = set()  # the ids the file had after the last round (none yet: all are new)
        self._to_add: dict[str, Entry] = {}  # paired here, not yet in the store
        self._to_revoke: set[str] = set()  # revoked here, not yet in the store
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            await self.mirror_once()
            await asyncio.sleep(self._interval_s)  # a period, not a wait for something

    async def mirror_once(self) -> bool:
        """One round; False when the store could not be read (the file is left as it is)."""
        stored = await self._table.entries()
        if stored is None:
            return False
        try:
            added, removed = await asyncio.to_thread(self._merge, *stored)
        except OSError as exc:  # the web dir unwritable: the store is unchanged, next round tries again
            logger.warning("paired web devices: cannot mirror %s: %s", self._web_dir, exc)
            return False
        self._to_add.update(added)
        self._to_revoke |= removed
        for device_id in removed:
            self._to_add.pop(device_id, None)
        if self._to_add and await self._table.add(list(self._to_add.values())):
            logger.info("paired web devices: %d paired here, stored for every main", len(self._to_add))
            self._to_add.clear()
        if self._to_revoke and await self._table.revoke(self._to_revoke):
            logger.info("paired web devices: %d revoked here, revoked on every main", len(self._to_revoke))
            self._to_revoke.clear()
        return True

    def _merge(self, live: list[Entry], revoked: set[str]) -> tuple[dict[str, Entry], set[str]]:
        """(devices paired here since the last round, ids revoked here since), the file rewritten
        as the store has it. Runs on a thread: the file's lock may be held a moment by the web window."""
        with devices_locked(self._web_dir):
            local = {str(entry.get("id")): entry for entry in device_entries(self._web_dir)}
            live_ids = {str(entry.get("id")) for entry in live}
            added = {i: e for i, e in local.items() if i not in self._known and i not in live_ids and i not in revoked}
            removed = self._known - local.keys()
            left_out = revoked | removed | self._to_revoke
            kept = {**self._to_add, **added}
            wanted = [e for e in live if str(e.get("id")) not in left_out] + [
                e for i, e in kept.items() if i not in live_ids and i not in left_out]
            wanted.sort(key=_paired_at)
            if {_shown(e) for e in wanted} != {_shown(e) for e in local.values()}:
                write_device_entries(self._web_dir, wanted)
            self._known = {str(e.get("id")) for e in wanted}
        return added, removed


def _paired_at(entry: Entry) -> float:
    paired_at = entry.get("pairedAt", 0)
    return float(paired_at) if isinstance(paired_at, int | float) else 0.0


def _shown(entry: Entry) -> tuple[str, str, float, str]:
    return str(entry.get("id")), str(entry.get("name")), _paired_at(entry), str(entry.get("tokenSha256"))
