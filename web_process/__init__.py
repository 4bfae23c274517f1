"""The web window: a browser page is a renderer peer of main, like the Qt window (issue 27).

cli.py       `elicitron web`: arguments, the listen checks, uvicorn
listen.py    which addresses and origins the web window serves (loopback unless TLS or --insecure-http)
devices.py   pairing codes and device credentials on disk (0600), `elicitron pair --web`, revoking
user_agent.py  a device paired without a name, named from its User-Agent: "ana's Chrome on Android"
qr.py        the pairing link's QR code for a terminal (segno)
page_peer.py one page's event stream as one renderer peer of main (shared/peer_asyncio.py); its cards
             and "waiting in another window" list from shared/window_core.py, as the Qt window's
cards.py     an invoke as the plain JSON card the page draws (who asks, URL safety, sign-in, fields
             from the schema, what it offers, time left)
remembered.py  remembered answers and approvals as the page lists them; main's answer to a revoke
app.py       the Starlette app: static page, pairing, one event stream per page; Origin, Host, cookie checks
streams.py   event streams capped per device and in all, a place taken as a stream is registered
connections.py  the connections bounded (shared/http_guard.py): open-files limit raised, caps, head deadline
server.py    uvicorn's server, ending the pages' streams at once when the web window stops
static/      index.html, app.css and the page's modules: app.js (stream, cards), dom.js, time_left.js,
             sign_in.js, grant.js (an approval's grant), remembered.js, policy.js, notify.js, elsewhere.js
             ("waiting in another window");
             sw.js (the service worker: notifications), manifest.webmanifest and icon.svg
             (installable); pair.html, pair.js. No build step, no inline script, nothing from
             anywhere else

Never imports Qt, renderer_process or main_process.
"""
