"""Which handler takes each topic a welcomed peer sends: `@handles(topic)` on a method of a handler
group (the *_topics.py modules, one per area), paired with the topic's row in shared/channels.py
(its body type, who may send it, whether it is answered on a response channel).

A topic without its handler, or a handler for no such topic, fails at import (`routes`). The
handler gets the sender's `Peer` (looked up once per message) and its body, and the `reply` for
its response channel when its row has one (checked before the handler runs).
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from shared import channels
from shared.messages import ChannelReply

ReplyTo = Callable[[ChannelReply], None]  # sends one answer on a peer's response channel
ProgressTo = Callable[[float, float | None, str | None], None]  # sends msgProgress for one call
_HANDLERS: dict[str, Callable[..., None]] = {}  # filled by @handles; `routes` pairs them with their rows


def handles[H: Callable[..., None]](topic: str) -> Callable[[H], H]:
    """Marks a handler group's method as what main does with `topic` from a welcomed peer."""
    def register(method: H) -> H:
        if topic in _HANDLERS:
            raise ImportError(f"two handlers for {topic}")
        _HANDLERS[topic] = method
        return method

    return register


@dataclass(frozen=True, slots=True)
class Route:
    """main's side of one topic a welcomed peer sends: its row and its handler."""

    row: channels.Topic
    # One `@handles` method, unbound: (group, peer, body), and the `reply` when the row has one.
    handle: Callable[..., None]


def routes() -> dict[str, Route]:
    """Every topic a peer sends but hello (the one it sends before it is welcomed: greeter.py); the
    one-time result channels go to PendingRequests.answer. Call once every *_topics module is
    imported."""
    rows = {name: row for name, row in channels.TO_MAIN.items() if name != channels.HELLO}
    if _HANDLERS.keys() != rows.keys():
        raise ImportError(f"topics peers send without a @handles method: {sorted(rows.keys() - _HANDLERS.keys())}; "
                          f"@handles methods of no such topic: {sorted(_HANDLERS.keys() - rows.keys())}")
    return {name: Route(row, _HANDLERS[name]) for name, row in rows.items()}


def bind(table: Mapping[str, Route], groups: list[object]) -> dict[str, Callable[..., None]]:
    """Each topic's handler bound to the group that defines it; raises ValueError for a topic no
    group handles (a group left out of the broker)."""
    owners = {id(function): group for group in groups for function in vars(type(group)).values()}
    missing = [topic for topic, route in table.items() if id(route.handle) not in owners]
    if missing:
        raise ValueError(f"no handler group given for {sorted(missing)}")
    return {topic: route.handle.__get__(owners[id(route.handle)]) for topic, route in table.items()}
