"""Listens: the host's `subscriptions/listen` streams (2026-07-28), and the news of changed lists.

A host's listen opens one stream per server that can honor part of its filter and merges them into
the host's stream: one acknowledgement first (every server's, or without one that is slower than
LISTEN_ACK_TIMEOUT_S), then every server's events, re-stamped with the host's subscription id. A
server's stream that ends after its acknowledgement ends the host's (the host listens again, as it
would with that server). The merger announces changed lists itself: as notifications in the
handshake era, as events on the listen streams that asked for them in 2026-07-28.
"""

import logging
from collections.abc import Iterable
from typing import Any, Final

import msgspec

from main_process.relay.merge.catalog import CHANGED, Catalog
from main_process.relay.merge.records import Headers, Id, Listen, ListenPart, Member
from main_process.relay.merge.state import Shared
from main_process.relay.merge.wire import cancelled, error_answer
from shared import jsonrpc

logger = logging.getLogger(__name__)

LISTEN_ACK_TIMEOUT_S: Final = 10.0  # a listen stream is acknowledged without a server that is this slow
SUBSCRIPTION_KEY: Final = "io.modelcontextprotocol/subscriptionId"
ANNOUNCE: Final = {  # main's ListName -> (the host's notification, the listen filter key, listings)
    "tools": ("notifications/tools/list_changed", "toolsListChanged", ("tools/list",)),
    "prompts": ("notifications/prompts/list_changed", "promptsListChanged", ("prompts/list",)),
    "resources": ("notifications/resources/list_changed", "resourcesListChanged",
                  ("resources/list", "resources/templates/list")),
}
_LISTEN_CAPABILITY: Final = {"toolsListChanged": "tools", "promptsListChanged": "prompts",
                             "resourcesListChanged": "resources"}


