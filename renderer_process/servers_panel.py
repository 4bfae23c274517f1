"""The servers tree: one row per MCP server (name, status, error), its tools as children."""

import logging

from PySide6.QtWidgets import QTreeWidget, QTreeWidgetItem, QWidget

from shared import messages

logger = logging.getLogger(__name__)


class ServersPanel(QTreeWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("servers")
        self.setColumnCount(2)
        self.setHeaderLabels(["Server / tool", "Status"])
        self.setRootIsDecorated(True)

    def set_servers(self, servers: list[messages.ServerInfo]) -> None:
        # Rebuilt whole (a handful of rows); keep each server's expanded state across updates.
        rows = [self.topLevelItem(i) for i in range(self.topLevelItemCount())]
        expanded = {row.text(0) for row in rows if row is not None and row.isExpanded()}
        first_time = self.topLevelItemCount() == 0
        self.clear()
        for server in servers:
            status = server.status + (f": {server.error}" if server.error else "")
            row = QTreeWidgetItem(self, [server.name, status])
            row.setToolTip(1, status)
            for tool in server.tools:
                QTreeWidgetItem(row, [tool, ""])
            row.setExpanded(first_time or server.name in expanded)
        self.resizeColumnToContents(0)
