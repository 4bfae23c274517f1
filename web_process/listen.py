"""Where the web window listens and which origins it serves: loopback unless told otherwise, and a
non-loopback address only with TLS (`--tls-cert/--tls-key`) or an explicit `--insecure-http` (the
device cookie would cross the network in clear text), as main's `--mcp-http` does."""

from dataclasses import dataclass
from pathlib import Path

from shared.addresses import is_loopback, split_listen, tls_files
from shared.errors import ConfigError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8766  # beside --mcp-http's usual 8765; 0 picks any free port


@dataclass(frozen=True)
class Listen:
    host: str  # without brackets
    port: int  # 0 until bound: `with_port` gives the real one
    tls: tuple[Path, Path] | None  # (certificate, key)
    extra_origins: tuple[str, ...] = ()  # --origin: what a reverse proxy in front serves us as

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    def with_port(self, port: int) -> "Listen":
        return Listen(self.host, port, self.tls, self.extra_origins)

    def address(self) -> str:
        """`HOST:PORT` as `--listen` takes it (IPv6 in brackets)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def origins(self) -> frozenset[str]:
        """Every Origin a page of ours sends (the address we listen on; localhost with 127.0.0.1)."""
        names = {f"[{self.host}]" if ":" in self.host else self.host}
        if is_loopback(self.host):
            names |= {"localhost", "127.0.0.1", "[::1]"}
        default_port = self.port == (443 if self.tls else 80)  # a browser leaves the default port out
        found = {f"{self.scheme}://{name}" + ("" if default_port else f":{self.port}") for name in names}
        return frozenset(origin.lower() for origin in found | set(self.extra_origins))

    def hosts(self) -> frozenset[str]:
        """Every Host header we answer: the origins' host:port. Anything else is a rebinding attempt
        (a foreign name resolved to our address), refused before the cookie is even looked at."""
        return frozenset(origin.split("://", 1)[1] for origin in self.origins())


def check_listen(value: str, cert: Path | None, key: Path | None, insecure: bool,
                 origins: tuple[str, ...] = ()) -> Listen:
    """The checked address to serve; ConfigError (one line) for a non-loopback host with neither TLS
    nor --insecure-http, a certificate without its key, or a pair that does not load."""
    host, port = split_listen(value, "--listen", DEFAULT_PORT)
    for origin in origins:
        if "://" not in origin or origin.rstrip("/") != origin or origin.count("/") != 2:
            raise ConfigError(f"--origin {origin!r}: expected scheme://host[:port], e.g. https://phone.example.net")
    tls = tls_files(host, cert, key, insecure,
                    f"--listen {value} is reachable from other machines and would send the device "
                    "cookie in clear text: give --tls-cert FILE --tls-key FILE, or --insecure-http "
                    "if this network is yours alone (or put a TLS reverse proxy in front, see --origin)")
    return Listen(host, port, tls, origins)
