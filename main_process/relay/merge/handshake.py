"""Handshake: the host's `initialize` (and 2026-07-28 `server/discover`) at every server, one answer.

The host's `initialize` goes to every server as the host sent it; the host gets one answer once all
answered or HANDSHAKE_TIMEOUT_S passed (a server that failed is left out; one that answers late
joins then, and the host hears its lists changed, as does a server added after the handshake): the
capabilities are the union, `serverInfo` is Elicitron's, the instructions every server's. The
protocol version is the host's when every server that answered agreed to it, else the one most of
them chose (the newest of those on a tie). `server/discover` likewise (the versions every server
supports; a server that cannot answer it counts as speaking the handshake era only, so the host
falls back to it and reaches every server). What the host sends meanwhile waits (`busy`).
"""

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec

from main_process.relay.merge.fanout import FanOuts
from main_process.relay.merge.records import FanOut, Headers, Id, Member
from main_process.relay.merge.state import Shared
from main_process.relay.merge.versions import HANDSHAKE_VERSIONS, negotiated_version, server_info
from main_process.relay.merge.wire import cache_fields, shaped
from shared import jsonrpc
from shared.merged_names import Exposure, combined_instructions
from shared.messages import ServerInfo

logger = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT_S: Final = 20.0  # a server slower than this to answer initialize joins once it does
MODERN_VERSIONS: Final = ("2026-07-28",)  # mcp_types.version.MODERN_PROTOCOL_VERSIONS, without loading mcp
UNSUPPORTED_VERSION: Final = -32022


