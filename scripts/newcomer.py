"""The first hour, as a newcomer spends it: a fresh clone, a private home, and the commands of the
README and the site's getting-started page in order, each output checked against what the pages say
it prints.

    scripts/newcomer [--keep] [--timeout S]

1. `git clone` of this checkout (its HEAD: uncommitted changes are not in it) into /tmp/eli-nc-*,
   with HOME and every XDG dir there except XDG_CACHE_HOME (the caller's, so uv's downloads are
   reused), QT_QPA_PLATFORM=offscreen, and no `elicitron` of the caller's on PATH.
2. The commands of README.md and docs/getting-started.md (and docs/hosts.md, where getting started
   sends a newcomer for a host's entry and the Python agent), taken from their text where they have
   them (code blocks, the table of commands, the sentences that say what a command prints), run as
   they show them: `scripts/launch` (twice),
   `elicitron call`, `status`, `audit`, `rules`, `ask` (from a release.sh holding the pages'
   line), its Python agent for `serve`, `serve --print-config` and the agent it prints, `pair`
   without a tcp listener, `stop`, the deploy gate's `main --listen`, `pair --output` and
   `window --connection`, and `stop` again.

The windows `scripts/launch` opens are real offscreen windows; what they show is read from their
own log (INFO: "showing card ...", "connection state: ...", "main is stopping"). The answers come
from one more window attached beside them, the testing kit's contract-only WirePeer (the clone's
tests/kit/peer.py), run by this file as `newcomer.py --answer CONNECTION NAME` with the clone's
Python; the audit log names it as the answering window. Nothing sleeps to wait: every wait is on a
process's output or exit, or a bounded poll of `elicitron status --json`.

One line per step, PASS or FAIL with what differed, then notes where the pages are vague (what was
checked instead) or the product surprised; exit 0 only if every step passed. Every process it
started (mains, windows, the answering peer, the commands) is ended and the temp dir removed, also
on a failure or a signal (`--keep` keeps the dir and says where).

The orchestrating part uses only the standard library (any Python >= 3.12).
"""

from __future__ import annotations

import argparse
import ast
import getpass
import json
import os
import re
import select
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT / "tests"))
from kit.procs import descendants  # the kit's process walk (stdlib only), found via tests/

ANSWERER_NAME = "second-window"
PERSON_AT_MACHINE = f"{getpass.getuser()}@{socket.gethostname().split('.')[0]}"  # a window's default name
INSTALL_TIMEOUT_S = 900.0  # the first `scripts/launch` makes .venv
BOOKING_ARGS = {"restaurant": "Chez Newcomer"}
BOOKING_ANSWER = {"name": "Grace", "party_size": 3, "outdoor": True, "budget": 42.5, "cuisine": "japanese"}
AGENT_ANSWER = {"name": "Ada", "party_size": 2}
DEFAULT_TIMEOUT_S = 120.0
Event = dict[str, Any]


class StepFailed(Exception):
    """A check did not hold: the message says what the the pages say and what happened."""


# ---- the answering window (run with the clone's Python) -----------------------------------------


def run_answerer(connection: Path, name: str) -> int:
    """A window written from the wire contract alone (the kit's WirePeer): prints each invoke and
    dismiss it gets as a JSON line, answers what stdin says (`{"channel", "action", "content"?}`
    per line), and says bye when stdin closes."""
    import zmq
    from kit import contract
    from kit.peer import WirePeer

    def emit(event: str, **fields: Any) -> None:
        print(json.dumps({"event": event, **fields}), flush=True)

    info = json.loads(connection.read_text(encoding="utf-8"))
    peer = WirePeer(info["endpoint"], info["token"], name=name)
    welcome = peer.hello()
    if welcome["topic"] != contract.WELCOME:
        emit("refused", body=welcome)
        return 1
    emit("welcome", window=peer.window)
    poller = zmq.Poller()
    poller.register(peer.sock, zmq.POLLIN)
    poller.register(sys.stdin.fileno(), zmq.POLLIN)
    buffered = b""
    while True:
        ready = dict(poller.poll(200))
        if peer.sock in ready:
            for topic, body in peer.receive():
                if topic == contract.INVOKE:
                    params = body["request"]["params"]
                    emit("invoke", channel=body["responseChannel"], server=body["request"]["server"],
                         message=params.get("message"), mode=params.get("mode"),
                         schema=params.get("requestedSchema"), kind=body.get("kind"),
                         asker=body.get("asker"), via=body.get("via"))
                elif topic == contract.DISMISS:
                    emit("dismiss", channel=body["responseChannel"], reason=body.get("reason"),
                         by=body.get("by"))
                elif topic == contract.ERROR:
                    emit("error", body=body)
        if sys.stdin.fileno() in ready:
            chunk = os.read(sys.stdin.fileno(), 65536)
            if not chunk:
                peer.close()
                emit("bye")
                return 0
            buffered += chunk
            while b"\n" in buffered:
                line, buffered = buffered.split(b"\n", 1)
                order = json.loads(line)
                content = {"content": order["content"]} if "content" in order else {}
                peer.send(order["channel"], {"action": order["action"], **content})
                emit("answered", channel=order["channel"], action=order["action"])
        peer.heartbeat_if_due()


# ---- processes and their output ------------------------------------------------------------------


