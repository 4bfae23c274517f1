"""A program's question on a card (invoke extension `kind: "question"`, `asker`), the same in the
Qt window (renderer_process/card.py) and the web window (web_process/cards.py).

who_asks(invoke)           "deploy.sh (pid 4242 on build-7)": a program is named as a program, with
                           its process and machine; a server's request keeps the server's name
yes_no_property(invoke)    the one required boolean of a yes/no question (`elicitron ask --yes-no`)

What a card makes of them: no "Decline all from …" (a policy for servers, not programs), and a
yes/no question drawn as a confirm: Yes accepts `true`, No declines, the checkbox itself hidden.
Plain functions of the invoke: the cards ask them, they know nothing of the cards.

A window that ignores these fields still shows the same question as a plain form.
"""

from typing import Any

from shared.messages import ElicitationInvoke


def is_question(invoke: ElicitationInvoke) -> bool:
    return invoke.kind == "question"


def who_asks(invoke: ElicitationInvoke) -> str:
    asker = invoke.asker
    if not is_question(invoke) or asker is None:
        return invoke.request.server
    where = [f"pid {asker.pid}"] if asker.pid is not None else []
    if asker.machine:
        where.append(f"on {asker.machine}")
    return f"{asker.name} ({' '.join(where)})" if where else asker.name


def yes_no_property(invoke: ElicitationInvoke) -> str | None:
    """The one required boolean of a yes/no question, or None."""
    params: dict[str, Any] = invoke.request.params
    schema = params.get("requestedSchema")
    if not is_question(invoke) or params.get("mode", "form") != "form" or not isinstance(schema, dict):
        return None
    properties = schema.get("properties")
    if not isinstance(properties, dict) or len(properties) != 1:
        return None
    (key, prop), = properties.items()
    required = schema.get("required")
    is_boolean = isinstance(prop, dict) and prop.get("type") == "boolean"
    return str(key) if is_boolean and isinstance(required, list) and key in required else None

