"""A private Caddy (Debian's package) for a test: a given site block behind the global options a
machine without DNS or the internet needs, its own CA, storage, ports and home; up once its
certificate for the site is issued; stopped (SIGTERM, as a person's Ctrl-C) at the end. Never the
system's caddy service: nothing here talks to an admin endpoint (it is off) or uses /var/lib/caddy."""

import json
import os
import queue
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kit.env import child_env
from kit.procs import terminate

START_TIMEOUT_S = 20.0
POLL_S = 0.05


def caddy_or_skip() -> str:
    """The caddy executable; where there is none, the test is skipped with why (failed in CI,
    which installs it)."""
    found = shutil.which("caddy")
    if found is None:
        why = "no caddy on this machine (Debian: apt-get install caddy; .ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return found


def free_port() -> int:
    with closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def offline_options(storage: Path, http_port: int, https_port: int) -> str:
    """The global options block: Caddy's own local CA instead of ACME (no internet), not installed
    into the system's trust store, no admin endpoint, its storage in `storage`, loopback only, on
    free ports."""
    return (f"{{\n\tlocal_certs\n\tskip_install_trust\n\tadmin off\n\tstorage file_system {{\n\t\troot {storage}\n\t}}"
            f"\n\tdefault_bind 127.0.0.1\n\thttp_port {http_port}\n\thttps_port {https_port}\n}}\n\n")


@dataclass
class RunningCaddy:
    proc: "subprocess.Popen[bytes]"
    storage: Path
    https_port: int
    log: list[dict[str, Any]] = field(default_factory=list)
    _lines: "queue.Queue[dict[str, Any] | None]" = field(default_factory=queue.Queue)

    @property
    def root_cert(self) -> Path:
        """Caddy's local CA root: what a device would trust to accept the site's certificate."""
        return self.storage / "pki" / "authorities" / "local" / "root.crt"

    def read_log(self) -> None:
        """Caddy's stderr (one JSON object a line) into `_lines`; None once it closes."""
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            try:
                self._lines.put(json.loads(raw))
            except ValueError:
                self._lines.put({"msg": raw.decode(errors="replace").strip()})
        self._lines.put(None)

    def wait_log(self, msg: str, timeout_s: float = START_TIMEOUT_S, **fields: str) -> dict[str, Any]:
        """The first log entry with this `msg` (and these fields); fails with the log if Caddy
        exits or does not write it in time."""
        while True:
            try:
                entry = self._lines.get(timeout=timeout_s)
            except queue.Empty:
                raise AssertionError(f"caddy did not log {msg!r} in {timeout_s}s: {self.log[-10:]}") from None
            if entry is None:
                raise AssertionError(f"caddy exited ({self.proc.wait()}) before logging {msg!r}: {self.log[-10:]}")
            self.log.append(entry)
            if entry.get("msg") == msg and all(entry.get(key) == value for key, value in fields.items()):
                return entry

    def wait_serving(self, site: str, path: str, timeout_s: float = START_TIMEOUT_S) -> str:
        """`tls_get` once Caddy serves `site`'s certificate. Caddy logs the certificate as obtained
        a moment before its handshakes can use it (until then they end in an internal-error
        alert), so each retry waits for its next log line, at most POLL_S."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return self.tls_get(site, path)
            except ssl.SSLError as refused:
                if time.monotonic() > deadline:
                    raise AssertionError(f"caddy did not serve {site} in {timeout_s}s: {refused}") from None
            try:
                entry = self._lines.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if entry is None:
                raise AssertionError(f"caddy exited ({self.proc.wait()}) before serving {site}: {self.log[-10:]}")
            self.log.append(entry)

    def tls_get(self, site: str, path: str) -> str:
        """GET https://`site``path` at Caddy's port, the certificate checked against Caddy's root
        only (not the system's store): the response's status line."""
        context = ssl.create_default_context(cafile=str(self.root_cert))
        with socket.create_connection(("127.0.0.1", self.https_port), timeout=10) as raw, \
                context.wrap_socket(raw, server_hostname=site) as tls:
            tls.sendall(f"GET {path} HTTP/1.1\r\nHost: {site}\r\nConnection: close\r\n\r\n".encode())
            return tls.makefile("rb").readline().decode().strip()


@contextmanager
def caddy(site_blocks: str, argv: list[str], workdir: Path) -> Iterator[RunningCaddy]:
    """`argv` (a `caddy run --config Caddyfile` line) run in `workdir`, where its Caddyfile is
    `site_blocks` after `offline_options`; HOME and XDG dirs under `workdir` too. Up once it
    served its configuration; always stopped."""
    executable = caddy_or_skip()
    storage, https_port = workdir / "storage", free_port()
    (workdir / "Caddyfile").write_text(offline_options(storage, free_port(), https_port) + site_blocks + "\n")
    proc = subprocess.Popen([executable, *argv[1:]], cwd=workdir, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=child_env(workdir / "home"))
    running = RunningCaddy(proc, storage, https_port)
    reader = threading.Thread(target=running.read_log, daemon=True)
    reader.start()
    try:
        running.wait_log("serving initial configuration")
        yield running
    finally:
        terminate(proc)
        reader.join(timeout=10)
        assert proc.stderr is not None
        proc.stderr.close()
