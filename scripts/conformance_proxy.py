"""The forwarding proxies scripts/conformance.py puts between the suite and main's HTTP endpoint.

`BearerProxy` adds main's bearer token (the suite has no header option). `NamesProxy` also maps
`<server>__<name>` back to the server's own names, for the suite against every server at once: the
suite calls the conformance server's tools and prompts by their own names (`test_simple_text`); a
host of every server at once (`elicitron serve` without --server, `/mcp`) sees them as
`conformance__test_simple_text`. It stands where the suite's host would know the prefix: it adds it
to what the suite names (a call's or a prompt's `name`, a prompt completion's `ref.name`, the
`Mcp-Name` header) and takes it off what the merged session lists, in JSON bodies and SSE events as
they stream; every other byte passes unchanged, both ways. So what the suite checks is the merged
session itself (handshake, capabilities, routing, server requests, notifications, both eras), not
the spelling of a name.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any, Self


class BearerProxy:
    """127.0.0.1:<port> -> `upstream`: adds `Authorization: Bearer <token>` to every HTTP request and
    copies everything else unchanged, in both directions (responses stream through as they come)."""

    def __init__(self, upstream_port: int, token: str) -> None:
        self.upstream_port = upstream_port
        self.header = f"Authorization: Bearer {token}\r\n".encode()
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.port = 0
        self.server: asyncio.Server  # set by _run, in the proxy's thread
        self.writers: set[asyncio.StreamWriter] = set()  # both ends of every open connection
        self.thread = threading.Thread(target=self._run, name="bearer-proxy", daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        if not self.ready.wait(10):
            raise RuntimeError("the forwarding proxy did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(10)
        self.thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]
        self.ready.set()
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    async def _shutdown(self) -> None:
        """Stop listening, end the connections still open (each closes its sockets), stop the loop."""
        self.server.close()
        for writer in self.writers:
            writer.transport.abort()  # each connection's reads then end, and its task with them
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        if tasks:
            _, left = await asyncio.wait(tasks, timeout=5)
            for task in left:  # a connection accepted as the others were aborted: nobody ends it
                task.cancel()
            if left:
                await asyncio.wait(left, timeout=5)
        self.loop.call_soon(self.loop.stop)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        self.writers |= {writer, up_writer}
        back = asyncio.ensure_future(self._copy(up_reader, writer))
        try:
            await self._requests(reader, up_writer)
            await back  # the client finished sending: let the last response finish
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            for w in (writer, up_writer):
                w.close()
                self.writers.discard(w)
            await asyncio.wait([back])

    async def _requests(self, reader: asyncio.StreamReader, up: asyncio.StreamWriter) -> None:
        """Each request: its head with our header added (any Authorization of the client's dropped),
        then its body as framed by Content-Length or chunked encoding."""
        while (request := await _request_head(reader)) is not None:
            lines, kept, fields = request
            up.write(b"\r\n".join([lines[0], *kept]) + b"\r\n" + self.header + b"\r\n")
            if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
                while True:
                    size_line = await reader.readuntil(b"\r\n")
                    up.write(size_line)
                    size = int(size_line.split(b";")[0], 16)
                    if size == 0:
                        while (trailer := await reader.readuntil(b"\r\n")) != b"\r\n":
                            up.write(trailer)
                        up.write(b"\r\n")
                        break
                    up.write(await reader.readexactly(size + 2))
            elif (length := int(fields.get(b"content-length", b"0"))) > 0:
                up.write(await reader.readexactly(length))
            await up.drain()
        up.write_eof()

    async def _copy(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
            writer.write_eof()
        except OSError:
            pass



async def _request_head(reader: asyncio.StreamReader) -> tuple[list[bytes], list[bytes], dict[bytes, bytes]] | None:
    """The next request's head: its lines, the header lines kept (any Authorization of the
    client's dropped) and those headers by lower-cased name; None once the client is done."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head[:-2].split(b"\r\n")
    kept = [line for line in lines[1:] if line and not line.lower().startswith(b"authorization:")]
    return lines, kept, {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in kept)}


_NAMED = ("tools/call", "prompts/get")
_LISTS = ("tools", "prompts", "resources", "resourceTemplates")
_NO_BODY = (b"204", b"304")


