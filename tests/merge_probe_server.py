"""Small MCP servers for what the merged gateway routes (`elicitron serve`, `/mcp`), one per role:

    catchall  a resource template that matches every URI (`{+uri}`)
    files     a listed resource (note://files/readme), no template
    notes     a template for its notes (note://notes/{name})
    a         a tool named `b__c` (merged: `a__b__c`) and a tool `d`
    a__b      a tool `c` (merged: `a__b__c` too)

Each answer names the role that gave it. Stdio; run as a script with the role."""

import sys

from mcp.server.mcpserver import MCPServer

ROLE = sys.argv[1] if len(sys.argv) > 1 else "files"
app = MCPServer(f"merge-probe-{ROLE}")

if ROLE == "catchall":
    @app.resource("{+uri}")
    def anything(uri: str) -> str:
        return f"catchall read {uri}"

elif ROLE == "files":
    @app.resource("note://files/readme")
    def readme() -> str:
        return "files read note://files/readme"

elif ROLE == "notes":
    @app.resource("note://notes/{name}")
    def note(name: str) -> str:
        return f"notes read note://notes/{name}"

elif ROLE == "a":
    @app.tool(name="b__c")
    def b_c() -> str:
        return "a's b__c"

    @app.tool()
    def d() -> str:
        return "a's d"

elif ROLE == "a__b":
    @app.tool()
    def c() -> str:
        return "a__b's c"


if __name__ == "__main__":
    app.run()
