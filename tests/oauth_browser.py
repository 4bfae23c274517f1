"""A test "browser" for sign-in: `BROWSER="python tests/oauth_browser.py %s"`.

It GETs the authorization URL (the test authorization server approves at once), then follows the
redirect to main's loopback listener, as a person's browser would. Environment:
OAUTH_BROWSER_LOG  append one JSON line per step here (the URLs and the listener's answers);
OAUTH_BROWSER_TAMPER=1  first send the redirect with a wrong `state`, then the real one;
OAUTH_BROWSER_FOLLOW=0  stop at the redirect (a browser on another machine): log it, go no further.
"""

import json
import os
import sys
import urllib.error
import urllib.request
from email.message import Message
from typing import IO
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: Message, newurl: str) -> None:
        return None  # not followed: the redirect comes back as an HTTPError to read


def _get(url: str) -> tuple[int, dict[str, str], str]:
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(url, timeout=30) as response:
            return response.status, dict(response.headers), response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode(errors="replace")


def _log(entry: dict[str, object]) -> None:
    path = os.environ.get("OAUTH_BROWSER_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def _with_state(url: str, state: str) -> str:
    parts = urlsplit(url)
    query = [(k, state if k == "state" else v) for k, v in parse_qsl(parts.query)]
    return urlunsplit(parts._replace(query=urlencode(query)))


def main() -> int:
    authorize = sys.argv[1]
    status, headers, _ = _get(authorize)
    location = headers.get("location") or headers.get("Location") or ""
    _log({"step": "authorize", "url": authorize, "status": status, "redirect": location})
    if status not in (302, 303, 307) or not location:
        return 1
    if os.environ.get("OAUTH_BROWSER_FOLLOW") == "0":
        return 0
    if os.environ.get("OAUTH_BROWSER_TAMPER") == "1":
        status, _, body = _get(_with_state(location, "forged-state"))
        _log({"step": "tampered", "status": status, "body": body})
    status, _, body = _get(location)
    _log({"step": "redirect", "status": status, "body": body})
    return 0 if status == 200 else 1


if __name__ == "__main__":
    sys.exit(main())