class NamesProxy(BearerProxy):
    """BearerProxy that maps `prefix` + name <-> name in MCP messages."""

    def __init__(self, upstream_port: int, token: str, prefix: str) -> None:
        super().__init__(upstream_port, token)
        self.prefix = prefix

    # ---- the suite's requests ------------------------------------------------------------------

    async def _requests(self, reader: asyncio.StreamReader, up: asyncio.StreamWriter) -> None:
        while (request := await _request_head(reader)) is not None:
            lines, kept, fields = request
            body = await _read_body(reader, fields)
            body = self._outgoing(body) if body else body
            kept = [self._header(line) for line in kept
                    if not line.lower().startswith((b"content-length:", b"transfer-encoding:"))]
            if body or fields.get(b"content-length") is not None or b"transfer-encoding" in fields:
                kept.append(b"Content-Length: %d" % len(body))
            up.write(b"\r\n".join([lines[0], *kept]) + b"\r\n" + self.header + b"\r\n" + body)
            await up.drain()
        up.write_eof()

    def _header(self, line: bytes) -> bytes:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"mcp-name" and value.strip():
            return name + b": " + self.prefix.encode() + value.strip()
        return line

    def _outgoing(self, body: bytes) -> bytes:
        try:
            message = json.loads(body)
        except ValueError:
            return body
        for item in message if isinstance(message, list) else [message]:
            params = item.get("params") if isinstance(item, dict) else None
            if not isinstance(params, dict):
                continue
            if item.get("method") in _NAMED and isinstance(params.get("name"), str):
                params["name"] = self.prefix + params["name"]
            ref = params.get("ref")
            if item.get("method") == "completion/complete" and isinstance(ref, dict) \
                    and ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
                ref["name"] = self.prefix + ref["name"]
        return json.dumps(message).encode()

    # ---- the merged session's answers ----------------------------------------------------------

    async def _copy(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError as ended:
                    writer.write(ended.partial)
                    break
                lines = head[:-2].split(b"\r\n")
                fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:] if line)}
                status = lines[0].split(b" ")[1] if len(lines[0].split(b" ")) > 1 else b""
                if status in _NO_BODY or status.startswith(b"1"):
                    writer.write(head)
                elif b"text/event-stream" in fields.get(b"content-type", b""):
                    await self._stream(reader, writer, lines, fields)
                else:
                    body = await _read_body(reader, fields, until_eof=True)
                    body = self._incoming(body) if body else body
                    kept = [line for line in lines[1:] if line and not line.lower().startswith(
                        (b"content-length:", b"transfer-encoding:"))]
                    writer.write(b"\r\n".join([lines[0], *kept, b"Content-Length: %d" % len(body)])
                                 + b"\r\n\r\n" + body)
                await writer.drain()
            writer.write_eof()
        except (OSError, asyncio.IncompleteReadError, ValueError):
            pass

    async def _stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, lines: list[bytes],
                      fields: dict[bytes, bytes]) -> None:
        """An SSE response: each event rewritten as it comes, sent on as one chunk."""
        kept = [line for line in lines[1:] if line and not line.lower().startswith(
            (b"content-length:", b"transfer-encoding:"))]
        writer.write(b"\r\n".join([lines[0], *kept, b"Transfer-Encoding: chunked"]) + b"\r\n\r\n")
        await writer.drain()
        pending = b""
        async for data in _body_chunks(reader, fields):
            pending += data.replace(b"\r\n", b"\n")
            while b"\n\n" in pending:
                event, pending = pending.split(b"\n\n", 1)
                out = b"\n".join(self._event_line(line) for line in event.split(b"\n")) + b"\n\n"
                writer.write(b"%x\r\n" % len(out) + out + b"\r\n")
                await writer.drain()
        if pending:
            writer.write(b"%x\r\n" % len(pending) + pending + b"\r\n")
        writer.write(b"0\r\n\r\n")

    def _event_line(self, line: bytes) -> bytes:
        if line.startswith(b"data:"):
            return b"data: " + self._incoming(line[5:].strip())
        return line

    def _incoming(self, body: bytes) -> bytes:
        try:
            message = json.loads(body)
        except ValueError:
            return body
        changed = False
        for item in message if isinstance(message, list) else [message]:
            result = item.get("result") if isinstance(item, dict) else None
            if isinstance(result, dict):
                changed = self._unprefix(result) or changed
        return json.dumps(message).encode() if changed else body

    def _unprefix(self, result: dict[str, Any]) -> bool:
        changed = False
        for key in _LISTS:
            for entry in result.get(key) or []:
                name = entry.get("name") if isinstance(entry, dict) else None
                if isinstance(name, str) and name.startswith(self.prefix):
                    entry["name"] = name[len(self.prefix):]
                    changed = True
        return changed


async def _read_body(reader: asyncio.StreamReader, fields: dict[bytes, bytes], *, until_eof: bool = False) -> bytes:
    parts = [data async for data in _body_chunks(reader, fields, until_eof=until_eof)]
    return b"".join(parts)


async def _body_chunks(reader: asyncio.StreamReader, fields: dict[bytes, bytes], *, until_eof: bool = True) -> Any:
    """A message body as its pieces arrive: chunked, Content-Length, or (a response) until the end."""
    if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":
                    pass
                return
            yield (await reader.readexactly(size + 2))[:-2]
    elif (length := fields.get(b"content-length")) is not None:
        if int(length):
            yield await reader.readexactly(int(length))
    elif until_eof:
        while data := await reader.read(65536):
            yield data
