"""The connection file this main publishes (shared/connection_file.py): written once everything
listens, rewritten when the MCP HTTP gateway has its URL or its token is rotated, removed (if it is
still this main's) when main stops."""

from pathlib import Path

import msgspec

from main_process.http_gateway import new_token
from shared.connection_file import ConnectionInfo, remove_connection_file, write_connection_file


class PublishedConnection:
    def __init__(self, path: Path, info: ConnectionInfo) -> None:
        self.path = path
        self.info = info

    def write(self) -> None:
        write_connection_file(self.path, self.info)

    def remove(self) -> None:
        remove_connection_file(self.path, self.info.token)

    def mcp_http_url(self, url: str) -> None:
        """The gateway child serves MCP hosts there."""
        self.info = msgspec.structs.replace(self.info, mcp_http_url=url)
        self.write()

    def new_mcp_http_token(self) -> None:
        """A new bearer token for the gateway (restarted on it after: the old one is refused)."""
        self.info = msgspec.structs.replace(self.info, mcp_http_token=new_token())
        self.write()
