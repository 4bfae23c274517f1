"""Elicitron's main as the client of the MCP conformance suite's client scenarios:

    conformance client --command "python tests/conformance_client.py" --scenario auth/metadata-default

The suite appends the URL of the MCP server it started (MCP_CONFORMANCE_SCENARIO names the
scenario; MCP_CONFORMANCE_CONTEXT may carry a pre-registered client). This starts a fresh main in
private temp XDG dirs with that URL as its one `url` server (sign-in on, tokens in a file there),
attaches a contract-only window, and drives it the way a person would: every sign-in card is
accepted and its authorization URL opened with an HTTP client that follows the authorization
server's redirects to main's loopback listener (a browser). Once the server is ready, each of its
tools is called. Exits 0 when a call came back with a result, 1 otherwise, 2 if main could not run;
what happened goes to stderr (the suite keeps it).

    --protocol-mode auto|legacy   the server entry's protocolMode (default auto)
    --timeout SECONDS             give up after this long (default 25: the suite's own is 30)
"""

import argparse
import json
import os
import shutil
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the testing kit
from kit.env import short_tmp_dir
from kit.main import RunningMain, start_main, write_config

SERVER = "conformance"


def say(message: str) -> None:
    print(f"conformance-client: {message}", file=sys.stderr, flush=True)


def server_entry(url: str, protocol_mode: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"url": url, "protocolMode": protocol_mode, "toolTimeoutSeconds": 20}
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    if isinstance(context, dict) and isinstance(context.get("client_id"), str):
        oauth: dict[str, Any] = {"clientId": context["client_id"]}
        if isinstance(context.get("client_secret"), str):
            oauth["clientSecret"] = context["client_secret"]
        entry["oauth"] = oauth
    return entry


def open_in_browser(url: str) -> None:
    """GET the authorization URL and follow every redirect, as a browser does: the last one is
    main's loopback listener, which answers 200 once it has the code."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            say(f"browser: {response.status} from {response.url}")
    except urllib.error.HTTPError as error:
        say(f"browser: HTTP {error.code} from {error.url}: {error.read()[:300]!r}")
    except (urllib.error.URLError, OSError) as error:
        say(f"browser: {url} failed: {error}")


def drive(main: RunningMain, deadline: float) -> bool:
    window = main.peer("conformance-window", hello=False)
    welcome = window.hello()
    # A card opened before this window attached comes in the welcome, the rest as they happen.
    backlog: list[tuple[str, Any]] = [("msgElicitationTransferInvoke", invoke) for invoke in welcome.get("pending") or []]
    backlog.append(("welcome", welcome))
    called: dict[str, str] = {}  # response channel -> tool
    answered = False
    while time.monotonic() < deadline:
        if backlog:
            topic, body = backlog.pop(0)
        else:
            try:
                topic, body = window.expect(lambda t, b: True, min(1.0, max(deadline - time.monotonic(), 0.05)))
            except AssertionError:
                continue  # nothing within the second
        if topic == "msgElicitationTransferInvoke" and body.get("kind") == "sign-in":
            params = body["request"]["params"]
            say(f"sign-in card: {params.get('message')} ({json.dumps(body.get('signIn'))})")
            window.answer(body, "accept")
            open_in_browser(params["url"])
        elif topic in ("servers", "welcome"):
            server = next((s for s in body.get("servers") or [] if s["name"] == SERVER), None)
            if server is None:
                continue
            say(f"server {server['status']}{': ' + server['error'] if server.get('error') else ''}")
            if server["status"] == "ready" and not called:
                for tool in server.get("tools") or []:
                    called[window.call_tool(SERVER, tool, {})] = tool
            elif server["status"] == "failed":
                return False
        elif topic in called:
            tool = called.pop(topic)
            if "result" in body:
                say(f"{tool}: {json.dumps(body['result'])[:300]}")
                answered = True
            else:
                say(f"{tool}: error {json.dumps(body.get('error'))}")
            if not called:
                return answered
    say("timed out")
    return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--protocol-mode", choices=["auto", "legacy"], default="auto")
    parser.add_argument("--timeout", type=float, default=25.0)
    parser.add_argument("url")
    args = parser.parse_args()
    deadline = time.monotonic() + args.timeout
    say(f"scenario {os.environ.get('MCP_CONFORMANCE_SCENARIO', '?')} at {args.url}")
    home = short_tmp_dir("eli-conf-client-")
    os.environ["ELICITRON_TOKEN_STORE"] = "file"  # never the user's keyring: the file in `home`
    running: RunningMain | None = None
    try:
        config = write_config(home / "mcp.json", {SERVER: server_entry(args.url, args.protocol_mode)})
        try:
            running = start_main(config, home, home=home)
        except AssertionError as exc:
            say(f"main did not start: {exc}")
            return 2
        ok = drive(running, deadline)
        return 0 if ok else 1
    finally:
        if running is not None:
            running.stop()
            tail = running.stderr.text().strip().splitlines()[-40:]
            say("main's log (last lines):\n" + "\n".join(tail))
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

