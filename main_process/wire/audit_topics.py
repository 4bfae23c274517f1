"""The audit topic: `msgAudit`, the newest rows of main's audit log for `elicitron audit`, from
whichever store main runs on (SQLite here, or a shared PostgreSQL one), so a shell under another
HOME or config sees what main records rather than a file of its own (issue 37)."""

from main_process.consent.audit_writer import AuditWriter
from main_process.wire.peers import Peer
from main_process.wire.replies import Replies
from main_process.wire.topic_routes import ReplyTo, handles
from shared import channels
from shared.errors import AuditLogError, RpcCode
from shared.messages import AuditRequest, CallError, ChannelReply


class AuditTopics:
    def __init__(self, audit: AuditWriter | None, replies: Replies) -> None:
        """`audit`: main's audit writer (None: this main keeps no audit log)."""
        self._audit = audit
        self._replies = replies

    @handles(channels.AUDIT)
    def _on_audit(self, peer: Peer, body: AuditRequest, reply: ReplyTo) -> None:
        if self._audit is None:
            reply(ChannelReply(error=CallError(code=RpcCode.INVALID_REQUEST, message="this main keeps no audit log")))
            return
        self._replies.later(reply, self._entries(self._audit, body))

    @staticmethod
    async def _entries(audit: AuditWriter, body: AuditRequest) -> ChannelReply:
        try:
            return ChannelReply(audit=await audit.entries(limit=body.limit, server=body.server))
        except AuditLogError as exc:  # a store that is down is the reader's answer, not an internal error
            return ChannelReply(error=CallError(code=RpcCode.INTERNAL_ERROR, message=str(exc)))
