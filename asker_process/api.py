"""The Python API an agent imports in one line:

    from asker_process import ask, elicitation_callback

- `await ask("Deploy 1.4 to prod?", {"type": "object", ...})` shows one question in Elicitron's
  windows and returns MCP's `ElicitResult`;
- `elicitation_callback(name="agent")` is a callable for `mcp.Client(..., elicitation_callback=…)`
  and `ClientSession(..., elicitation_callback=…)`: every elicitation the agent's own MCP servers
  send is shown in the windows, naming the server and the agent.

Both connect when a question is asked (not before), find a restarted main by themselves, and raise
`MainNotRunningError` at once when no main runs. `mcp` is imported here only when an answer is
turned into its `ElicitResult`, so the CLI, which shares the client, never loads it.
"""

from typing import TYPE_CHECKING, Any

from asker_process.client import AskerClient, Connection
from asker_process.identity import this_program
from shared.errors import QuestionRefusedError
from shared.messages import AskerInfo, QuestionAnswer
from shared.questions import question_params

if TYPE_CHECKING:
    from mcp.client.session import ClientRequestContext
    from mcp.types import ElicitRequestParams, ElicitResult, ErrorData

async def ask(message: str, schema: dict[str, Any] | None = None, *, url: str | None = None,
              timeout: float | None = None, name: str | None = None,
              connection: Connection = None) -> "ElicitResult":
    """Ask the person at Elicitron's windows; returns MCP's `ElicitResult`.

    `schema` is an MCP elicitation `requestedSchema` (flat object of string, number, integer,
    boolean, enum properties); without it the card asks to accept or decline `message`. `url` asks
    to open a link instead. `timeout` in seconds (default 600, at most 7 days): then the result is
    `cancel`. `name` is who the card says asks (default: this program's script name).

    Raises QuestionRefusedError (e.g. a schema outside MCP's subset, naming the property) and
    MainNotRunningError (no main runs). Cancelling the call withdraws the question. `connection`:
    a connection file, or a list of the files of the mains of one shared store (docs/teams.md)."""
    client = AskerClient(this_program(name), connection)
    try:
        answer = await client.ask(question_params(message, schema, url), timeout)
    finally:
        await client.aclose()
    return to_elicit_result(answer)


class ElicitationCallback:
    """An MCP client's `elicitation_callback` that asks Elicitron's windows. One connection for all
    of the agent's clients, opened while a question is open."""

    def __init__(self, name: str | None = None, connection: Connection = None,
                 timeout: float | None = None) -> None:
        self._asker = this_program(name)
        self._timeout = timeout
        self._client = AskerClient(self._asker, connection)

    async def __call__(self, context: "ClientRequestContext",
                       params: "ElicitRequestParams") -> "ElicitResult | ErrorData":
        wire = params.model_dump(mode="json", by_alias=True, exclude_none=True)
        try:
            answer = await self._client.ask(wire, self._timeout, asker=self._asker_for(context))
        except QuestionRefusedError as exc:
            from mcp.types import ErrorData

            # What main answers its own servers for a request it will not show.
            return ErrorData(code=exc.code, message=exc.message)
        return to_elicit_result(answer)

    def _asker_for(self, context: Any) -> AskerInfo:
        """"demo via agent": the server that elicits, through the agent that runs its client."""
        server_info = getattr(getattr(context, "session", None), "server_info", None)
        server = getattr(server_info, "name", None)
        if not isinstance(server, str) or not server:
            return self._asker
        name = f"{server} via {self._asker.name}"[:200]
        return AskerInfo(name=name, pid=self._asker.pid, machine=self._asker.machine)

    async def aclose(self) -> None:
        """Withdraw any open question and detach (an idle callback holds no connection anyway)."""
        await self._client.aclose()


def elicitation_callback(name: str | None = None, *, connection: Connection = None,
                         timeout: float | None = None) -> ElicitationCallback:
    """A callable for `mcp.Client(server, elicitation_callback=elicitation_callback(name="agent"))` or
    `ClientSession(..., elicitation_callback=...)`; its `(context, params)` returns `ElicitResult`,
    or `ErrorData` -32602 for a request main will not show. Raises MainNotRunningError when no
    main runs."""
    return ElicitationCallback(name, connection, timeout)


def to_elicit_result(answer: QuestionAnswer) -> "ElicitResult":
    from mcp.types import ElicitResult

    return ElicitResult(action=answer.action, content=answer.content if answer.action == "accept" else None)
