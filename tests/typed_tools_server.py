"""A stdio MCP server whose tools report exactly the arguments that reached them.

It is written on the low-level `mcp` Server so nothing validates or coerces the arguments on the
way in: `plan_trip` answers with the JSON it received and each value's JSON type, which is how
the tests see that an integer stayed an integer and an omitted optional was omitted.
`show_result` returns text, an image and structured content; `search` takes an object (no form).
The schemas are the ones a Python SDK emits (`anyOf: [X, null]` for optionals, `$defs` enums).
"""

import base64
import json
import struct
import zlib
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

PLAN_TRIP: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "title": "City", "description": "Where to stay", "minLength": 1},
        "nights": {"type": "integer", "title": "Nights", "minimum": 1, "maximum": 30},
        "budget": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": None,
                   "title": "Budget per night (EUR)"},
        "pets": {"type": "boolean", "title": "Travelling with pets", "default": False},
        "room": {"$ref": "#/$defs/Room", "default": "double"},
        "extras": {"type": "array", "title": "Extras",
                   "items": {"type": "string", "enum": ["breakfast", "parking", "late checkout"]}},
        "arrival": {"type": "string", "format": "date", "title": "Arrival"},
        "contact": {"anyOf": [{"type": "string", "format": "email"}, {"type": "null"}], "default": None,
                    "title": "Contact e-mail"},
    },
    "required": ["city", "nights"],
    "$defs": {"Room": {"type": "string", "enum": ["single", "double", "suite"], "title": "Room"}},
}

TOOLS = [
    types.Tool(name="plan_trip", title="Plan a trip", input_schema=PLAN_TRIP,
               description="Plan a stay: the reply lists the arguments exactly as they arrived."),
    types.Tool(name="show_result", description="Text, an image and structured content.",
               input_schema={"type": "object", "properties": {}}),
    types.Tool(name="search", description="Takes a filter object, which no form can show.",
               input_schema={"type": "object", "properties": {
                   "filters": {"type": "object", "additionalProperties": True}}, "required": ["filters"]}),
]


def _json_type(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object", type(None): "null"}[type(value)]


def png(width: int = 48, height: int = 32) -> bytes:
    """A small gradient PNG, made here so the server needs no image library."""
    rows = b"".join(
        b"\x00" + b"".join(bytes((x * 255 // width, y * 255 // height, 200)) for x in range(width))
        for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunks = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + chunks


async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    if params.name == "show_result":
        image = base64.b64encode(png()).decode("ascii")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="Here is a picture."),
                     types.ImageContent(type="image", data=image, mime_type="image/png")],
            structured_content={"trip": {"city": "Lisbon", "nights": 3}, "ok": True},
        )
    received = {"arguments": arguments, "types": {key: _json_type(v) for key, v in arguments.items()}}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(received, sort_keys=True))],
        structured_content=received,
    )


server = Server("typed-tools", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
