"""Elicitron's protocol package: wire types, codec, channel names, connection file, schema checks.

Depends only on msgspec, uuid6 and platformdirs so that main, renderer and third-party peers
can share it without pulling in Qt or mcp.
"""

PROTOCOL_VERSION = 1
