"""Elicitron's renderer: one PySide6 window attached to main over ZeroMQ. Never imports `mcp`.

bridge.py        MainBridge: the window's peer of main, what main says as Qt signals
qt_peer.py       QtPeer: shared/peer.py's core on the Qt loop (the DEALER, its notifier, ticks, hello)
connection_status.py  connecting / connected / reconnecting, main missing, an unusable file (no Qt)
bridge_messages.py    which signal tells each push; the local answers to what was not sent (no Qt)
main_window.py   MainWindow: the thin face composing the parts below, the bridge's slots, its signals
window_layout.py where the window's parts sit (the lines across the top, the panels)
card_area.py     CardArea: one elicitation card at a time, "N more waiting", the other windows' requests
                 (which is which: shared/window_core.py), rendered; what goes beyond them as signals
connection_banner.py  main gone / contact lost / a connection file to fix: its words (no Qt) and banner
browser_wait.py  "Waiting for the browser": URL requests accepted here, until their page reports done
sign_in_finish.py     on a remote window, the open "paste the browser's address" sign-in dialogs
request_notifier.py   a desktop notification for new requests while the user is not looking
keep_in_tray.py  Window ▸ "Keep running in the tray when closed", saved in the settings
decline_policy.py     the servers declined for this main session ("Decline all", "Ask again")
main_requests.py tool calls, server control, reload, tools/list pages: sent, replies in the log
card.py          ElicitationCard: the modal dialog for one request (form, URL consent, notice), built
                 with what it offers (Offers: decline all, remember, a yes/no confirm)
form_body.py     the fields of a form card and whether the answer validates
fields.py        one widget adapter per requestedSchema property type
time_left.py     "Expires in 4:05" from a request's expiresAt (pure, no Qt)
tones.py         error and warning text colours that follow the light/dark palette
elsewhere.py     "waiting in another window": the list shared/window_core.py keeps, with "Answer here"
hosts.py         "via <host>" on a card an MCP host's call caused; attached hosts in the status bar
web_devices_dialog.py Window ▸ Web devices…: paired browsers (shared/web_devices.py), Revoke, Pair with its QR code
servers_panel.py servers tree (status, error) with Start/Stop/Restart, "Ask again", Reload config
consent_cards.py which card a request gets (approval or elicitation) and what to remember with it
approval_card.py ApprovalCard: a host's tool call, allowed once / this session / always, or denied
remember.py      "Remember my answer" on a form card (this session / always / until a date)
remembered_panel.py  the rules main applies before asking, live, with Revoke
call_panel.py    pick a server and tool, fill in its arguments, Call
tool_form.py     a tool's title, description and argument form (or JSON)
tool_schema.py   which tool inputSchemas the form expresses, and the arguments it sends (pure, no Qt)
result_view.py   the last tool result: text, images, structured content as a tree
reply_format.py  how replies read in the results log
tray.py, icon.py the tray icon with the number waiting, desktop notifications; the drawn icon
preflight.py     before Qt loads: no display or missing system libraries as one line (never imports Qt)
screenshot.py    grab_widget(widget, path): save a widget as PNG
app.py, __main__.py   `python -m renderer_process [--connection PATH] [--name NAME] [--preflight]`
"""
