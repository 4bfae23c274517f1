"""Whether a host name or address stays on this machine: main checks `--mcp-http` with it before it
starts, and the HTTP gateway child again where it serves."""

import ipaddress


def is_loopback(host: str) -> bool:
    """`localhost`, or a loopback address (IPv4 or IPv6, bracketed or not)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
