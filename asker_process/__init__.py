"""Elicitron's asking side: any program asks the person at Elicitron's windows. A peer of main
(role "asker") built on `shared/` and shared/PROTOCOL.md alone: never main's internals, never Qt;
`mcp` only where an answer becomes MCP's `ElicitResult`.

    from asker_process import ask, elicitation_callback

api.py       ask(message, schema, url=, timeout=) -> ElicitResult; elicitation_callback(name=) for
             mcp.Client / ClientSession (imports mcp lazily)
client.py    AskerClient: the peer of main (asyncio): attach per question, heartbeats, msgAsk,
             msgWithdraw on cancel, re-attach and ask again when main restarts
open_questions.py  the open questions: deadline, current channel, the msgAsk frames, the answer,
             asked again after a loss with the time left (no socket)
identity.py  who asks, as the card shows it: "deploy.sh (pid 4242 on build-7)"
cli.py       `elicitron ask` (cli_process dispatches here): flags, exit codes, signals withdraw
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from asker_process.api import ask, elicitation_callback

__all__ = ["ask", "elicitation_callback"]


def __getattr__(name: str) -> Any:
    # Lazy, so `elicitron ask` (which imports this package) loads the API's modules only when used.
    if name in __all__:
        from asker_process import api

        return getattr(api, name)
    raise AttributeError(f"module 'asker_process' has no attribute {name!r}")
