"""What the bridge hands its window besides main's answers, with no Qt: which signal tells each
thing main pushes (and with which field of it), and the local answers that stand in for main's
when a message could not be sent (the window treats them as it treats main's own)."""

from shared import messages
from shared.errors import RpcCode
from shared.window_core import NOT_SENT  # the code of `refused`'s ErrorNotice when a send fails

NOT_SENT_CALL_CODE = int(RpcCode.SERVER_ERROR)
"""JSON-RPC 'server error' code of the local ChannelReply for a request that could not be sent."""

_PUSHED: dict[type, tuple[str, str]] = {  # what main pushes: the signal that tells it (and of which field)
    messages.ElicitationInvoke: ("invoked", ""), messages.ElicitationDismiss: ("dismissed", ""),
    messages.ElicitationComplete: ("completed", ""), messages.Notice: ("noticed", ""),
    messages.ServersUpdate: ("servers_changed", "servers"), messages.PeersUpdate: ("peers_changed", "peers"),
    messages.RulesUpdate: ("rules_changed", "rules"),
}


def pushed_signal(body: messages.MainBody) -> tuple[str, object] | None:
    """The name of the signal that tells `body` and what it emits; None for what a window ignores."""
    found = _PUSHED.get(type(body))
    if found is None:
        return None
    signal, field = found
    return signal, getattr(body, field) if field else body


def unsent_notice(topic: str, what: str) -> messages.ErrorNotice:
    """The refusal of a message on `topic` that did not leave; `what` names it ("... was not sent")."""
    return messages.ErrorNotice(code=NOT_SENT, message=f"not connected to main; {what}", topic=topic)


def unsent_reply(what: str) -> messages.ChannelReply:
    """The answer to a request that did not leave; `what` names it."""
    error = messages.CallError(code=NOT_SENT_CALL_CODE, message=f"not connected to main; {what} was not sent")
    return messages.ChannelReply(error=error)
