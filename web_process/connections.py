"""The web window's connections, bounded as the HTTP gateway's are (shared/http_guard.py): 1,200
connections that never sent a request head used to take every descriptor under the usual limit of
1,024, lock the paired browser out and fill the log with failed accepts (issue 33).

At start the soft open-files limit is raised toward the hard one; connections are capped in total
below it, with the reserve shared/descriptors.py keeps for the web window's own descriptors (each
page's DEALER to main, logs, files), and per non-loopback address; one with no request head after
HEAD_TIMEOUT_S is closed, and over a cap the oldest such one gives way. Accept errors, should
they come anyway, are logged once per interval.
"""

import ssl
from pathlib import Path
from typing import Final

from shared.accept_log import quiet_accept_errors
from shared.descriptors import DescriptorBudget, raise_soft_limit
from shared.http_guard import ConnectionGuard

MAX_CONNECTIONS: Final = 1000
MIN_CONNECTIONS: Final = 16  # whatever the limit: a few browsers and their streams
MAX_PER_SOURCE: Final = 64  # from one non-loopback address (a reverse proxy in front is loopback)
HEAD_TIMEOUT_S: Final = 5.0  # new, or idle between two requests (uvicorn's own keep-alive is 5 s too)
BODY_TIMEOUT_S: Final = 30.0  # an answer is at most 1 MB (app.py)
# Connections waiting in the kernel are all accepted in one turn of the loop (asyncio accepts up to
# the backlog at a time), and each over the cap evicts an idle one whose descriptor is only freed on
# the next turn: one turn holds up to twice the backlog beyond the cap. The reserve (a quarter of a
# 1,024 limit: 256) holds that and the pages' own descriptors. With 128, a burst of 1,200 idle
# connections filled it exactly and accept hit EMFILE, and asyncio then stops accepting for 1 s.
BACKLOG: Final = 64


def connection_guard(tls: tuple[Path, Path] | None) -> ConnectionGuard:
    """The guard for this process (call it once, at start). With `tls` (certificate, key) it does
    the handshake itself, so a connection that never finishes one is capped and timed out too."""
    raise_soft_limit()
    quiet_accept_errors()
    context = None
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(*tls)
    usable = DescriptorBudget.for_this_process().usable
    return ConnectionGuard(max(MIN_CONNECTIONS, min(MAX_CONNECTIONS, usable)), MAX_PER_SOURCE,
                           HEAD_TIMEOUT_S, BODY_TIMEOUT_S, tls=context)