class Listens:
    def __init__(self, state: Shared, catalog: Catalog) -> None:
        self._state = state
        self._catalog = catalog

    def open(self, host_id: Id, params: dict[str, Any], headers: Headers) -> None:
        """The host's `subscriptions/listen`: to every server that can honor part of it."""
        requested = params.get("notifications")
        requested = requested if isinstance(requested, dict) else {}
        own = {key: True for key in _LISTEN_CAPABILITY if requested.get(key) is True}
        listen = Listen(host_id, requested, own)
        self._state.by_host[host_id] = listen
        sends: list[tuple[Member, bytes]] = []
        for member in self._state.active():
            wanted = self._filter(member, requested)
            if wanted:
                upstream_id = self._state.fresh(member)
                member.outstanding[upstream_id] = ListenPart(listen)
                listen.parts[member.name] = upstream_id
                listen.unacked.add(member.name)
                sends.append((member, jsonrpc.request(upstream_id, "subscriptions/listen",
                                                      {**params, "notifications": wanted})))
        if sends:
            listen.timer = self._state.call_later(LISTEN_ACK_TIMEOUT_S, lambda: self._acknowledge(listen))
        for member, raw in sends:
            if not listen.ended and member.name in listen.parts:
                member.upstream.from_host(raw, headers)
        if not listen.unacked:
            self._acknowledge(listen)

    def _filter(self, member: Member, requested: dict[str, Any]) -> dict[str, Any]:
        """The part of a listen filter this server can honor."""
        wanted: dict[str, Any] = {}
        capabilities = member.capabilities
        for key, value in requested.items():
            if key in _LISTEN_CAPABILITY:
                offered = capabilities.get(_LISTEN_CAPABILITY[key]) if capabilities is not None else {}
                if value is True and isinstance(offered, dict) \
                        and (capabilities is None or offered.get("listChanged") is True):
                    wanted[key] = True
            elif key == "resourceSubscriptions":
                resources = capabilities.get("resources") if capabilities is not None else {}
                if not isinstance(resources, dict) or (capabilities is not None and resources.get("subscribe") is not True):
                    continue
                uris = []
                for uri in value if isinstance(value, list) else ():
                    owner = self._catalog.resource_owner(uri, True) if isinstance(uri, str) else None
                    if owner is member or not isinstance(owner, Member):
                        uris.append(uri)
                if uris:
                    wanted[key] = uris
            elif key == "taskIds" and isinstance(value, list):
                ids = [task for task in value if self._state.tasks.get(task, member.name) == member.name]
                if ids:
                    wanted[key] = ids
            elif value is not None and value is not False:
                wanted[key] = value  # an extension's key: each server honors it or not
        return wanted

    def event(self, member: Member, envelope: jsonrpc.Envelope) -> bool:
        """A frame of one of the server's listen streams (True), re-stamped for the host's stream."""
        params = envelope.params_dict()
        meta = params.get("_meta")
        subscription = meta.get(SUBSCRIPTION_KEY) if isinstance(meta, dict) else None
        part = member.outstanding.get(subscription) if isinstance(subscription, (int, str)) else None
        if not isinstance(part, ListenPart):
            return False
        listen = part.listen
        assert isinstance(meta, dict)
        if envelope.method == "notifications/subscriptions/acknowledged":
            honored = params.get("notifications")
            listen.honored[member.name] = honored if isinstance(honored, dict) else {}
            listen.unacked.discard(member.name)
            if not listen.unacked:
                self._acknowledge(listen)
            return True
        if envelope.method in CHANGED:
            member.stale.update(CHANGED[envelope.method])
        event = jsonrpc.notification(str(envelope.method),
                                     {**params, "_meta": {**meta, SUBSCRIPTION_KEY: listen.host_id}})
        if listen.acknowledged:
            self._state.to_host(event)
        else:
            listen.buffer.append(event)
        return True

    def _acknowledge(self, listen: Listen) -> None:
        if listen.acknowledged or listen.ended:
            return
        listen.acknowledged = True
        if listen.timer is not None:
            listen.timer.cancel()
        for name in listen.unacked:
            logger.warning("server %s did not acknowledge subscriptions/listen in time; the stream goes on "
                           "without its acknowledgement", name)
        listen.unacked.clear()
        honored: dict[str, Any] = dict(listen.own)
        for one in listen.honored.values():
            for key, value in one.items():
                if isinstance(value, list):
                    honored[key] = list(dict.fromkeys([*honored.get(key, []), *value]))
                elif value is True or key not in honored:
                    honored[key] = value
        self._state.to_host(jsonrpc.notification("notifications/subscriptions/acknowledged", {
            "notifications": honored, "_meta": {SUBSCRIPTION_KEY: listen.host_id}}))
        buffered, listen.buffer = listen.buffer, []
        for event in buffered:
            self._state.to_host(event)

    def answered(self, member: Member, listen: Listen, envelope: jsonrpc.Envelope) -> None:
        """One server's listen ended: before its acknowledgement, it honors nothing (left out); after
        it, the host's stream ends too (the host listens again, as it would with that server)."""
        listen.parts.pop(member.name, None)
        if listen.ended:
            return
        if member.name in listen.unacked:
            listen.unacked.discard(member.name)
            logger.info("server %s refused subscriptions/listen: %s", member.name,
                        envelope.error_dict().get("message") if envelope.error is not msgspec.UNSET else "ended")
            if not listen.unacked:
                self._acknowledge(listen)
            return
        self.end(listen, envelope)

    def lost(self, member: Member, listen: Listen, reason: object) -> None:
        """A server tore its listen stream down: so is the host's (it listens again)."""
        listen.parts.pop(member.name, None)
        if listen.ended:
            return
        if member.name in listen.unacked:
            listen.unacked.discard(member.name)
            if not listen.unacked:
                self._acknowledge(listen)
            return
        self.end(listen, None, reason=reason)
        self._state.to_host(cancelled(listen.host_id, reason if isinstance(reason, str) else
                                      f"server {member.name!r} ended its subscription"))

    def left(self, member: Member, listen: Listen) -> None:
        """`member` left the session: the stream goes on without it (acknowledged, if it was the
        last to)."""
        listen.parts.pop(member.name, None)
        if member.name in listen.unacked:
            listen.unacked.discard(member.name)
            if not listen.unacked:
                self._acknowledge(listen)

    def end(self, listen: Listen, ending: jsonrpc.Envelope | None, reason: object = None) -> None:
        """Every server's stream of this listen is cancelled; the host is answered unless it
        cancelled (`ending` None)."""
        if listen.ended:
            return
        listen.ended = True
        if listen.timer is not None:
            listen.timer.cancel()
        if self._state.by_host.get(listen.host_id) is listen:
            del self._state.by_host[listen.host_id]
        for name, upstream_id in listen.parts.items():
            member = self._state.members.get(name)
            if member is not None and member.outstanding.pop(upstream_id, None) is not None:
                member.upstream.from_host(cancelled(upstream_id, reason or "the subscription ended"))
        listen.parts.clear()
        if ending is None:
            return
        if ending.error is not msgspec.UNSET:
            self._state.to_host(error_answer(listen.host_id, ending.error_dict()))
        else:
            self._state.to_host(jsonrpc.response(listen.host_id, {"_meta": {SUBSCRIPTION_KEY: listen.host_id},
                                                                  "resultType": "complete"}))

    def announce(self, lists: Iterable[str]) -> None:
        """Tell the host these lists changed: notifications in the handshake era, events on its
        listen streams in 2026-07-28."""
        names = [name for name in lists if name in ANNOUNCE]
        for name in names:
            for member in self._state.members.values():
                member.stale.update(ANNOUNCE[name][2])
        if self._state.era == "handshake" and self._state.host_ready:
            for name in names:
                self._state.to_host(jsonrpc.notification(ANNOUNCE[name][0], {}))
        for listen in [opened for opened in self._state.by_host.values() if isinstance(opened, Listen)]:
            for name in names:
                method, key, _ = ANNOUNCE[name]
                if listen.own.get(key):
                    event = jsonrpc.notification(method, {"_meta": {SUBSCRIPTION_KEY: listen.host_id}})
                    if listen.acknowledged:
                        self._state.to_host(event)
                    else:
                        listen.buffer.append(event)
