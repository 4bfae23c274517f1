"""Elicitron's renderer: one PySide6 window attached to main over ZeroMQ. Never imports `mcp`.

bridge.py        MainBridge: the DEALER socket to main, as Qt signals (hello, heartbeat, reconnect)
main_window.py   MainWindow: servers, tool calls, results, notices, one elicitation card at a time
card.py          ElicitationCard: the modal dialog for one request (form, URL consent, notice)
form_body.py     the fields of a form card and whether the answer validates
question_card.py a program's question on a card: "deploy.sh (pid 4242 on build-7)", yes/no as a confirm
fields.py        one widget adapter per requestedSchema property type
url_safety.py    what to warn about before opening a URL (pure, no Qt)
card_queue.py    oldest-first queue of waiting requests and its "N more waiting" text
elsewhere.py     "waiting in another window": requests whose origin is another attached window
servers_panel.py servers tree (status, error) with Start/Stop/Restart, "Ask again", Reload config
consent_cards.py which card a request gets (approval or elicitation) and what to remember with it
approval_card.py ApprovalCard: a host's tool call, allowed once / this session / always, or denied
remember.py      "Remember my answer" on a form card (this session / always / until a date)
remembered_panel.py  the rules main applies before asking, live, with Revoke
call_panel.py, reply_format.py   the window's other parts
screenshot.py    grab_widget(widget, path): save a widget as PNG
app.py, __main__.py   `python -m renderer_process [--connection PATH] [--name NAME]`
"""
