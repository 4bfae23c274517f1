"""Where the web window listens and which origins it serves: loopback unless told otherwise, and a
non-loopback address only with TLS (`--tls-cert/--tls-key`) or an explicit `--insecure-http` (the
device cookie would cross the network in clear text), as main's `--mcp-http` does."""

from dataclasses import dataclass
from pathlib import Path

from shared.addresses import is_loopback
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


def parse_listen(value: str) -> tuple[str, int]:
    """`[HOST:]PORT` or `HOST:PORT` (IPv6 in brackets) -> (host, port); ConfigError saying what is wrong."""
    host, _, port = value.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) <= 65535 or (host and not host.strip("[]")):
        raise ConfigError(f"--listen {value!r}: expected [HOST:]PORT, e.g. 8766 or 127.0.0.1:8766")
    return (host.strip("[]") or DEFAULT_HOST), int(port)


def check_listen(value: str, cert: Path | None, key: Path | None, insecure: bool,
                 origins: tuple[str, ...] = ()) -> Listen:
    """The checked address to serve; ConfigError (one line) for a non-loopback host with neither TLS
    nor --insecure-http, a certificate without its key, or a pair that does not load."""
    host, port = parse_listen(value)
    if (cert is None) != (key is None):
        raise ConfigError("--tls-cert and --tls-key go together: give both (PEM files)")
    for origin in origins:
        if "://" not in origin or origin.rstrip("/") != origin or origin.count("/") != 2:
            raise ConfigError(f"--origin {origin!r}: expected scheme://host[:port], e.g. https://phone.example.net")
    if cert is None or key is None:
        if not insecure and not is_loopback(host):
            raise ConfigError(f"--listen {value} is reachable from other machines and would send the device "
                              "cookie in clear text: give --tls-cert FILE --tls-key FILE, or --insecure-http "
                              "if this network is yours alone (or put a TLS reverse proxy in front, see --origin)")
        return Listen(host, port, None, origins)
    import ssl  # only with TLS: the CLI's parser imports this module

    cert, key = cert.expanduser().absolute(), key.expanduser().absolute()
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"--tls-cert {cert} / --tls-key {key}: cannot load them ({exc})") from None
    return Listen(host, port, (cert, key), origins)
