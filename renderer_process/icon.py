"""Elicitron's icon, drawn (no image files to ship), with the number of requests waiting."""

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFont, QIcon, QPainter, QPainterPath, QPixmap

_SIZE = 64
_BRAND = QColor("#3558c8")
_BADGE = QColor("#d32f2f")


def app_icon(waiting: int = 0) -> QIcon:
    """A speech bubble with a question mark; a red badge with `waiting` when it is not 0."""
    pixmap = QPixmap(_SIZE, _SIZE)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    bubble = QPainterPath()
    bubble.addRoundedRect(QRectF(4, 6, 52, 40), 12, 12)
    tail = QPainterPath()
    tail.moveTo(16, 42)
    tail.lineTo(12, 58)
    tail.lineTo(30, 44)
    painter.fillPath(bubble.united(tail), _BRAND)
    painter.setPen(QColor("white"))
    font = QFont()
    font.setPixelSize(30)
    font.setBold(True)
    painter.setFont(font)
    painter.drawText(QRectF(4, 6, 52, 40), Qt.AlignmentFlag.AlignCenter, "?")
    if waiting > 0:
        text = str(waiting) if waiting < 100 else "99+"
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(_BADGE)
        if len(text) < 3:
            badge = QRectF(_SIZE - 34, _SIZE - 34, 34, 34)
            painter.drawEllipse(badge)
        else:  # "99+" needs a wider pill
            badge = QRectF(_SIZE - 44, _SIZE - 30, 44, 30)
            painter.drawRoundedRect(badge, 14, 14)
        painter.setPen(QColor("white"))
        font.setPixelSize(22 if len(text) < 2 else 18)
        painter.setFont(font)
        painter.drawText(badge, Qt.AlignmentFlag.AlignCenter, text)
    painter.end()
    return QIcon(pixmap)
