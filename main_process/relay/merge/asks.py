"""ServerAsks: the servers' requests to the host (sampling, roots, elicitation, ping).

Each gets a fresh id toward the host (two servers may use the same one), and the host's answer goes
back to that server under the server's own id; cancellations follow both ways, and the host's
progress on a request goes to the server that made it.
"""

import logging
from itertools import count
from typing import Any

from main_process.relay.merge.records import Id, Member
from main_process.relay.merge.state import Shared
from main_process.relay.merge.wire import hashable
from shared import jsonrpc

logger = logging.getLogger(__name__)


class ServerAsks:
    def __init__(self, state: Shared) -> None:
        self._state = state
        self._asks = count(1)
        self._asked: dict[Id, tuple[str, Id]] = {}  # host-facing id of a server's request -> (server, its id)
        self._asked_back: dict[tuple[str, Id], Id] = {}
        self._tokens: dict[object, str] = {}  # progress tokens of the servers' requests -> server

    def forward(self, member: Member, envelope: jsonrpc.Envelope, raw: bytes) -> None:
        """A server's request, to the host under a fresh id."""
        original = envelope.id
        assert isinstance(original, (int, str))
        host_facing = next(self._asks)
        self._asked[host_facing] = (member.name, original)
        self._asked_back[(member.name, original)] = host_facing
        if b"progressToken" in raw:
            meta = envelope.params_dict().get("_meta")
            if isinstance(meta, dict) and "progressToken" in meta:
                self._tokens[hashable(meta["progressToken"])] = member.name
        self._state.to_host(jsonrpc.with_id(raw, host_facing))

    def answered(self, envelope: jsonrpc.Envelope, raw: bytes) -> None:
        """The host's answer to a server's request: back to that server, under its own id."""
        asked = self._asked.pop(envelope.id, None) if isinstance(envelope.id, (int, str)) else None
        if asked is None:
            logger.debug("dropped the host's answer to %r: no server asks that", envelope.id)
            return
        server, original = asked
        self._asked_back.pop(asked, None)
        member = self._state.members.get(server)
        if member is not None:
            member.upstream.from_host(jsonrpc.with_id(raw, original))

    def withdrawn(self, member: Member, method: str, params: dict[str, Any], request_id: Id) -> bool:
        """The server cancels a request of its own: the host hears it under its id (False: not one
        of the server's requests to the host)."""
        host_facing = self._asked_back.pop((member.name, request_id), None)
        if host_facing is None:
            return False
        self._asked.pop(host_facing, None)
        self._state.to_host(jsonrpc.notification(method, {**params, "requestId": host_facing}))
        return True

    def progress(self, params: dict[str, Any], raw: bytes) -> None:
        """The host's progress on a server's request: to that server."""
        server = self._tokens.get(hashable(params.get("progressToken")))
        if server in self._state.members:
            self._state.members[server].upstream.from_host(raw)

    def forget(self, server: str, why: str) -> None:
        """The server left the session: the host hears its requests are cancelled."""
        for key in [key for key in self._asked_back if key[0] == server]:
            host_facing = self._asked_back.pop(key)
            self._asked.pop(host_facing, None)
            self._state.to_host(jsonrpc.notification("notifications/cancelled",
                                                     {"requestId": host_facing, "reason": why}))
