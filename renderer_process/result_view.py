"""The last tool result, readable: text as text, structured content as a tree, images as images.

A CallToolResult's `content` blocks are shown in order (text; image; audio, resource links and
embedded resources as one line each), then `structuredContent` as an expandable tree. An error
reply (the call could not be made) or `isError` is said in the heading. Server data is never
rendered as markup.
"""

import base64
import binascii
import json
import logging
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QPixmap
from PySide6.QtWidgets import QLabel, QScrollArea, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from renderer_process.tones import ToneLabel
from shared import messages

logger = logging.getLogger(__name__)

_MAX_IMAGE_WIDTH = 480
_MAX_TREE_ITEMS = 2000  # a huge structuredContent is cut, not allowed to freeze the window
_MAX_TEXT = 20_000


class ResultView(QScrollArea):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("result_view")
        self.setWidgetResizable(True)
        self.setFrameShape(QScrollArea.Shape.NoFrame)
        self._body = QWidget(self)
        self._layout = QVBoxLayout(self._body)
        self._layout.setContentsMargins(4, 4, 4, 4)
        self._layout.addStretch(1)
        self.setWidget(self._body)
        self.heading = QLabel(self._body)
        self.heading.setObjectName("result_heading")
        self.heading.setTextFormat(Qt.TextFormat.PlainText)
        self.heading.setStyleSheet("font-weight: bold;")
        self.heading.setText("No tool called yet.")
        self._layout.insertWidget(0, self.heading)
        self._items: list[QWidget] = []

    def show_reply(self, label: str, reply: messages.ChannelReply) -> None:
        """Show the reply to the call `label` ("server/tool")."""
        for widget in self._items:
            widget.hide()
            widget.deleteLater()
        self._items = []
        if reply.error is not None:
            self.heading.setText(f"{label}: the call failed")
            self._add(_error(f"error {reply.error.code}: {reply.error.message}", self._body))
            return
        result = reply.result or {}
        self.heading.setText(f"{label}: the tool reported an error" if result.get("isError") else label)
        for block in result.get("content") or []:
            if isinstance(block, dict):
                self._add(_content_block(block, self._body))
        structured = result.get("structuredContent")
        if structured is not None:
            self._add(_tree(structured, self._body))
        if not self._items:
            self._add(_text("(no content)", self._body))

    def shown_widgets(self) -> list[QWidget]:
        """What the view holds now, in order (for tests and screenshots)."""
        return list(self._items)

    def _add(self, widget: QWidget) -> None:
        self._items.append(widget)
        self._layout.insertWidget(self._layout.count() - 1, widget)
        widget.show()


def _content_block(block: dict[str, Any], parent: QWidget) -> QWidget:
    kind = block.get("type")
    if kind == "text":
        return _text(str(block.get("text", "")), parent)
    if kind == "image":
        return _image(block, parent)
    if kind == "audio":
        return _text(f"[audio, {block.get('mimeType', 'unknown type')}]", parent)
    if kind == "resource_link":
        return _text(f"[link] {block.get('name') or ''} {block.get('uri', '')}".strip(), parent)
    if kind == "resource":
        found = block.get("resource")
        resource: dict[str, Any] = found if isinstance(found, dict) else {}
        if "text" in resource:
            return _text(f"{resource.get('uri', '')}\n{resource['text']}", parent)
        return _text(f"[resource] {resource.get('uri', '')} ({resource.get('mimeType', 'binary')})", parent)
    return _text(f"[{kind}]", parent)


def _text(text: str, parent: QWidget) -> QLabel:
    if len(text) > _MAX_TEXT:
        text = text[:_MAX_TEXT] + f"… ({len(text) - _MAX_TEXT} more characters)"
    label = QLabel(text, parent)
    label.setObjectName("result_text")
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def _error(text: str, parent: QWidget) -> QLabel:
    label = ToneLabel("error", parent)
    label.setObjectName("result_error")
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setWordWrap(True)
    label.setText(text)
    return label


def _image(block: dict[str, Any], parent: QWidget) -> QLabel:
    pixmap = QPixmap()
    try:
        data = base64.b64decode(str(block.get("data", "")), validate=True)
    except (binascii.Error, ValueError):
        data = b""
    if not data or not pixmap.loadFromData(data):
        return _text(f"[image, {block.get('mimeType', 'unknown type')}, cannot be shown]", parent)
    if pixmap.width() > _MAX_IMAGE_WIDTH:
        pixmap = pixmap.scaledToWidth(_MAX_IMAGE_WIDTH, Qt.TransformationMode.SmoothTransformation)
    label = QLabel(parent)
    label.setObjectName("result_image")
    label.setPixmap(pixmap)
    label.setAccessibleName(f"Image ({block.get('mimeType', 'image')})")
    return label


def _tree(value: Any, parent: QWidget) -> QTreeWidget:
    tree = QTreeWidget(parent)
    tree.setObjectName("result_tree")
    tree.setHeaderLabels(["Structured content", "Value"])
    tree.setAccessibleName("Structured content")
    budget = [_MAX_TREE_ITEMS]
    _fill(tree.invisibleRootItem(), value, budget)
    tree.expandToDepth(1)
    tree.resizeColumnToContents(0)
    rows = min(_shown_rows(tree), 12)
    tree.setMinimumHeight((rows + 2) * tree.fontMetrics().height() + 8)
    return tree


def _fill(parent: QTreeWidgetItem, value: Any, budget: list[int]) -> None:
    entries: list[tuple[str, Any]]
    if isinstance(value, dict):
        entries = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, list):
        entries = [(f"[{i}]", v) for i, v in enumerate(value)]
    else:
        entries = [("value", value)]
    for key, item in entries:
        if budget[0] <= 0:
            QTreeWidgetItem(parent, ["…", "(more not shown)"])
            return
        budget[0] -= 1
        if isinstance(item, dict | list):
            size = f"{len(item)} {'keys' if isinstance(item, dict) else 'items'}"
            node = QTreeWidgetItem(parent, [key, size])
            _fill(node, item, budget)
        else:
            QTreeWidgetItem(parent, [key, json.dumps(item, ensure_ascii=False)])


def _shown_rows(tree: QTreeWidget) -> int:
    """Rows visible after expandToDepth(1): the top level and its children."""
    rows = tree.topLevelItemCount()
    for index in range(tree.topLevelItemCount()):
        item = tree.topLevelItem(index)
        rows += item.childCount() if item is not None else 0
    return rows