class Child:
    """A process this run started, its output read as it comes (a thread per stream) into memory
    and `log`, so a wait is on its output, never on a clock. `lines` is stdout, stderr merged in
    unless `separate_stderr` (then stderr is `errors`)."""

    def __init__(self, name: str, argv: list[str], *, env: dict[str, str], cwd: Path, log: Path,
                 stdin: bool = False, separate_stderr: bool = False) -> None:
        self.name = name
        self.started = time.time()
        self.lines: list[str] = []
        self.stamps: list[float] = []  # when each of `lines` arrived
        self.errors: list[str] = []
        self._changed = threading.Condition()
        self.proc = subprocess.Popen(
            argv, env=env, cwd=cwd, text=True, bufsize=1, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if separate_stderr else subprocess.STDOUT,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL)
        self._log = log.open("a", encoding="utf-8")
        streams = [(self.proc.stdout, self.lines, "")]
        if separate_stderr:
            streams.append((self.proc.stderr, self.errors, "stderr: "))
        self._readers = [threading.Thread(target=self._read, args=stream, daemon=True) for stream in streams]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: Any, into: list[str], prefix: str) -> None:
        for line in stream:
            with self._changed:
                self._log.write(prefix + line)
                self._log.flush()
                into.append(line.rstrip("\n"))
                if into is self.lines:
                    self.stamps.append(time.time())
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None

    def wait_line(self, wanted: Callable[[str], bool], what: str, timeout_s: float, *, start: int = 0) -> int:
        """The index of the first line from `start` on that `wanted` accepts; StepFailed after
        `timeout_s`, or at once when the process's output ended without it."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                for index in range(start, len(self.lines)):
                    if wanted(self.lines[index]):
                        return index
                left = deadline - time.monotonic()
                ended = not self._readers[0].is_alive()
                if left <= 0 or ended:
                    why = f"it exited with {self.proc.poll()}" if ended else f"not within {timeout_s:.0f} s"
                    raise StepFailed(f"{self.name}: {what}: {why}; its last lines: {self.tail(6)}")
                self._changed.wait(left)

    def wait_event(self, event: str, what: str, timeout_s: float, *, start: int = 0,
                   where: Callable[[Event], bool] = lambda e: True) -> Event:
        """The first JSON line (an answerer's event) from line `start` on with this `event`."""
        def wanted(line: str) -> bool:
            if not line.startswith("{"):
                return False
            body = json.loads(line)
            return bool(body.get("event") == event and where(body))

        return dict(json.loads(self.lines[self.wait_line(wanted, what, timeout_s, start=start)]))

    def first_event(self) -> Event:
        with self._changed:
            return dict(json.loads(next(line for line in self.lines if line.startswith("{"))))

    def tail(self, count: int = 10) -> str:
        with self._changed:
            return " | ".join(line for line in self.lines[-count:] if "propagateSizeHints" not in line)

    def send(self, body: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(body) + "\n")
        self.proc.stdin.flush()

    def finish(self, timeout_s: float = 30.0) -> int:
        """Wait for it to exit by itself and for all its output; its exit code."""
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise StepFailed(f"{self.name} did not exit within {timeout_s:.0f} s: {self.tail(6)}") from None
        self.end()
        return code

    def end(self, timeout_s: float = 10.0) -> None:
        """Close its stdin, SIGTERM, then SIGKILL; reaped either way."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=timeout_s)
        for reader in self._readers:
            reader.join(timeout=5)
        with self._changed:
            self._log.close()


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, parent pid) of `pid` ("Z": a zombie), or None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1])


class DetachedWindow(Child):
    """A window `scripts/launch` opened and left running on its own session: its lines are the ones
    its pid logs in the shared window log (followed with `tail -F`); `pid` and `running()` are the
    window's, and `end()` ends the window too."""

    def __init__(self, name: str, window_pid: int, window_log: Path, *, env: dict[str, str], cwd: Path,
                 log: Path) -> None:
        self.window_pid = window_pid
        follow = (f'tail -n +1 -F --pid={window_pid} "$0" 2>/dev/null | '
                  f'grep --line-buffered " {window_pid} "')
        super().__init__(name, ["sh", "-c", follow, str(window_log)], env=env, cwd=cwd, log=log)

    @property
    def pid(self) -> int:
        return self.window_pid

    def running(self) -> bool:
        return not has_exited(self.window_pid)

    def end(self, timeout_s: float = 10.0) -> None:
        if not has_exited(self.window_pid):
            os.kill(self.window_pid, signal.SIGTERM)
            if not wait_exit(self.window_pid, timeout_s):
                os.kill(self.window_pid, signal.SIGKILL)
        super().end(timeout_s)


def has_exited(pid: int) -> bool:
    found = proc_stat(pid)
    return found is None or found[0] in ("Z", "X")


def wait_exit(pid: int, timeout_s: float) -> bool:
    """Wait for a process that need not be our child to exit (a pidfd: no polling)."""
    if has_exited(pid):
        return True
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], timeout_s)
        return bool(readable) or has_exited(pid)
    finally:
        os.close(fd)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# ---- what the pages say ------------------------------------------------------------------------

# The pages a newcomer reads, in order: the first match of a lookup wins.
PAGES = ("README.md", "docs/getting-started.md", "docs/hosts.md")


class Readme:
    """The clone's pages (PAGES, read as one text) and the pieces the steps compare against. A
    lookup that finds nothing fails with what it looked for, so a page that changed shows as the
    step it broke."""

    def __init__(self, clone: Path) -> None:
        self.text = "\n\n".join((clone / page).read_text(encoding="utf-8") for page in PAGES)
        self.flat = re.sub(r"\s+", " ", self.text)
        self.blocks: list[tuple[str, str]] = re.findall(r"```(\w*)\n(.*?)```", self.text, re.DOTALL)

    def block(self, lang: str, containing: str) -> str:
        for block_lang, body in self.blocks:
            if block_lang == lang and containing in body:
                return body
        raise StepFailed(f"the pages: no ```{lang} block containing {containing!r}")

    @staticmethod
    def line(block: str, starting: str) -> str:
        for line in block.splitlines():
            if line.strip().startswith(starting):
                return line.strip()
        raise StepFailed(f"the pages: no line starting {starting!r} in its code block")

    @staticmethod
    def command(line: str) -> list[str]:
        """A code block's line as argv: its comment and a trailing `&` left out."""
        return shlex.split(line.partition("#")[0].strip().removesuffix("&"))

    def search(self, pattern: str, what: str) -> re.Match[str]:
        found = re.search(pattern, self.flat)
        if found is None:
            raise StepFailed(f"the pages no longer say {what} (looked for /{pattern}/)")
        return found

    def says(self, *phrases: str) -> None:
        for phrase in phrases:
            if re.sub(r"\s+", " ", phrase) not in self.flat:
                raise StepFailed(f"the pages no longer say {phrase!r}")

    def cli_row(self, command: str, *phrases: str) -> str:
        """The description in the CLI table's row for `command` (e.g. "elicitron call"), which must
        say each of `phrases`."""
        for line in self.text.splitlines():
            cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
            if line.startswith("| `") and (cells[0].startswith(f"`{command} ") or cells[0] == f"`{command}`"):
                row = " | ".join(cells[1:])
                for phrase in phrases:
                    if phrase not in row:
                        raise StepFailed(f"the table's `{command}` row no longer says {phrase!r}: {row!r}")
                return row
        raise StepFailed(f"the pages: the table of commands has no row for `{command}`")

    def demo_tools(self) -> list[str]:
        """The demo server's tools as the pages names them (and as many as it says it has)."""
        paragraph = self.search(r"`scripts/launch` with no config uses the embedded default: (.*?) Run it "
                                r"again", "what the embedded default's demo server offers").group(1)
        count = re.search(r"with (\d+) tools", paragraph)
        tools = re.findall(r"`([a-z_]+)`", paragraph)
        if count is None or int(count.group(1)) != len(tools):
            raise StepFailed(f"the pages say the demo has {count and count.group(1)} tools and names {tools}")
        return tools


# ---- the run ------------------------------------------------------------------------------------


