"""The rules topics: every rule (`msgRules`) and revoking some (`msgRevokeRules`)."""

from collections.abc import Awaitable
from typing import Protocol

from main_process.wire.peers import Peer
from main_process.wire.replies import Replies
from main_process.wire.topic_routes import ReplyTo, handles
from shared import channels
from shared.messages import ChannelReply, RevokeReport, RevokeRules, RulesRequest


class RulePorts(Protocol):
    """The consent layer's rules, as peers see them."""

    def rules_report(self) -> ChannelReply:
        """Every rule (`ChannelReply.rules`), for msgRules."""

    def revoke_rules(self, request: RevokeRules, by: str) -> Awaitable[ChannelReply]:
        """Revoke rules (`ChannelReply.revoked`) at `by`'s request, for msgRevokeRules."""


class RuleTopics:
    def __init__(self, ports: RulePorts, replies: Replies) -> None:
        self._ports = ports
        self._replies = replies

    @handles(channels.RULES)
    def _on_rules(self, peer: Peer, body: RulesRequest, reply: ReplyTo) -> None:
        reply(self._ports.rules_report())

    @handles(channels.REVOKE_RULES)
    def _on_revoke_rules(self, peer: Peer, body: RevokeRules, reply: ReplyTo) -> None:
        self._replies.later(reply, self._ports.revoke_rules(body, peer.name or peer.window))  # after the store removed it


class NoRules:
    """The rules topics' answers when main runs without a consent layer (`rules=False`)."""

    def rules_report(self) -> ChannelReply:
        return ChannelReply(rules=[])

    async def revoke_rules(self, request: RevokeRules, by: str) -> ChannelReply:
        return ChannelReply(revoked=RevokeReport(revoked=[], refused=["this main runs without rules"]))
