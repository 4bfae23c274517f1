"""Where a listener of ours may listen: `[HOST:]PORT` read one way for `--mcp-http`, the HTTP
gateway child and the web window; whether a host stays on this machine; and the TLS rule every
listener that serves a secret keeps (a non-loopback address needs a certificate, or the user's
explicit `--insecure-http`)."""

import ipaddress
from pathlib import Path

from shared.errors import ConfigError

LOOPBACK = "127.0.0.1"


def is_loopback(host: str) -> bool:
    """`localhost`, or a loopback address (IPv4 or IPv6, bracketed or not)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def split_listen(value: str, option: str, example_port: int) -> tuple[str, int]:
    """`[HOST:]PORT` or `[IPv6]:PORT` -> (host without brackets, 127.0.0.1 unless named; port);
    ConfigError naming `option` and an example when it is neither."""
    host, _, port = value.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) <= 65535 or (host and not host.strip("[]")):
        raise ConfigError(f"{option} {value!r}: expected [HOST:]PORT, e.g. {example_port} or "
                          f"{LOOPBACK}:{example_port}")
    return host.strip("[]") or LOOPBACK, int(port)


def tls_files(host: str, cert: Path | None, key: Path | None, insecure: bool,
              clear_text_refusal: str) -> tuple[Path, Path] | None:
    """The (certificate, key) to serve https with, or None for plain http; ConfigError (one line):
    `clear_text_refusal` for a host other machines reach with neither TLS nor `insecure`, or a
    certificate without its key, or a pair that does not load."""
    if (cert is None) != (key is None):
        raise ConfigError("--tls-cert and --tls-key go together: give both (PEM files)")
    if cert is None or key is None:
        if not insecure and not is_loopback(host):
            raise ConfigError(clear_text_refusal)
        return None
    import ssl  # only with TLS: the CLI's parsers import this module

    cert, key = cert.expanduser().absolute(), key.expanduser().absolute()
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"--tls-cert {cert} / --tls-key {key}: cannot load them ({exc})") from None
    return cert, key
