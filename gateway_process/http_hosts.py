"""Which names the `--mcp-http` child answers to, and whether its address leaves this machine.

DNS-rebinding protection lets through only a `Host` (and `Origin`) naming what the gateway serves:
loopback names always; the address it was told to bind, when that is one address or name; for a
wildcard bind (`0.0.0.0`, `::`) this machine's own names and addresses (its host name, and the
address of each default route), since a LAN host names one of those. Whether an address is loopback
is shared/addresses.py's (main checks `--mcp-http` with it before it starts).
"""

import socket

from shared.addresses import is_loopback

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
_WILDCARDS = ("0.0.0.0", "::", "")
_ROUTE_PROBES = ((socket.AF_INET, "10.255.255.255"), (socket.AF_INET6, "fd00::1"))  # no packet is sent


def is_wildcard(host: str) -> bool:
    return host.strip("[]") in _WILDCARDS


def route_addresses() -> list[str]:
    """This machine's address on each default route (IPv4, IPv6), where there is one."""
    found = []
    for family, probe in _ROUTE_PROBES:
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as sock:
                sock.connect((probe, 9))
                address = str(sock.getsockname()[0])
        except OSError:
            continue
        if not is_loopback(address):
            found.append(address)
    return found


def machine_names() -> list[str]:
    names = [*route_addresses(), socket.gethostname(), socket.getfqdn()]
    try:
        names += [str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)]
    except OSError:
        pass
    return list(dict.fromkeys(name for name in names if name and not is_loopback(name)))


def served_names(bind_host: str) -> list[str]:
    """Every name a `Host` header may carry for this gateway (IPv6 addresses bare)."""
    names = list(LOOPBACK_NAMES)
    if is_wildcard(bind_host):
        names += machine_names()
    elif not is_loopback(bind_host):
        names.append(bind_host.strip("[]"))
    return list(dict.fromkeys(names))


def public_host(bind_host: str) -> str:
    """The host part of the URL hosts are given: the bound name, or for a wildcard the address
    of this machine's default route (loopback if it has none)."""
    if is_wildcard(bind_host):
        routes = [address for address in route_addresses() if ":" not in address or bind_host.strip("[]") == "::"]
        return routes[0] if routes else "127.0.0.1"
    return bind_host.strip("[]")


def in_url(host: str) -> str:
    return f"[{host}]" if ":" in host else host
