"""Which program a configured server is: what its user rules are bound to (rules.py).

A stdio server is its command and its arguments, an HTTP server its URL, as the config writes them
(not resolved: `python` and `/usr/bin/python3` are two programs here, so a doubt means asking again).
Only a digest is kept and compared: arguments and URLs may carry secrets, which the rule store and
the windows need not see. Headers, env and cwd do not count: they configure a program, they do not
replace it.
"""

import hashlib
import json

from main_process.config import ServerConfig, StdioServerConfig


def server_identity(config: ServerConfig) -> str:
    what = ["stdio", config.command, *config.args] if isinstance(config, StdioServerConfig) else ["http", config.url]
    return hashlib.blake2b(json.dumps(what).encode(), digest_size=16).hexdigest()


def identities(servers: dict[str, ServerConfig]) -> dict[str, str]:
    return {name: server_identity(config) for name, config in servers.items()}
