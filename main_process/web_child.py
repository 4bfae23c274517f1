"""`elicitron main --web [HOST:]PORT`: the web window as a child main supervises (child.py), as it
runs `--mcp-http`'s gateway: `python -m web_process --listen HOST:PORT`, the same program `elicitron
web` is. It attaches to main like any window (each open page is one), finds paired devices in the
default web dir (`$ELICITRON_WEB_DIR`, which the child inherits), and prints `elicitron web: <url>`
once it listens; `elicitron pair --web` finds it from its web.json as it finds `elicitron web`.
The listen rules are the web window's own (loopback unless TLS or --insecure-http), checked by the
CLI before main starts.
"""

from collections.abc import Callable
from pathlib import Path

from main_process.child import SupervisedChild
from shared.messages import WebWindowStatus

READY_PREFIX = "elicitron web: "


class WebWindowChild(SupervisedChild):
    what = "web window"

    def __init__(self, listen: str, connection: Path, log_dir: Path, *, tls: tuple[Path, Path] | None = None,
                 insecure: bool = False, on_url: Callable[[str], None] = lambda _url: None) -> None:
        super().__init__(listen, log_dir / "web.stderr.log", on_url, error_prefix=READY_PREFIX)
        self.connection = connection
        self._exposure_args = ([] if tls is None else ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])]) + (
            ["--insecure-http"] if insecure else [])

    def argv(self) -> list[str]:
        return ["-m", "web_process", "--listen", self.listen, "--connection", str(self.connection),
                *self._exposure_args]

    def ready_url(self, line: str) -> str | None:
        rest = line.removeprefix(READY_PREFIX)
        return rest.split()[0] if rest != line and rest.startswith(("http://", "https://")) else None

    def status(self) -> WebWindowStatus:
        """For `elicitron status`: state, the address asked for, where browsers reach it, the last error."""
        return WebWindowStatus(state=self.state, address=self.listen, url=self.url, error=self.error)
