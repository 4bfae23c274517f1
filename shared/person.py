"""Who is at this machine, as a name people read: `ana@laptop`.

A window's default name (`status`, the audit's BY column, `rules`' MADE BY) was its pid
(`window-12114`), which says nothing a week later; the person and the machine do. A browser
paired without a name is the person's too (`ana's Chrome on Android`, web_process/user_agent.py).
"""

import getpass
import socket


def person() -> str:
    """The user's login name; "someone" when the user has no name here."""
    try:
        return getpass.getuser() or "someone"
    except (OSError, KeyError):  # no LOGNAME/USER and a uid without a passwd entry (a bare container)
        return "someone"


def person_at_machine() -> str:
    """`user@host` (the host's first label); `someone@host` when the user has no name here."""
    host = socket.gethostname().split(".")[0] or "localhost"
    return f"{person()}@{host}"