class Newcomer:
    def __init__(self, work: Path, timeout_s: float) -> None:
        self.work = work
        self.timeout_s = timeout_s
        self.clone = work / "c"
        self.home = work / "h"
        self.runtime = work / "r"
        self.state = work / "s"
        self.logs = work / "logs"
        self.elicitron = self.clone / ".venv" / "bin" / "elicitron"
        self.python = self.clone / ".venv" / "bin" / "python"
        for made in (self.logs, self.home):
            made.mkdir()
        self.runtime.mkdir(mode=0o700)
        self.env = self._newcomer_env()
        self.readme: Readme | None = None
        self.windows: list[Child] = []  # the windows `scripts/launch` opened, in order
        self.children: list[Child] = []  # every process started, windows included
        self.answerer: Child | None = None
        self.listen_main: Child | None = None
        self.remote_window: Child | None = None
        self.mains: dict[int, set[int]] = {}  # each main's pid -> its servers' pids, as seen while it ran
        self.notes: list[str] = []
        self.launch: list[str] = []  # the pages' command that opens a window

    @property
    def r(self) -> Readme:
        assert self.readme is not None, "the clone step reads the pages"
        return self.readme

    def _newcomer_env(self) -> dict[str, str]:
        """The shell of a newcomer: a home of their own, nothing of Elicitron's set."""
        env = dict(os.environ)
        cache = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        for key in ("ELICITRON_CONNECTION", "ELICITRON_VENV", "ELICITRON_TOKEN_STORE", "PYTHONPATH",
                    "PYTHONHOME", "VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT"):
            env.pop(key, None)
        # An `elicitron` of the caller's on PATH would be run instead of the clone's: leave it out.
        path = [entry for entry in env.get("PATH", "").split(os.pathsep)
                if entry and not os.access(Path(entry) / "elicitron", os.X_OK)]
        env.update(HOME=str(self.home), XDG_CONFIG_HOME=str(self.work / "cfg"),
                   XDG_DATA_HOME=str(self.work / "d"), XDG_STATE_HOME=str(self.state),
                   XDG_RUNTIME_DIR=str(self.runtime), XDG_CACHE_HOME=cache, QT_QPA_PLATFORM="offscreen",
                   PATH=os.pathsep.join(path))
        return env

    def venv_on_path(self) -> dict[str, str]:
        """As after `. .venv/bin/activate`: `elicitron` on PATH (the pages' release.sh calls it so)."""
        return {**self.env, "PATH": f"{self.elicitron.parent}{os.pathsep}{self.env['PATH']}"}

    @property
    def connection(self) -> Path:
        return self.runtime / "elicitron" / "connection.json"

    @property
    def main_log(self) -> Path:
        return self.state / "elicitron" / "log" / "main.log"

    # -- running commands

    def argv(self, argv: list[str]) -> list[str]:
        """`elicitron ...` as typed: the clone's .venv/bin/elicitron (the pages' CLI section)."""
        return [str(self.elicitron), *argv[1:]] if argv and argv[0] == "elicitron" else argv

    def run(self, argv: list[str], *, timeout_s: float | None = None, env: dict[str, str] | None = None,
            cwd: Path | None = None, stdout: Any = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
        argv = self.argv(argv)
        try:
            return subprocess.run(argv, env=env or self.env, cwd=cwd or self.clone, text=True, stdout=stdout,
                                  stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                  timeout=timeout_s or self.timeout_s, check=False)
        except subprocess.TimeoutExpired as exc:
            raise StepFailed(f"`{shlex.join(argv)}` did not finish within {exc.timeout:.0f} s") from None

    def start(self, name: str, argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
              stdin: bool = False, separate_stderr: bool = False) -> Child:
        child = Child(name, self.argv(argv), env=env or self.env, cwd=cwd or self.clone,
                      log=self.logs / f"{name}.log", stdin=stdin, separate_stderr=separate_stderr)
        self.children.append(child)
        return child

    def status_json(self) -> dict[str, Any] | None:
        done = self.run(["elicitron", "status", "--json"], timeout_s=30)
        if done.returncode != 0:
            return None
        report: dict[str, Any] = json.loads(done.stdout)
        pid = int(report["pid"])
        self.mains.setdefault(pid, set()).update(descendants(pid))
        return report

    def poll_status(self, holds: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        """`elicitron status --json` again (each call waits for main's answer) until `holds`; the
        short pause only keeps the loop from spinning."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            report = self.status_json()
            if report is not None and holds(report):
                return report
            if time.monotonic() > deadline:
                last = json.dumps(report)[:400] if report else "main not answering"
                raise StepFailed(f"{what}: not within {self.timeout_s:.0f} s (last status: {last})")
            time.sleep(0.2)

    @staticmethod
    def renderers(report: dict[str, Any]) -> list[str]:
        return [peer["name"] for peer in report["peers"] if peer.get("role") == "renderer"]

    def main_pid(self) -> int:
        report = self.status_json()
        if report is None:
            raise StepFailed("main does not answer `elicitron status --json`")
        return int(report["pid"])

    # -- the windows

    def start_answerer(self) -> Child:
        env = {**self.env, "PYTHONPATH": str(self.clone / "tests")}
        answerer = self.start("answerer", [str(self.python), str(Path(__file__).resolve()), "--answer",
                                           str(self.connection), ANSWERER_NAME], env=env, stdin=True)
        answerer.wait_event("welcome", "the answering window attaches", 30)
        self.answerer = answerer
        return answerer

    def invoke_after(self, start: int, what: str) -> Event:
        """The first card the answering window got after its line `start`."""
        assert self.answerer is not None
        return self.answerer.wait_event("invoke", what, self.timeout_s, start=start)

    def answer(self, invoke: Event, action: str, content: dict[str, Any] | None = None) -> None:
        """Answer from the answering window; main dismisses the card everywhere ("answered")."""
        assert self.answerer is not None
        start = len(self.answerer.lines)
        self.answerer.send({"channel": invoke["channel"], "action": action,
                            **({"content": content} if content is not None else {})})
        dismiss = self.answerer.wait_event("dismiss", "main dismisses the answered card", 30, start=start,
                                           where=lambda e: e["channel"] == invoke["channel"])
        if dismiss["reason"] != "answered":
            raise StepFailed(f"the card was dismissed {dismiss['reason']!r}, not 'answered'")

    def marks(self, windows: list[Child] | None = None) -> list[int]:
        return [len(window.lines) for window in (self.windows if windows is None else windows)]

    def windows_show(self, invoke: Event, marks: list[int]) -> None:
        """Each window `scripts/launch` opened shows the card (its log: "showing card CHANNEL from
        SERVER")."""
        shown = f"showing card {invoke['channel']} from {invoke['server']}"
        for window, start in zip(self.windows, marks, strict=True):
            window.wait_line(lambda line: shown in line, f"the window shows {invoke['server']}'s card", 30,
                             start=start)

    def launch_window(self, name: str, command: list[str]) -> tuple[Child, Child]:
        """`scripts/launch`: it returns (the terminal is given back) saying the window's pid and log;
        (the window, followed in that log; the launcher, finished)."""
        launcher = self.start(f"{name}-launch", command)
        code = launcher.finish(max(self.timeout_s, INSTALL_TIMEOUT_S))
        said = "\n".join(launcher.lines)
        opened = re.search(r"window opened \(pid (\d+); its log: (.+)\)$", said, re.MULTILINE)
        if code != 0 or opened is None:
            raise StepFailed(f"`{shlex.join(command)}` exited {code} without 'window opened (pid …; its log: …)': "
                             f"{launcher.tail(8)}")
        if " INFO " in said:
            raise StepFailed(f"`{shlex.join(command)}` printed the window's log lines: {launcher.tail(8)}")
        window = DetachedWindow(name, int(opened.group(1)), Path(opened.group(2)), env=self.env, cwd=self.clone,
                                log=self.logs / f"{name}.log")
        self.children.append(window)
        self.windows.append(window)
        window.wait_line(lambda line: "connection state: connected" in line, "the window attaches",
                         self.timeout_s)
        self.poll_status(lambda r: self.renderers(r).count(PERSON_AT_MACHINE) >= len(self.windows),
                         f"status --json lists {len(self.windows)} windows named {PERSON_AT_MACHINE}")
        return window, launcher

    # ---- the steps, in the pages' order -------------------------------------------------------

    def step_clone(self) -> str:
        done = subprocess.run(["git", "clone", "--quiet", str(CHECKOUT), str(self.clone)],
                              capture_output=True, text=True, timeout=300, check=False, env=self.env,
                              cwd=self.work)
        if done.returncode != 0:
            raise StepFailed(f"git clone exited {done.returncode}: {done.stderr.strip()}")
        head = subprocess.run(["git", "-C", str(self.clone), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        self.readme = Readme(self.clone)
        return f"cloned {head} into {self.clone}; HOME and XDG dirs in {self.work}"

    def step_launch(self) -> str:
        line = self.r.line(self.r.block("sh", "scripts/launch"), "scripts/launch")
        comment = line.partition("#")[2]
        for phrase in ("first run: makes .venv", "starts main in the background", "opens a window"):
            if phrase not in comment:
                raise StepFailed(f"the pages' `scripts/launch` comment no longer says {phrase!r}: {comment!r}")
        floor = self.r.search(r"makes \.venv \(Python >= (\d+)\.(\d+)\)", "the Python scripts/launch needs")
        command = self.launch = self.r.command(line)
        window, launcher = self.launch_window("window-1", command)
        for said in ("installing the project into", "starting main in the background"):
            if not any(said in text for text in launcher.lines):
                raise StepFailed(f"launch did not say {said!r}: {launcher.tail(8)}")
        if not (self.clone / ".venv" / ".elicitron-locked").exists():
            raise StepFailed("no .venv made from uv.lock in the clone")
        version = subprocess.run([str(self.python), "-c", "import sys; print(*sys.version_info[:2])"],
                                 capture_output=True, text=True, check=True).stdout.split()
        if tuple(map(int, version)) < (int(floor.group(1)), int(floor.group(2))):
            raise StepFailed(f".venv has Python {'.'.join(version)}, below the pages' {floor.group(0)}")
        main_pid = self.main_pid()
        if main_pid == window.pid or os.getsid(main_pid) != main_pid:
            raise StepFailed(f"main (pid {main_pid}) does not run in the background (a session of its own)")
        if not self.main_log.exists():
            raise StepFailed(f"no main log at {self.main_log}")
        return (f"`{shlex.join(command)}`: .venv (Python {'.'.join(version)}) made from uv.lock, main "
                f"(pid {main_pid}) in the background, window {PERSON_AT_MACHINE} (pid {window.pid}) attached "
                "(status --json lists it); the terminal came back, the window's log in a file")

    def step_launch_again(self) -> str:
        self.r.says("Run it again while main is up and it just opens another window.")
        before = self.main_pid()
        window, launcher = self.launch_window("window-2", self.launch)
        report = self.status_json() or {"pid": None, "peers": []}
        problems = []
        if report["pid"] != before:
            problems.append(f"main's pid changed {before} -> {report['pid']}")
        if any("starting main" in line for line in launcher.lines):
            problems.append("it started another main")
        if len(self.renderers(report)) != 2:
            problems.append(f"windows attached: {self.renderers(report)}, not 2")
        if problems:
            raise StepFailed("; ".join(problems))
        return f"`scripts/launch` again: the same main (pid {before}), one more window (pid {window.pid})"

    def step_call(self) -> str:
        self.r.cli_row("elicitron call", "its elicitations appear in the windows", "prints the result")
        self.r.says("| `elicitron call SERVER TOOL ['{\"json\": \"args\"}'] [--json]` |")
        answerer = self.start_answerer()
        argv = ["elicitron", "call", "demo", "book_table", json.dumps(BOOKING_ARGS)]
        marks, start = self.marks(), len(answerer.lines)
        call = self.start("call", argv, separate_stderr=True)
        invoke = self.invoke_after(start, "the call's card reaches the windows")
        message = f"Book a table at {BOOKING_ARGS['restaurant']}?"
        if (invoke["server"], invoke["message"]) != ("demo", message):
            raise StepFailed(f"the card is {invoke['server']!r}: {invoke['message']!r}, not 'demo': "
                             f"{message!r}")
        self.windows_show(invoke, marks)
        # While it waits, `elicitron status` lists it ("pending elicitations").
        pending = self.run(["elicitron", "status"]).stdout
        row = rf"^\s+demo\s+{re.escape(invoke['channel'])}\s+{re.escape(message)}$"
        if "pending requests (1):" not in pending or not re.search(row, pending, re.MULTILINE):
            raise StepFailed(f"status while the card waits does not list it as pending: {pending!r}")
        self.answer(invoke, "accept", BOOKING_ANSWER)
        code = call.finish()
        output = "\n".join(call.lines)
        if code != 0 or call.errors:
            raise StepFailed(f"`{shlex.join(argv)}` exited {code}: {output!r}, stderr {call.errors}")
        try:
            printed = json.loads(output)
        except json.JSONDecodeError:
            raise StepFailed(f"call printed {output!r}: not the tool's text (the demo's JSON)") from None
        if printed != {"action": "accept", "content": BOOKING_ANSWER}:
            raise StepFailed(f"call printed {printed}, not the answer given")
        self.r.says("`call` prints the tool's text, which for the demo is your answer as JSON")
        return (f"`{shlex.join(argv)}`: card 'demo: {message}' in both windows, pending in status; "
                f"answered by {ANSWERER_NAME}; exit 0, printed {output}")

    def step_status(self) -> str:
        self.r.cli_row("elicitron status", "servers (status, tools, whole errors)", "attached windows",
                       "pending elicitations")
        self.r.search(r"`elicitron status` names [^.;]*loop", "that `elicitron status` names main's loop")
        tools = self.r.demo_tools()
        main_pid = self.main_pid()
        done = self.run(["elicitron", "status"])
        text, problems = done.stdout, []
        if done.returncode != 0:
            raise StepFailed(f"status exited {done.returncode}: {done.stderr.strip()}")
        if not re.match(rf"main pid {main_pid} \(\S+( \S+)? loop\), session \S+, endpoint ipc://", text):
            problems.append(f"its first line names no pid, loop, session, endpoint: {text.splitlines()[0]!r}")
        demo = re.search(r"^\s+demo\s+(\S+)\s+tools: (.*)$", text, re.MULTILINE)
        if "servers (1):" not in text or demo is None:
            problems.append("no 'servers (1):' with a line for demo")
        else:
            if demo.group(1) != "ready":
                problems.append(f"demo is {demo.group(1)!r}, not ready")
            listed = [tool.strip() for tool in demo.group(2).split(",")]
            if sorted(listed) != sorted(tools):
                problems.append(f"demo's tools {listed} are not the pages' {tools}")
        names = [PERSON_AT_MACHINE for _window in self.windows] + [ANSWERER_NAME]
        if f"windows ({len(names)}):" not in text:
            problems.append(f"no 'windows ({len(names)}):'")
        problems += [f"window {name} not listed" for name in names
                     if not re.search(rf"^\s+{re.escape(name)}\s+\S+$", text, re.MULTILINE)]
        if "pending requests (0):" not in text:
            problems.append("not 'pending requests (0):' once answered")
        if problems:
            raise StepFailed("; ".join(problems) + f"; it printed {text!r}")
        return (f"`elicitron status`: main's pid and loop, demo ready with the pages' {len(tools)} tools, "
                f"windows ({len(names)}) {', '.join(names)}, pending requests (0)")

    def step_audit(self) -> str:
        self.r.cli_row("elicitron audit", "every elicitation, its outcome and the answering window",
                       "(its name; `--json` also has its id)")
        self.r.says("one row per elicitation: server, mode, message, requested fields (or the URL)")
        gate = self.r.block("sh", "elicitron main --listen")  # the deploy gate's "afterwards" line
        command = self.r.command(self.r.line(gate, "elicitron audit"))
        done = self.run(command)
        if done.returncode != 0:
            raise StepFailed(f"`{shlex.join(command)}` exited {done.returncode}: {done.stderr.strip()}")
        lines = done.stdout.splitlines()
        header = lines[0].split() if lines else []
        if header != ["CREATED", "SERVER", "MODE", "OUTCOME", "BY", "ASKED", "MESSAGE"]:
            raise StepFailed(f"audit's header is {header}")
        message = f"Book a table at {BOOKING_ARGS['restaurant']}?"
        rows = [line for line in lines[1:] if line.endswith(message)]
        if len(rows) != 1:
            raise StepFailed(f"{len(rows)} rows for the booking, not 1: {done.stdout!r}")
        server, mode, outcome, by = rows[0].split()[2:6]  # CREATED is a date and a time
        if (server, mode, outcome, by) != ("demo", "form", "accept", ANSWERER_NAME):
            raise StepFailed(f"the booking's row is {server} {mode} {outcome} BY {by}, not demo form accept "
                             f"BY {ANSWERER_NAME}")
        if "name, party_size, outdoor" not in rows[0]:  # ASKED: the requested fields, cut to the column
            raise StepFailed(f"the row does not list the requested fields: {rows[0]!r}")
        entries = json.loads(self.run(["elicitron", "audit", "--json", "--limit", "5"]).stdout)
        entry: dict[str, Any] = next((e for e in entries if e.get("message") == message), {})
        assert self.answerer is not None
        window_id = self.answerer.first_event()["window"]
        if (entry.get("windowName"), entry.get("window")) != (ANSWERER_NAME, window_id):
            raise StepFailed(f"--json names window {entry.get('windowName')!r} id {entry.get('window')!r}, "
                             f"not {ANSWERER_NAME!r} id {window_id!r}")
        return (f"`{shlex.join(command)}`: the booking's row is demo form accept BY {ANSWERER_NAME} with its "
                "fields; --json has the window's name and id")

    def step_readme_try_it(self) -> str:
        """The README's "Try it" block as it is, in a shell with the venv on PATH (as its first line,
        `. .venv/bin/activate`, makes it), each command's output checked against its numbered line.
        Its last command, `elicitron stop`, is the stop step's."""
        text = (self.clone / "README.md").read_text(encoding="utf-8")
        found = re.search(r"^## Try it\n(.*?)```sh\n(.*?)```\n(.*?)\n## ", text, re.DOTALL | re.MULTILINE)
        if found is None:
            raise StepFailed("README: no \"## Try it\" section with a ```sh block")
        lines = [line.partition("  #")[0].strip() for line in found.group(2).splitlines() if line.strip()]
        said = re.sub(r"\s+", " ", found.group(3))
        if lines[0] != ". .venv/bin/activate" or len(lines) != 6 or lines[5] != "elicitron stop":
            raise StepFailed(f"README's Try it block is no longer activate + five commands ending in stop: {lines}")
        call, status, audit, ask = lines[1:5]

        def numbered(n: int) -> str:
            item = re.search(rf"(?:^| ){n}\. (.*?)(?= {n + 1}\. |$)", said)
            if item is None:
                raise StepFailed(f"README's Try it has no item {n}")
            return item.group(1)

        def shell(name: str, command: str) -> Child:
            return self.start(name, ["sh", "-c", command], env=self.venv_on_path(), separate_stderr=True)

        # 1. the card, answered; call prints the answer as JSON
        card = re.search(r"shows the demo's card, \"(.*?)\"", numbered(1))
        if card is None or "prints the tool's result, here your answer as JSON" not in numbered(1):
            raise StepFailed(f"README's item 1 no longer names the card and what call prints: {numbered(1)!r}")
        assert self.answerer is not None
        start = len(self.answerer.lines)
        job = shell("readme-call", call)
        invoke = self.invoke_after(start, "the README's call's card")
        if invoke["message"] != card.group(1):
            raise StepFailed(f"the card asks {invoke['message']!r}, the README says {card.group(1)!r}")
        self.answer(invoke, "accept", BOOKING_ANSWER)
        if (code := job.finish()) != 0 or json.loads("\n".join(job.lines)) != {"action": "accept",
                                                                               "content": BOOKING_ANSWER}:
            raise StepFailed(f"`{call}` exited {code} printing {job.lines}")
        # 2. status: the demo ready with the README's count of tools, nothing pending
        count = re.search(r"the demo server `ready` with its (\d+) tools", numbered(2))
        done = subprocess.run(["sh", "-c", status], env=self.venv_on_path(), cwd=self.clone, text=True,
                              capture_output=True, timeout=self.timeout_s, check=False)
        demo = re.search(r"^\s+demo\s+ready\s+tools: (.*)$", done.stdout, re.MULTILINE)
        if count is None or demo is None or len(demo.group(1).split(",")) != int(count.group(1)) \
                or "pending requests (0):" not in done.stdout or "(none now)" not in numbered(2):
            raise StepFailed(f"`{status}` printed {done.stdout!r}; README item 2: {numbered(2)!r}")
        # 3. audit: the booking's row, accept, by the window that answered
        done = subprocess.run(["sh", "-c", audit], env=self.venv_on_path(), cwd=self.clone, text=True,
                              capture_output=True, timeout=self.timeout_s, check=False)
        rows = [line.split() for line in done.stdout.splitlines() if line.endswith(card.group(1))]
        if "outcome (`accept`)" not in numbered(3) or len(rows) != 1 or rows[0][4:6] != ["accept", ANSWERER_NAME]:
            raise StepFailed(f"`{audit}` printed {done.stdout!r}; README item 3: {numbered(3)!r}")
        # 4. a yes/no question: Yes prints true, exits 0, and && runs what follows
        after = ask.rpartition("&& echo ")[2]
        if "it prints `true` and exits 0 for Yes, so `&&` runs the next command" not in numbered(4):
            raise StepFailed(f"README's item 4 no longer says what Yes prints: {numbered(4)!r}")
        start = len(self.answerer.lines)
        job = shell("readme-ask", ask)
        invoke = self.invoke_after(start, "the README's question")
        field = next(iter((invoke.get("schema") or {}).get("properties", {})), "")
        self.answer(invoke, "accept", {field: True})
        if (code := job.finish()) != 0 or job.lines != ["true", after]:
            raise StepFailed(f"`{ask}` answered Yes exited {code} printing {job.lines}, not ['true', {after!r}]")
        return (f"in a shell after `. .venv/bin/activate`: `{call}` (card {card.group(1)!r}, printed the answer), "
                f"`{status}` (demo ready, {count.group(1)} tools, nothing pending), `{audit}` (accept BY "
                f"{ANSWERER_NAME}), `{ask}` (Yes: true, {after}); `elicitron stop` is the stop step's")

    def step_rules(self) -> str:
        self.r.cli_row("elicitron rules", "remembered answers, tool approvals and config rules")
        done = self.run(["elicitron", "rules"])
        as_json = self.run(["elicitron", "rules", "--json"])
        if done.returncode != 0 or as_json.returncode != 0:
            raise StepFailed(f"rules exited {done.returncode}, --json {as_json.returncode}: {done.stderr!r}")
        if json.loads(as_json.stdout) != [] or not done.stdout.startswith("no rules"):
            raise StepFailed(f"with no config and nothing remembered, rules printed {done.stdout!r} and "
                             f"{as_json.stdout!r}")
        self.r.says('Nothing yet: it says "no rules" (and `--json` prints `[]`).')
        return f"`elicitron rules`: {done.stdout.strip()!r}; --json []"

    def step_ask(self) -> str:
        readme = self.r
        gate = readme.line(readme.block("sh", "elicitron main --listen"), "if elicitron ask")
        found = re.fullmatch(r"if (elicitron ask .*?); then (\./deploy\.sh [\d.]+); fi", gate)
        if found is None:
            raise StepFailed(f"the pages' release.sh line is no longer `if elicitron ask ...; then ...; fi`: "
                             f"{gate!r}")
        command, deploy = shlex.split(found.group(1)), shlex.split(found.group(2))
        question = command[-1]
        card = readme.search(r"The laptop shows \"(\S+) \(pid \d+ on \S+\) asks for input: (.*?)\"",
                             "what the card of a release.sh question shows")
        asker = card.group(1)
        yes_no = readme.search(r"`--yes-no` prints `(\w+)` and exits (\d+) for Yes; No prints `(\w+)` and "
                               r"exits (\d+)", "what --yes-no prints and exits")
        table = readme.search(r"Exit codes: \*\*0\*\* accept.*?\*\*5\*\* expired", "ask's exit codes")
        codes = {decision: int(code) for code, decision in re.findall(r"\*\*(\d+)\*\* (\w+)", table.group(0))}
        if (int(yes_no.group(2)), int(yes_no.group(4))) != (codes["accept"], codes["decline"]):
            raise StepFailed(f"the pages: --yes-no exits {yes_no.group(2)}/{yes_no.group(4)}, its table says "
                             f"accept {codes['accept']}, decline {codes['decline']}")
        if card.group(2) != question:
            raise StepFailed(f"the pages' card shows {card.group(2)!r}, its release.sh asks {question!r}")
        # release.sh holds the pages' line as it is; deploy.sh says that it ran.
        jobs = self.work / "job"
        jobs.mkdir()
        (jobs / "release.sh").write_text(f"#!/bin/sh\n{gate}\n", encoding="utf-8")
        (jobs / "deploy.sh").write_text('#!/bin/sh\necho "$0 $*"\n', encoding="utf-8")
        for script in ("release.sh", "deploy.sh"):
            (jobs / script).chmod(0o755)
        assert self.answerer is not None
        results = []
        for yes in (True, False):
            printed = yes_no.group(1) if yes else yes_no.group(3)
            start, marks = len(self.answerer.lines), self.marks()
            job = self.start(f"release-{'yes' if yes else 'no'}", ["./release.sh"], env=self.venv_on_path(),
                             cwd=jobs, separate_stderr=True)
            invoke = self.invoke_after(start, "release.sh's question")
            who = invoke.get("asker") or {}
            expected = {"name": asker, "pid": job.pid, "machine": socket.gethostname()}
            if who != expected or invoke["message"] != question or invoke["kind"] != "question":
                raise StepFailed(f"the card names {who} asking {invoke['message']!r} ({invoke['kind']}), not "
                                 f"{expected} asking {question!r}")
            self.windows_show(invoke, marks)
            field = next(iter((invoke.get("schema") or {}).get("properties", {})), "")
            self.answer(invoke, "accept" if yes else "decline", {field: True} if yes else None)
            code = job.finish()
            want = [printed, " ".join(deploy)] if yes else [printed]
            if code != 0 or job.lines != want:
                raise StepFailed(f"release.sh answered {'Yes' if yes else 'No'} exited {code} printing "
                                 f"{job.lines}, not 0 printing {want}")
            said = f" (stderr: {' / '.join(job.errors)})" if job.errors else ""
            results.append(f"{'Yes' if yes else 'No'} prints {' / '.join(want)}{said}")
        # The exit codes themselves: the pages' command alone, Yes then No.
        for yes in (True, False):
            action, printed = ("accept", yes_no.group(1)) if yes else ("decline", yes_no.group(3))
            start = len(self.answerer.lines)
            job = self.start(f"ask-{action}", command, env=self.venv_on_path(), cwd=jobs,
                             separate_stderr=True)
            invoke = self.invoke_after(start, "the question")
            field = next(iter((invoke.get("schema") or {}).get("properties", {})), "")
            self.answer(invoke, action, {field: True} if yes else None)
            code = job.finish()
            if code != codes[action] or job.lines != [printed]:
                raise StepFailed(f"`{shlex.join(command)}` answered {'Yes' if yes else 'No'} exited {code} "
                                 f"printing {job.lines}, not {codes[action]} printing [{printed!r}]")
            me = Path(__file__).name
            run_as_script = len(sys.orig_argv) > 1 and Path(sys.orig_argv[1]).name == me
            if run_as_script and invoke["asker"]["name"] != me:  # "the program that ran `elicitron ask`"
                raise StepFailed(f"run from {me}, the card names {invoke['asker']['name']!r}")
        entries = json.loads(self.run(["elicitron", "audit", "--json", "--limit", "10"]).stdout)
        outcomes = sorted(e.get("outcome") or "" for e in entries if e.get("message") == question)
        if outcomes != ["accept", "accept", "decline", "decline"]:
            raise StepFailed(f"the audit log records the questions as {outcomes}, not 2 accept and 2 decline")
        self.notes.append("the card's wording (\"release.sh (pid N on HOST) asks for input: ...\") is drawn "
                          "by the window, not visible from outside: checked the invoke names release.sh, its "
                          "pid and this machine")
        return (f"release.sh with the pages' line: {'; '.join(results)}; its card names {asker} (pid, "
                f"machine), in both windows; `{shlex.join(command)}` exits {codes['accept']} for Yes, "
                f"{codes['decline']} for No; the audit log has No as decline")

    def step_serve_agent(self) -> str:
        script = self.r.block("python", "StdioServerParameters(command=ELICITRON")
        tools = self.r.demo_tools()
        comment = re.search(r"print\(\[tool\.name for tool in tools\.tools\]\)\s+# (.*)", script)
        calls = re.search(r'call_tool\("(\w+?)__(\w+)", \{\}\)', script)
        if comment is None or calls is None:
            raise StepFailed("the pages' agent no longer prints the tool names and calls SERVER__TOOL with {}")
        agent = self.work / "agent.py"
        agent.write_text(script, encoding="utf-8")
        assert self.answerer is not None
        start, marks = len(self.answerer.lines), self.marks()
        # No `elicitron` on the newcomer's PATH: the agent finds the one beside its Python.
        run = self.start("agent", [str(self.python), str(agent)], cwd=self.work, separate_stderr=True)
        invoke = self.invoke_after(start, f"the agent's {calls.group(2)} card")
        if (invoke["server"], invoke["message"]) != (calls.group(1), "Book a table at Chez MCP?"):
            raise StepFailed(f"the agent's card is {invoke['server']}: {invoke['message']!r}")
        if not invoke.get("via"):
            raise StepFailed("the agent's card names no host (`via`)")
        self.windows_show(invoke, marks)
        report = self.status_json() or {"peers": []}
        hosts = [peer["name"] for peer in report["peers"] if peer.get("role") == "host"]
        self.answer(invoke, "accept", AGENT_ANSWER)
        code = run.finish(60)
        if code != 0 or len(run.lines) != 2:
            raise StepFailed(f"the pages' agent exited {code}: {run.tail(8)} {run.errors[-5:]}")
        try:
            names = ast.literal_eval(run.lines[0])
        except (SyntaxError, ValueError):
            raise StepFailed(f"the agent's first line is not the tool list: {run.lines[0]!r}") from None
        want = [f"demo__{tool}" for tool in tools]
        if sorted(names) != sorted(want):
            raise StepFailed(f"the agent lists {names}, not the pages' {want}")
        missing = [shown for shown in re.findall(r"\w+", comment.group(1)) if shown not in names]
        if missing:
            raise StepFailed(f"the pages' comment shows {missing}, which the agent does not list")
        answer = json.dumps({"action": "accept", "content": AGENT_ANSWER}, sort_keys=True)
        if "TextContent" not in run.lines[1] or answer not in run.lines[1]:
            raise StepFailed(f"the agent printed {run.lines[1]!r}, not a TextContent with {answer}")
        if len(hosts) != 1:
            raise StepFailed(f"while the agent waited, status listed hosts {hosts}, not 1")
        return (f"the pages' agent, pasted as it is, run by .venv/bin/python (no elicitron on PATH): "
                f"lists the {len(tools)} demo__ tools; its book_table card (via {invoke['via']!r}) in both "
                "windows, answered: it printed the result; status listed the host meanwhile")

    def step_print_config(self) -> str:
        readme = self.r
        said = readme.search(r"`elicitron serve --print-config` prints the exact entries below for your "
                             r"installation: the absolute path to `elicitron`, and an `env` with this "
                             r"session's (.*?) \(those set\)", "what --print-config's entries hold")
        readme.says("`elicitron serve --print-config` prints a shorter agent for your installation (absolute "
                    "path and `env` filled in) that only lists the tools")
        want_env = {key: self.env[key] for key in re.findall(r"`(\w+)`", said.group(1)) if self.env.get(key)}
        done = self.run(["elicitron", "serve", "--print-config"])
        if done.returncode != 0:
            raise StepFailed(f"--print-config exited {done.returncode}: {done.stderr.strip()}")
        text, problems = done.stdout, []
        for key in ("mcpServers", "servers"):
            found = re.search(r'^\{\n  "' + key + r'".*?^\}$', text, re.DOTALL | re.MULTILINE)
            if found is None:
                problems.append(f"no {key} entry printed")
                continue
            documented = json.loads(readme.block("json", '{"' + key + '": {"elicitron"'))
            documented[key]["elicitron"].update(command=str(self.elicitron), env=want_env)
            if json.loads(found.group(0)) != documented:
                problems.append(f"{key}: printed {found.group(0)!r}, the pages' with this path and env: "
                                f"{documented}")
        at = text.find("import asyncio")
        if at < 0:
            raise StepFailed("; ".join([*problems, "no Python agent printed"]))
        agent = self.work / "printed_agent.py"
        agent.write_text(text[at:], encoding="utf-8")
        run = self.run([str(self.python), str(agent)], cwd=self.work)
        want = sorted(f"demo__{tool}" for tool in readme.demo_tools())
        listed = sorted(name.strip() for name in run.stdout.strip().split(","))
        if run.returncode != 0 or listed != want:
            problems.append(f"its agent exited {run.returncode}, listed {listed} "
                            f"({run.stderr.strip()[-200:]})")
        if "call_tool" in text[at:]:
            problems.append("its agent calls a tool; the the pages say it only lists them")
        if problems:
            raise StepFailed("; ".join(problems))
        return (f"the Claude Desktop/Cursor and VS Code entries are the pages' with {self.elicitron} and "
                f"env {sorted(want_env)}; its agent, pasted, lists the {len(want)} demo__ tools")

    def step_pair_needs_listen(self) -> str:
        self.r.cli_row("elicitron main --listen tcp://HOST:PORT", "also accept remote windows over tcp")
        target = self.work / "laptop.json"
        done = self.run(["elicitron", "pair", "--output", str(target)])
        lines = done.stderr.strip().splitlines()
        if done.returncode != 1 or len(lines) != 1 or "--listen tcp://HOST:PORT" not in lines[0]:
            raise StepFailed(f"pair with no tcp listener exited {done.returncode}: {done.stderr!r}")
        if target.exists():
            raise StepFailed("pair refused, yet left a file behind")
        self.r.says("`elicitron pair` on a main started without `--listen` exits 1 with one line saying to start "
                    "main with `--listen tcp://HOST:PORT`")
        return f"`elicitron pair --output FILE` on the launched main: exit 1, {lines[0]!r}"

    def stop_and_check(self, windows: list[Child], main: Child | None = None) -> str:
        """`elicitron stop`: main and its servers exit before it returns; each window hears it at once,
        stays open and says it is not connected; then `status` exits as with no main."""
        readme = self.r
        readme.cli_row("elicitron stop", "waits until main has exited")
        readme.says("After `elicitron stop` (or before main starts) the window says main is not running",
                    "It says so as soon as main starts to stop (main tells its windows)")
        no_main = int(readme.search(r"Exit codes: 0 ok, 1 failure .*? (\d+) no main running",
                                    "the CLI's exit code with no main").group(1))
        says = readme.search(r"the CLI says \"(.*?)\"", "what the CLI says with no main").group(1)
        main_pid = self.main_pid()
        servers = self.mains[main_pid]
        marks = self.marks(windows)
        done = self.run(["elicitron", "stop"])
        exited = has_exited(main_pid)
        if done.returncode != 0 or done.stdout.strip() != f"stopped main (pid {main_pid})":
            raise StepFailed(f"stop exited {done.returncode} printing {done.stdout!r} {done.stderr!r}")
        if not exited:
            raise StepFailed(f"stop returned while main (pid {main_pid}) still runs")
        found = proc_stat(main_pid)
        # A zombie whose parent is a window is ours (the window never reaps it); one left to pid 1 is
        # that init's to reap (a container's pid 1 may not: not the product's doing).
        parent = next((w.name for w in windows if found is not None and w.pid == found[1]), None)
        if found is not None and found[0] == "Z" and parent is not None:
            raise StepFailed(f"the stopped main (pid {main_pid}) stays a zombie until {parent} closes: "
                             "it is the window's child, and the window never reaps it")
        if main is not None and (code := main.finish(10)) != 0:
            raise StepFailed(f"main exited {code}")
        if left := [pid for pid in servers if not has_exited(pid)]:
            raise StepFailed(f"main's servers still run: pids {left}")
        for window, start in zip(windows, marks, strict=True):
            window.wait_line(lambda line: "main is stopping" in line, "the window hears main stop", 15,
                             start=start)
            window.wait_line(lambda line: "connection state: disconnected" in line,
                             "the window shows it is not connected", 15, start=start)
            if not window.running():
                raise StepFailed(f"{window.name} exited when main stopped")
        status = self.run(["elicitron", "status"])
        if status.returncode != no_main or says not in status.stderr:
            raise StepFailed(f"status after stop exited {status.returncode} ({status.stderr.strip()!r}), not "
                             f"{no_main} saying {says!r}")
        return (f"printed 'stopped main (pid {main_pid})' once main and its servers had exited; "
                f"{len(windows)} windows heard it at once (\"main is stopping\") and stay open; then "
                f"`elicitron status` exits {no_main}: {status.stderr.strip()!r}")

    def step_stop(self) -> str:
        if self.answerer is not None:  # its part is done: it says bye before main goes
            self.answerer.end()
            self.answerer = None
        return f"`elicitron stop`: {self.stop_and_check(self.windows)}"

    def step_pair(self) -> str:
        readme = self.r
        block = readme.block("sh", "elicitron main --listen")
        readme.says("it reconnects by itself when main is back")
        readme.cli_row("elicitron pair", "`--output` writes its connection file 0600",
                       "(a file stdout is redirected to is made 0600 too)",
                       "then `elicitron window --connection FILE`")
        port = free_port()
        # The the pages' lines, on this machine: 127.0.0.1 for its 0.0.0.0:7777 and its build-7.
        listen = [re.sub(r"^tcp://[^:]+:\d+$", f"tcp://127.0.0.1:{port}", arg)
                  for arg in readme.command(readme.line(block, "elicitron main --listen"))]
        pair = readme.command(readme.line(block, "elicitron pair"))
        pair = ["127.0.0.1" if before == "--host" else arg
                for before, arg in zip(["", *pair[:-1]], pair, strict=True)]
        window_argv = readme.command(readme.line(block, "elicitron window --connection"))
        marks = self.marks()
        main = self.start("main-listen", listen, cwd=self.work)
        self.listen_main = main
        took = []
        for window, start in zip(self.windows, marks, strict=True):
            index = window.wait_line(lambda line: "connection state: connected" in line,
                                     "the window reconnects by itself to the new main", 30, start=start)
            took.append(f"{window.stamps[index] - main.started:.1f}")
        report = self.poll_status(lambda r: len(self.renderers(r)) == 2,
                                  "both windows attach to the new main")
        problems = []
        if int(report["pid"]) != main.pid:
            problems.append(f"status names main pid {report['pid']}, not {main.pid}")
        log = self.work / listen[listen.index("--log-file") + 1]
        if not log.exists() or stat.S_IMODE(log.stat().st_mode) != 0o600:
            problems.append(f"--log-file {log.name} is not there 0600")
        output = self.work / pair[pair.index("--output") + 1]
        done = self.run(pair, cwd=self.work)
        if done.returncode != 0 or not output.exists():
            raise StepFailed(f"`{shlex.join(pair)}` exited {done.returncode}: {done.stderr.strip()}")
        if (mode := stat.S_IMODE(output.stat().st_mode)) != 0o600:
            problems.append(f"{output.name} is {oct(mode)}, not 0600")
        paired = json.loads(output.read_text(encoding="utf-8"))
        local = json.loads(self.connection.read_text(encoding="utf-8"))
        keys = ("serverKey", "clientPublicKey", "clientSecretKey")
        endpoint = f"tcp://127.0.0.1:{port}"
        if (paired.get("endpoint"), paired.get("token")) != (endpoint, local["token"]) or not all(
                paired.get(key) for key in keys):
            problems.append(f"{output.name} holds {sorted(paired)}, endpoint {paired.get('endpoint')!r}")
        if f"then: elicitron window --connection {output.name}" not in done.stderr:
            problems.append(f"pair's hint is {done.stderr.strip()!r}")
        redirected = self.work / "redirected.json"
        with redirected.open("w", encoding="utf-8") as sink:
            redirected.chmod(0o644)  # as the shell's umask leaves it
            again = self.run(["elicitron", "pair", "--name", "redirected"], stdout=sink, cwd=self.work)
        if again.returncode != 0 or stat.S_IMODE(redirected.stat().st_mode) != 0o600 or \
                "clientSecretKey" not in redirected.read_text(encoding="utf-8"):
            problems.append(f"`pair > file` left it {oct(stat.S_IMODE(redirected.stat().st_mode))} "
                            f"(exit {again.returncode})")
        remote = self.start("window-remote", window_argv, cwd=self.work)
        self.remote_window = remote
        remote.wait_line(lambda line: "connection state: connected" in line, "the paired window attaches", 30)
        report = self.poll_status(lambda r: self.renderers(r).count(PERSON_AT_MACHINE) > len(self.windows),
                                  "status lists the paired window")
        if problems:
            raise StepFailed("; ".join(problems))
        return (f"`{shlex.join(listen)}`: both windows reconnected by themselves (after {', '.join(took)} "
                "s); "
                f"`{shlex.join(pair)}`: 0600, tcp endpoint, token and CURVE keys (`pair > file` made 0600 "
                f"too); `{shlex.join(window_argv)}` attached over tcp+CURVE "
                f"({len(self.renderers(report))} windows)")

    def step_stop_final(self) -> str:
        if self.listen_main is None or self.remote_window is None:
            raise StepFailed("no main with --listen and paired window to stop")
        checked = self.stop_and_check([*self.windows, self.remote_window], self.listen_main)
        no_main = int(self.r.search(r"\*\*(\d+)\*\* no main running", "ask's exit code with no main")
                      .group(1))
        ask = self.run(["elicitron", "ask", "--yes-no", "anyone there?"], timeout_s=20)
        if ask.returncode != no_main:
            raise StepFailed(f"ask with no main exited {ask.returncode}, not {no_main}: "
                             f"{ask.stderr.strip()!r}")
        return f"`elicitron stop` (main exited 0): {checked}; `elicitron ask` exits {no_main} at once"

    # ---- the end --------------------------------------------------------------------------------

    def cleanup(self) -> None:
        """End every process started here: the children (SIGTERM, then SIGKILL), then any main
        still running (one `scripts/launch` started runs in its own session), then whatever they
        left behind."""
        spawned = {pid for child in self.children for pid in descendants(child.pid)}
        spawned |= {pid for main in self.mains for pid in descendants(main)}
        spawned |= {pid for servers in self.mains.values() for pid in servers}
        for child in reversed(self.children):
            child.end()
        for pid in self.mains:
            if not has_exited(pid):
                os.kill(pid, signal.SIGTERM)
                if not wait_exit(pid, 20):
                    os.kill(pid, signal.SIGKILL)
        for pid in spawned:
            if not wait_exit(pid, 5):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def failure_context(self) -> str:
        parts = []
        for name, path in (("main's log", self.main_log), ("--listen main's log", self.work / "main.log")):
            if path.exists():
                tail = path.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
                parts.append(f"--- {name}, last lines ---\n" + "\n".join(tail))
        for child in [*self.windows, self.remote_window, self.answerer]:
            if child is not None:
                parts.append(f"--- {child.name}, last lines ---\n" + child.tail(8).replace(" | ", "\n"))
        return "\n".join(parts)


@contextmanager
def signals_end_the_run() -> Iterator[None]:
    """SIGTERM and SIGHUP end the run as Ctrl-C does, so the cleanup runs."""
    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/newcomer", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (clone, logs) and say where")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                        help=f"longest wait for any one thing, in seconds (default {DEFAULT_TIMEOUT_S:.0f})")
    parser.add_argument("--answer", nargs=2, metavar=("CONNECTION", "NAME"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.answer:
        return run_answerer(Path(args.answer[0]), args.answer[1])

    dirty = subprocess.run(["git", "-C", str(CHECKOUT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, check=False).stdout.strip()
    if dirty:
        print("newcomer: the checkout has uncommitted changes; the clone has its HEAD only", file=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix="eli-nc-", dir="/tmp"))  # short: ipc paths stay under 107 bytes
    run = Newcomer(work, args.timeout)
    steps: list[tuple[str, Callable[[], str]]] = [
        ("clone", run.step_clone), ("launch", run.step_launch), ("launch again", run.step_launch_again),
        ("call + answer", run.step_call), ("status", run.step_status), ("audit", run.step_audit),
        ("rules", run.step_rules), ("README: try it", run.step_readme_try_it), ("ask", run.step_ask),
        ("serve: the pages' agent", run.step_serve_agent),
        ("serve --print-config", run.step_print_config),
        ("pair without --listen", run.step_pair_needs_listen), ("stop", run.step_stop),
        ("pair: the deploy gate", run.step_pair), ("stop again", run.step_stop_final),
    ]
    essential = {"clone", "launch"}  # nothing after them can run without them
    failed: list[str] = []
    began = time.monotonic()
    try:
        with signals_end_the_run():
            for name, step in steps:
                if essential & set(failed):
                    print(f"FAIL {name}: not run ({', '.join(sorted(essential & set(failed)))} failed)")
                    failed.append(name)
                    continue
                started = time.monotonic()
                try:
                    detail = step()
                except Exception as exc:  # noqa: BLE001  (StepFailed, or a surprise: either way, this step)
                    failed.append(name)
                    what = str(exc) if isinstance(exc, StepFailed) else f"{type(exc).__name__}: {exc}"
                    print(f"FAIL {name} ({time.monotonic() - started:.1f} s): {what}", flush=True)
                else:
                    print(f"PASS {name} ({time.monotonic() - started:.1f} s): {detail}", flush=True)
    except KeyboardInterrupt as exc:
        failed.append(f"interrupted ({exc})")
        print(f"FAIL interrupted ({exc})", flush=True)
    finally:
        if failed:
            print(run.failure_context(), file=sys.stderr)
        run.cleanup()
        if args.keep:
            print(f"newcomer: kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    for note in run.notes:
        print(f"note: {note}")
    took = time.monotonic() - began
    if failed:
        print(f"newcomer: FAILED {len(failed)} of {len(steps)} ({', '.join(failed)}) in {took:.0f} s")
        return 1
    print(f"newcomer: all {len(steps)} steps passed in {took:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
