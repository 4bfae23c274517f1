"""Webhooks for new requests (the config's `"elicitron": {"notify": ...}`): someone with no window
open learns that something waits.

notifier.py  Notifier: which new requests become notices, and the receivers' status
config.py    the `notify` keys, checked at load (`redact` keeps secrets out of status and logs)
payload.py   what a notice says, per format (json, ntfy, gotify, slack, discord)
sender.py    WebhookSender: the rate-limited, retrying POSTs
link.py      the web window's URL for a notice's link (its web.json)
"""
