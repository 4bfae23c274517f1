"""A program's question on a card (invoke extension `kind: "question"`, `asker`).

who_asks(invoke)           "deploy.sh (pid 4242 on build-7)": a program is named as a program, with
                           its process and machine; a server's request keeps the server's name
yes_no_property(invoke)    the one required boolean of a yes/no question (`elicitron ask --yes-no`)
adapt_question_card(card)  no "Decline all from …" (a policy for servers, not programs); a yes/no
                           question drawn as a confirm: Yes accepts `true`, No declines, the
                           checkbox itself hidden

A window that ignores these fields still shows the same question as a plain form.
"""

from typing import TYPE_CHECKING, Any

from PySide6.QtWidgets import QCheckBox, QScrollArea

from shared.messages import ElicitationInvoke

if TYPE_CHECKING:
    from renderer_process.card import ElicitationCard


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


def adapt_question_card(card: "ElicitationCard") -> None:
    """Make a built card fit a program's question; a server's request is left as it is."""
    if not is_question(card.invoke):
        return
    card.decline_all_button.hide()
    key = yes_no_property(card.invoke)
    form = card.form
    field = form.fields.get(key) if form is not None and key is not None else None
    if form is None or field is None or not isinstance(field.widget, QCheckBox):
        return
    field.widget.setChecked(True)  # Accept then sends {key: true}: the "Yes"
    form.refresh()
    scroll = card.findChild(QScrollArea)
    if scroll is not None:
        scroll.hide()
    card.accept_button.setText("Yes")
    card.decline_button.setText("No")
