"""How the main window's parts sit: the lines across the top, servers on the left, call and results right."""

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGroupBox, QMainWindow, QSplitter, QVBoxLayout, QWidget


def lay_out(window: QMainWindow, top: list[QWidget], servers: QWidget, remembered: QWidget,
            call: QWidget, result: QWidget, log: QWidget) -> None:
    """`top`: the lines shown above the panels (banner, queue, elsewhere, waiting for the browser)."""
    servers_box = QSplitter(Qt.Orientation.Vertical, window)
    servers_box.addWidget(_boxed("Servers", servers))
    servers_box.addWidget(_boxed("Remembered", remembered))
    right = QSplitter(Qt.Orientation.Vertical, window)
    right.addWidget(_boxed("Call a tool", call))
    results = QSplitter(Qt.Orientation.Vertical, window)
    results.addWidget(result)
    results.addWidget(log)
    results.setStretchFactor(0, 3)  # the last result first; the log of everything below it
    results.setStretchFactor(1, 1)
    results.setSizes([300, 100])
    right.addWidget(_boxed("Results", results))
    right.setStretchFactor(0, 3)
    right.setStretchFactor(1, 2)
    splitter = QSplitter(Qt.Orientation.Horizontal, window)
    splitter.addWidget(servers_box)
    splitter.addWidget(right)
    splitter.setStretchFactor(1, 1)
    central = QWidget(window)
    layout = QVBoxLayout(central)
    for widget in top:
        layout.addWidget(widget)
    layout.addWidget(splitter, 1)
    window.setCentralWidget(central)


def _boxed(title: str, widget: QWidget) -> QGroupBox:
    box = QGroupBox(title)
    layout = QVBoxLayout(box)
    layout.addWidget(widget)
    return box