class Handshake:
    """`ready` is called when what waits for the handshake may go; `joined` when a server joined
    after the host's handshake (the host hears every list changed)."""

    def __init__(self, state: Shared, fans: FanOuts, *, ready: Callable[[], None],
                 joined: Callable[[], None]) -> None:
        self._state = state
        self._fans = fans
        self._ready = ready
        self._on_joined = joined
        self._handshaking = False  # the host's initialize is at the servers: what follows waits for it
        self._joining: set[str] = set()  # servers added since, being initialized: what follows waits too
        self._init_params: dict[str, Any] | None = None
        self._initialized: bytes | None = None  # the host's notifications/initialized

    @property
    def busy(self) -> bool:
        """A handshake is under way: the host's next messages wait for it."""
        return self._handshaking or bool(self._joining)

    # ---- the host's initialize -----------------------------------------------------------------

    def initialize(self, host_id: Id, params: dict[str, Any], headers: Headers) -> None:
        self._state.era = "handshake"
        self._init_params = params
        self._state.host_ready = False
        members = list(self._state.members.values())
        for member in members:
            member.handshake = "asking"
            if member.discovered:
                # A host whose server/discover went unanswered in its own time (mcp's Client waits
                # 10 s) falls back to the handshake; a session that answered discover refuses an
                # initialize, so that server gets a fresh session for it.
                member.discovered = False
                member.outstanding.clear()
                member.upstream.close()
                member.upstream = self._state.open_server(member.name)
        self._handshaking = True
        self._fans.start("initialize", params, members, host_id=host_id, headers=headers,
                         timeout=HANDSHAKE_TIMEOUT_S, done=self._initialize_done, late=self._late_answer)

    def _initialize_done(self, fan: FanOut) -> None:
        for name, member in self._state.members.items():
            if name in fan.results:
                self._handshake_from(member, fan.results[name])
            elif name in fan.errors:
                member.handshake = "failed"
                logger.warning("server %s is left out: its initialize failed: %s", name,
                               fan.errors[name].get("message"))
        for name in fan.timed_out:
            logger.warning("server %s did not answer initialize within %.0f s: left out until it does",
                           name, HANDSHAKE_TIMEOUT_S)
        ready = [member for member in self._state.members.values() if member.handshake == "yes"]
        requested = fan.params.get("protocolVersion")
        result: dict[str, Any] = {
            "protocolVersion": self._version(requested, ready),
            "capabilities": self._union([member.capabilities or {} for member in ready]),
            "serverInfo": server_info(Exposure()),
        }
        instructions = self._instructions(ready)
        if instructions is not None:
            result["instructions"] = instructions
        self._state.host_ready = True
        self._handshaking = False
        if fan.host_id is not None:
            self._state.to_host(jsonrpc.response(fan.host_id, result))
        self._ready()

    def initialized(self, raw: bytes) -> None:
        """The host's notifications/initialized: to every server, and kept for the ones that join."""
        self._initialized = raw
        for member in self._state.active():
            member.upstream.from_host(raw)

    @staticmethod
    def _handshake_from(member: Member, result: dict[str, Any]) -> None:
        member.handshake = "yes"
        capabilities = result.get("capabilities")
        member.capabilities = capabilities if isinstance(capabilities, dict) else {}
        instructions = result.get("instructions")
        member.instructions = instructions if isinstance(instructions, str) else None
        version = result.get("protocolVersion")
        member.version = version if isinstance(version, str) else None

    @staticmethod
    def _version(requested: object, ready: list[Member]) -> str:
        """The host's version when every server agreed to it; else the one most servers chose (the
        newest of those on a tie); with no server, what Elicitron itself would answer."""
        versions = [member.version for member in ready if member.version is not None]
        if not versions:
            return negotiated_version(requested if isinstance(requested, str) else "")
        if all(version == requested for version in versions):
            return versions[0]
        tally = Counter(versions)
        top = max(tally.values())
        chosen = max(version for version, n in tally.items() if n == top)
        logger.warning("the servers answered the host's %s with different versions (%s); the host is told %s",
                       requested, ", ".join(f"{m.name} {m.version}" for m in ready), chosen)
        return chosen

    # ---- servers that join later ---------------------------------------------------------------

    def join(self, member: Member) -> None:
        """A server added: once the host has sent its initialize, initialized as the others were."""
        if self._init_params is None:
            return
        member.handshake = "asking"
        self._joining.add(member.name)
        self._fans.start("initialize", self._init_params, [member], host_id=None, headers=None,
                         timeout=HANDSHAKE_TIMEOUT_S, done=lambda fan: self._joined(member, fan),
                         late=self._late_answer)

    def _joined(self, member: Member, fan: FanOut) -> None:
        self._joining.discard(member.name)
        if member.name in fan.results:
            self._late_handshake(member, fan.results[member.name])
        elif member.name in fan.errors:
            member.handshake = "failed"
            logger.warning("server %s is left out: its initialize failed: %s", member.name,
                           fan.errors[member.name].get("message"))
        if not self._joining:
            self._ready()

    def left(self, name: str) -> None:
        """The server left the session: nothing waits for its handshake."""
        self._joining.discard(name)

    def _late_answer(self, member: Member, envelope: jsonrpc.Envelope) -> None:
        """An initialize answered after its time: the server joins now (or is left out)."""
        if envelope.result is not msgspec.UNSET:
            self._late_handshake(member, envelope.result_dict())
        else:
            member.handshake = "failed"
            logger.warning("server %s is left out: its late initialize failed: %s", member.name,
                           envelope.error_dict().get("message"))

    def _late_handshake(self, member: Member, result: dict[str, Any]) -> None:
        if self._state.members.get(member.name) is not member:
            return
        self._handshake_from(member, result)
        logger.info("server %s answered its initialize: it joins the session", member.name)
        if self._initialized is not None:
            member.upstream.from_host(self._initialized)
        if self._state.host_ready:
            self._on_joined()

    # ---- 2026-07-28: server/discover -----------------------------------------------------------

    def discover(self, host_id: Id, params: dict[str, Any], headers: Headers) -> None:
        members = list(self._state.members.values())
        for member in members:
            member.discovered = True
        self._fans.start("server/discover", params, members, host_id=host_id, headers=headers,
                         timeout=HANDSHAKE_TIMEOUT_S, done=self._discover_done)

    def _discover_done(self, fan: FanOut) -> None:
        answered: list[Member] = []
        supported: list[list[str]] = []
        for name, member in self._state.members.items():
            if name in fan.results:
                answer = fan.results[name]
                capabilities = answer.get("capabilities")
                member.capabilities = capabilities if isinstance(capabilities, dict) else {}
                instructions = answer.get("instructions")
                member.instructions = instructions if isinstance(instructions, str) else None
                listed = answer.get("supportedVersions")
                supported.append([v for v in listed if isinstance(v, str)] if isinstance(listed, list) else [])
                answered.append(member)
            elif name in fan.errors:
                error = fan.errors[name]
                data = error.get("data")
                named = data.get("supported") if error.get("code") == UNSUPPORTED_VERSION and isinstance(data, dict) \
                    else None
                # A server that cannot answer discover speaks the handshake era (at most): so does the host.
                supported.append([v for v in named if isinstance(v, str)] if isinstance(named, list)
                                 else list(HANDSHAKE_VERSIONS))
                logger.info("server %s did not answer server/discover (%s): it counts as speaking %s", name,
                            error.get("message"), ", ".join(supported[-1]) or "no version")
        for name in fan.timed_out:
            logger.warning("server %s did not answer server/discover within %.0f s: left out", name,
                           HANDSHAKE_TIMEOUT_S)
        if supported:
            versions = [v for v in supported[0] if all(v in other for other in supported[1:])]
        else:
            versions = [*HANDSHAKE_VERSIONS, *MODERN_VERSIONS]
        result: dict[str, Any] = {
            "supportedVersions": versions,
            "capabilities": self._union([member.capabilities or {} for member in answered]),
            **cache_fields(fan.results.values()),
        }
        instructions = self._instructions(answered)
        if instructions is not None:
            result["instructions"] = instructions
        if fan.host_id is not None:
            self._state.to_host(jsonrpc.response(fan.host_id, shaped(result, True)))

    # ---- the answer's parts --------------------------------------------------------------------

    @staticmethod
    def _union(capabilities: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """Every server's capabilities in one: objects merged, flags OR-ed, the first value otherwise.
        A list any server offers is declared `listChanged`: the merger announces changes to the set
        of servers (and main's notices of restarts) whatever each server says of itself."""
        merged: dict[str, Any] = {}
        for one in capabilities:
            _deep_merge(merged, one)
        for name in ("tools", "prompts", "resources"):
            if isinstance(merged.get(name), dict):
                merged[name] = {**merged[name], "listChanged": True}
        return merged

    @staticmethod
    def _instructions(members: list[Member]) -> str | None:
        known = {member.name: ServerInfo(name=member.name, status="ready", tools=[],
                                         instructions=member.instructions) for member in members}
        return combined_instructions(Exposure(), known) if members else None


def _deep_merge(into: dict[str, Any], other: dict[str, Any]) -> None:
    for key, value in other.items():
        mine = into.get(key)
        if isinstance(mine, dict) and isinstance(value, dict):
            _deep_merge(mine, value)
        elif isinstance(value, dict):
            if key not in into or mine is None:
                into[key] = {}
                _deep_merge(into[key], value)
        elif isinstance(value, bool) and (isinstance(mine, bool) or key not in into):
            into[key] = bool(mine) or value
        elif key not in into:
            into[key] = value
