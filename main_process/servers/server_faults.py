"""How a server's failures read: the error replies peers get, and one line for an exception."""

from pydantic import ValidationError

from shared.errors import RpcCode
from shared.messages import CallError, ChannelReply


def cancelled_reply() -> ChannelReply:
    """The answer of a call its caller cancelled (JSON-RPC -32800)."""
    return error_reply(RpcCode.REQUEST_CANCELLED, "the call was cancelled by its caller")


def error_reply(code: int, message: str) -> ChannelReply:
    """The `{error: {code, message}}` answer on a peer's response channel."""
    return ChannelReply(error=CallError(code=code, message=message))


class NotReconnectedError(Exception):
    """The connection replaced for an era verdict did not come back in time."""


def leaf(exc: BaseException) -> BaseException:
    """The first exception inside the exception groups anyio wraps around it (`exc` if none)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def result_fault(exc: BaseException) -> str | None:
    """What is wrong with a server result the SDK refused for its protocol version (the schema
    check of `send_request`), in one line; None when `exc` is no such refusal."""
    inner = leaf(exc)
    if not isinstance(inner, ValidationError) or "Result" not in inner.title:
        return None
    return _validation_summary(inner)


def _validation_summary(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    if not errors:
        return exc.title
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "(the object)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{exc.title}: {where}: {first['msg']}{more}"


def describe(exc: BaseException) -> str:
    """One line for a user, unwrapping the exception groups anyio produces."""
    exc = leaf(exc)
    if isinstance(exc, ValidationError):
        return f"ValidationError: {_validation_summary(exc)}"
    text = str(exc) or type(exc).__name__
    text = " ".join(text.split())  # one line
    return f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text

