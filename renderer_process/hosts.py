"""What the window shows about MCP hosts (Claude Desktop, Cursor, ...) reaching servers through
`elicitron serve`: "via <host>" on a card their call caused (and "on <machine>" on another main's
request, PROTOCOL.md §4), and the attached hosts with their calls
in flight in the status bar. Text builders and two small labels; the card and window only hook them in."""

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

from shared import messages


def via_text(invoke: messages.ElicitationInvoke) -> str:
    """"via Claude Desktop" for a request an MCP host's call caused, "on laptop-a" for another
    main's request (a store many mains share), both when both; empty otherwise."""
    parts = [f"via {invoke.via}"] if invoke.via else []
    if invoke.machine:
        parts.append(f"on {invoke.machine}")
    return " ".join(parts)


def via_label(invoke: messages.ElicitationInvoke, parent: QWidget) -> QLabel | None:
    """The card's line under "<server> asks": which host's call led here, and which machine's main
    holds it when another does (None: neither)."""
    text = via_text(invoke)
    if not text:
        return None
    label = QLabel(text, parent)
    label.setObjectName("via")
    label.setTextFormat(Qt.TextFormat.PlainText)  # a host names itself: never markup
    label.setStyleSheet("color: #555;")
    return label


def hosts_text(peers: list[messages.PeerInfo]) -> str:
    """"Hosts: Claude Desktop (2 calls), Cursor"; empty when no host is attached."""
    parts = []
    for peer in peers:
        if peer.role != "host":
            continue
        calls = peer.calls or 0
        parts.append(f"{peer.name or 'MCP host'}" + (f" ({calls} call{'s' if calls != 1 else ''})" if calls else ""))
    return f"Hosts: {', '.join(parts)}" if parts else ""


class HostsLabel(QLabel):
    """The attached hosts, kept current from main's `peers` list; hidden when there are none."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("hosts")
        self.hide()

    def set_peers(self, peers: list[messages.PeerInfo]) -> None:
        text = hosts_text(peers)
        self.setText(text)
        self.setVisible(bool(text))
