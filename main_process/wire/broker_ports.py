"""What the broker offers the rest of main, one small object per part that uses it: what every part
tells the peers (`Publisher`), and the ports the servers (servers.py), the consent layer
(consent.py) and relayed sessions (relay.py) are made with."""

from collections.abc import Callable
from typing import Protocol

from main_process.consent.elicitation_gate import ElicitationGate
from main_process.consent.pending import Elicitation, PendingRequests, RequestOptions, Unanswered
from main_process.wire.attachments import Attachments
from main_process.wire.peers import Peer
from shared import channels
from shared.messages import (
    Bye,
    ElicitationComplete,
    ElicitationResult,
    ListChanged,
    ListName,
    Notice,
    RuleInfo,
    RulesUpdate,
    ServerInfo,
    ServersUpdate,
)


class ServerWatcher(Protocol):
    """Who in main follows the servers as the host peers do (main's merged sessions)."""

    def servers_changed(self, servers: list[ServerInfo]) -> None: ...

    def lists_changed(self, server: str, lists: list[ListName]) -> None: ...


class ServerWatch:
    """The watchers told of every servers update and list change the peers hear: one list that
    every Publisher shares, filled when the broker starts (the merged sessions are made on it)."""

    def __init__(self) -> None:
        self._watchers: list[ServerWatcher] = []

    def add(self, watcher: ServerWatcher) -> None:
        self._watchers.append(watcher)

    def clear(self) -> None:
        self._watchers.clear()

    def servers_changed(self, servers: list[ServerInfo]) -> None:
        for watcher in self._watchers:
            watcher.servers_changed(servers)

    def lists_changed(self, server: str, lists: list[ListName]) -> None:
        for watcher in self._watchers:
            watcher.lists_changed(server, lists)


class Publisher:
    """Broadcasts to the attached peers (each topic to the roles its row names), and tells main's
    own watchers of the servers (`watch`) what the host peers hear of them."""

    def __init__(self, attachments: Attachments, server_infos: Callable[[], list[ServerInfo]],
                 watch: ServerWatch) -> None:
        self._attachments = attachments
        self._server_infos = server_infos
        self._watch = watch

    def say_goodbye(self) -> None:
        """main is stopping: every attached peer hears `bye` now, before the servers stop, so a
        window shows main as gone at once rather than after its silence limit."""
        self._attachments.publish(channels.BYE, Bye())
        self._watch.clear()  # the servers stopping now is main stopping: sessions end as such

    def publish_servers(self) -> None:
        servers = self._server_infos()
        self._attachments.publish(channels.SERVERS, ServersUpdate(servers=servers))
        self._watch.servers_changed(servers)

    def publish_complete(self, server: str, elicitation_id: str) -> None:
        self._attachments.publish(channels.COMPLETE, ElicitationComplete(server=server, elicitation_id=elicitation_id))

    def publish_list_changed(self, server: str, lists: list[ListName]) -> None:
        """Tell host peers these lists of `server` may have changed (they relist and tell their host)."""
        self._attachments.publish(channels.LIST_CHANGED, ListChanged(server=server, lists=lists))
        self._watch.lists_changed(server, lists)

    def publish_notice(self, level: str, message: str, server: str | None) -> None:
        notice = Notice(level=level, message=message, server=server)  # type: ignore[arg-type]
        self._attachments.publish(channels.NOTICE, notice)

    def publish_rules(self, rules: list[RuleInfo]) -> None:
        """Extension `rules`: every rule, to every window."""
        self._attachments.publish(channels.RULES_UPDATE, RulesUpdate(rules=rules))


class ServerSide(Publisher):
    """servers.ServerPorts: what a configured server's client needs, the elicitation path and ways to
    tell the windows."""

    def __init__(self, attachments: Attachments, server_infos: Callable[[], list[ServerInfo]], watch: ServerWatch,
                 pending: PendingRequests, gate: ElicitationGate) -> None:
        super().__init__(attachments, server_infos, watch)
        self.pending = pending  # sign-in cards open through it
        self.gate = gate  # what becomes of a request before it opens

    async def elicit(self, elicitation: Elicitation, options: RequestOptions,
                     cancel_reason: Callable[[], Unanswered] = lambda: "cancelled") -> ElicitationResult:
        """Show one server request in the windows and wait for the one valid answer (steps 3-8),
        once the gate let it through.

        Raises UndeliverableRequestError (before anything is shown) for a request the windows
        cannot be sent."""
        return await self.pending.ask(elicitation, options, cancel_reason)

    def withdraw_server(self, server: str) -> None:
        """A server's connection ended: its open requests can never be answered."""
        self.pending.withdraw_server(server)


class ConsentSide(Publisher):
    """consent.ConsentPorts: what the consent layer needs, the rules and notices it publishes and
    who an answering peer is (the requests it answers come with each answer)."""

    def peer(self, routing_id: bytes) -> Peer | None:
        return self._attachments.get(routing_id)


class RelaySide:
    """relay.RelayBrokerPorts: what relayed sessions need, the elicitation path and their host peers'
    sockets."""

    def __init__(self, attachments: Attachments, publisher: Publisher, pending: PendingRequests,
                 gate: ElicitationGate) -> None:
        self._attachments = attachments
        self._publisher = publisher
        self.pending = pending
        self.gate = gate

    def send_to_peer(self, routing_id: bytes, frames: list[bytes], *, held_when_full: bool = False) -> bool:
        return self._attachments.send_to_peer(routing_id, frames, held_when_full=held_when_full)

    def peer_by_routing_id(self, routing_id: bytes) -> Peer | None:
        return self._attachments.get(routing_id)

    def peers_changed(self) -> None:
        """Something `peers` shows changed (a host's calls in flight)."""
        self._attachments.peers_changed()

    def publish_complete(self, server: str, elicitation_id: str) -> None:
        self._publisher.publish_complete(server, elicitation_id)

    def name_host(self, peer: Peer, name: str) -> None:
        self._attachments.name_host(peer, name)
