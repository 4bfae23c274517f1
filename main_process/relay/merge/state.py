"""Shared: what every part of the merged session reads and writes — the way to the host, the
servers, the host's requests in flight, the era, the tasks and where they are — and the few
questions about it they all ask (which servers take requests, a fresh id toward a server)."""

from collections.abc import Callable
from itertools import count
from typing import Any, Final, Literal

from main_process.relay.merge.records import CallLater, Id, Member, Opened, Upstream

MAX_TASKS: Final = 10_000


class Shared:
    """One merged session's state, held by each of its parts (`to_host` gets each message for the
    host; `open_server(name)` gives the relayed session with server `name`)."""

    def __init__(self, to_host: Callable[[bytes], None], open_server: Callable[[str], Upstream],
                 call_later: CallLater) -> None:
        self.to_host = to_host
        self.open_server = open_server
        self.call_later = call_later
        self.members: dict[str, Member] = {}  # in config order
        self.by_host: dict[Id, Opened] = {}  # the host's requests in flight, by the host's id
        self.era: Literal["handshake", "modern"] | None = None
        self.host_ready = False  # the host has its handshake answer
        self.closed = False
        self.envelope: dict[str, Any] = {}  # a 2026-07-28 host's _meta, for the merger's own requests
        self.tasks: dict[str, str] = {}  # task id -> the server that has it
        self._ids = count(1)

    def active(self) -> list[Member]:
        """The servers a request goes to: in the handshake era those whose initialize succeeded."""
        if self.era == "handshake":
            return [member for member in self.members.values() if member.handshake == "yes"]
        return list(self.members.values())

    def fresh(self, member: Member) -> str:
        """An id for a request of the merger's own to `member`, none of its requests in flight has."""
        while True:
            upstream_id = f"elicitron-{next(self._ids)}"
            if upstream_id not in member.outstanding:
                return upstream_id

    def own_params(self) -> dict[str, Any]:
        """The params of the merger's own requests (a 2026-07-28 host's envelope)."""
        return {"_meta": dict(self.envelope)} if self.envelope else {}

    def note_task(self, member: Member | None, result: dict[str, Any]) -> None:
        """Remember which server a task is at (a CreateTaskResult, a task's status)."""
        if member is None:
            return
        task_id = result.get("taskId")
        if not isinstance(task_id, str) and isinstance(result.get("task"), dict):
            task_id = result["task"].get("taskId")
        if isinstance(task_id, str) and (result.get("resultType") == "task" or "status" in result
                                         or isinstance(result.get("task"), dict)):
            if len(self.tasks) >= MAX_TASKS:
                self.tasks.pop(next(iter(self.tasks)))
            self.tasks[task_id] = member.name
