"""Elicitron's renderer: one PySide6 window attached to main over ZeroMQ. Never imports `mcp`.

bridge.py        MainBridge: the DEALER socket to main, as Qt signals (hello, heartbeat, reconnect)
main_window.py   MainWindow: servers, tool calls, results, notices, one elicitation card at a time
card.py          ElicitationCard: the modal dialog for one request (form, URL consent, notice)
form_body.py     the fields of a form card and whether the answer validates
fields.py        one widget adapter per requestedSchema property type
url_safety.py    what to warn about before opening a URL (pure, no Qt)
card_queue.py    oldest-first queue of waiting requests and its "N more waiting" text
elsewhere.py     "waiting in another window": requests whose origin is another attached window
hosts.py         "via <host>" on a card an MCP host's call caused; attached hosts in the status bar
servers_panel.py servers tree (status, error) with Start/Stop/Restart, "Ask again", Reload config
call_panel.py, reply_format.py   the window's other parts
screenshot.py    grab_widget(widget, path): save a widget as PNG
app.py, __main__.py   `python -m renderer_process [--connection PATH] [--name NAME]`
"""
