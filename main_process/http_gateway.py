"""`elicitron main --mcp-http [HOST:]PORT`: MCP over streamable HTTP, served by a child process.

main does not grow an HTTP server: it runs `python -m gateway_process --listen-http HOST:PORT` (the
same gateway `elicitron serve` is, speaking HTTP), reads the `LISTENING <url>` line it prints, puts
the URL and the bearer token in the connection file, restarts it with backoff if it dies (five
failures without a stable minute end that), and stops it with main. The child attaches to main like
any other peer; each host it serves is a host peer.

The token lives in `<user config dir>/elicitron/mcp-http-token` (0600, made on first use) and is
copied into the connection file (0600) for the child and for `elicitron serve --print-config --http`:
a host's pasted entry keeps working across main restarts.
"""

import asyncio
import logging
import secrets
import sys
import time
from collections.abc import Callable
from pathlib import Path

import platformdirs

from main_process.private_files import open_private, write_private
from shared.errors import ConfigError

logger = logging.getLogger(__name__)

LISTEN_TIMEOUT_S = 60.0  # the child imports mcp and binds before it prints its URL
STOP_TIMEOUT_S = 5.0
RESTART_LIMIT = 5
STABLE_S = 60.0


def default_token_path() -> Path:
    return Path(platformdirs.user_config_dir("elicitron")) / "mcp-http-token"


def load_or_create_token(path: Path | None = None) -> str:
    path = path or default_token_path()
    try:
        token = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        token = ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the MCP HTTP token: {exc}") from None
    if len(token) < 32:
        token = secrets.token_urlsafe(32)
        write_private(path, token + "\n")
        logger.info("made the MCP HTTP bearer token in %s", path)
    return token


def check_listen(value: str) -> str:
    """`[HOST:]PORT` as given, or ConfigError saying what is wrong (checked before main starts)."""
    host, _, port = value.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) <= 65535 or (host and not host.strip("[]")):
        raise ConfigError(f"--mcp-http {value!r}: expected [HOST:]PORT, e.g. 8765 or 127.0.0.1:8765")
    return value if host else f"127.0.0.1:{port}"


class HttpGatewayChild:
    """Runs and supervises the HTTP gateway process; `on_url(url)` once it listens (again)."""

    def __init__(self, listen: str, connection: Path, log_dir: Path, on_url: Callable[[str], None]) -> None:
        self.listen = listen
        self.connection = connection
        self.log_path = log_dir / "mcp-http.stderr.log"
        self.url: str | None = None
        self._on_url = on_url
        self._stopping = asyncio.Event()
        self._process: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name="mcp-http gateway")

    async def stop(self) -> None:
        self._stopping.set()
        process = self._process
        if process is not None and process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                process.kill()
                await process.wait()
        if self._task is not None:
            await asyncio.wait([self._task], timeout=STOP_TIMEOUT_S)

    async def _supervise(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            started = time.monotonic()
            error = await self._run_once()
            if self._stopping.is_set():
                return
            failures = 1 if time.monotonic() - started > STABLE_S else failures + 1
            logger.warning("the MCP HTTP gateway stopped (%s); failure %d of %d", error, failures, RESTART_LIMIT)
            if failures >= RESTART_LIMIT:
                logger.error("not restarting the MCP HTTP gateway; see %s", self.log_path)
                return
            try:
                await asyncio.wait_for(self._stopping.wait(), min(0.5 * 2 ** (failures - 1), 8.0))
            except TimeoutError:
                pass

    async def _run_once(self) -> str:
        with open_private(self.log_path, "a") as log:  # 0600: requests may name what hosts do
            process = self._process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gateway_process", "--listen-http", self.listen,
                "--connection", str(self.connection), "--log-level", "info",
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=log)
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), LISTEN_TIMEOUT_S)
        except TimeoutError:
            process.kill()
            await process.wait()
            return f"no LISTENING line within {LISTEN_TIMEOUT_S:.0f} s"
        text = line.decode(errors="replace").strip()
        if text.startswith("LISTENING "):
            self.url = text.split(" ", 1)[1]
            self._on_url(self.url)
            logger.info("MCP hosts reach main at %s", self.url)
        code = await process.wait()
        return f"exit code {code}" + ("" if text.startswith("LISTENING ") else f", said {text[:200]!r}")
