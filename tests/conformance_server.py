"""A conformance-complete MCP server: everything the official conformance suite's server scenarios
call and check (`@modelcontextprotocol/conformance server`, default suite and `--suite all`).

    python tests/conformance_server.py               # stdio (how Elicitron's main starts it)
    python tests/conformance_server.py --http PORT   # streamable HTTP on http://127.0.0.1:PORT/mcp
                                                     # (PORT 0: any free one; prints `LISTENING <url>`)

Both eras are served, as the SDK's runner does: the handshake era (2025-11-25 and earlier:
initialize, sessions, server-to-client requests on the call's stream) and the 2026-07-28
stateless era (per-request `_meta`, `server/discover`, multi-round-trip `InputRequiredResult`,
`subscriptions/listen`, caching hints). The tasks extension (SEP-2663) is served on the 2026 wire.
The sampling and elicitation tools work on both: on the call's stream in the handshake era, as an
InputRequiredResult answered by the retry on 2026-07-28 (where a server cannot send requests), so a
gateway that speaks 2026 to this server and 2025 to its host can still pass those scenarios.

Fixtures (names, texts, schemas) follow what the suite's scenarios call and assert on, and the
suite's reference TypeScript server where a scenario only needs "some" answer, so a run against
this server is comparable check for check with a run against the reference. Written on mcp's
lowlevel `Server`: handlers return wire dicts, so what the suite sees is exactly what is below.
`scripts/conformance` runs the suite against this server directly and through Elicitron.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import socket
import sys
import uuid
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import mcp_types as types
from mcp.server.caching import CacheHint
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.inbound import decode_header_value
from mcp.shared.message import ServerMessageMetadata
from pydantic import BaseModel, ValidationError

NAME = "elicitron-conformance-server"
# logging/setLevel, roots and sampling are deprecated at 2026-07-28 but still part of what the
# handshake-era scenarios exercise: serving them is the point here.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

# ---- fixture data ----------------------------------------------------------------------------

# 1x1 red PNG and a minimal WAV: the content scenarios check type, data and mimeType only.
IMAGE_PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5E"
             "rkJggg==")
AUDIO_WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

EMPTY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def result_text(value: str, **extra: Any) -> dict[str, Any]:
    return {"content": [text(value)], **extra}


def elicit_form(message: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """An `elicitation/create` request body (an MRTR input request, or sent on the call's stream)."""
    return {"method": "elicitation/create",
            "params": {"message": message,
                       "requestedSchema": {"type": "object", "properties": properties, "required": required}}}


def sampling(prompt: str, max_tokens: int) -> dict[str, Any]:
    return {"method": "sampling/createMessage",
            "params": {"messages": [{"role": "user", "content": text(prompt)}], "maxTokens": max_tokens}}


# SEP-1613 / SEP-2106: tools/list must carry a JSON Schema 2020-12 inputSchema unchanged.
JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                          "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"},
                   "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                   "phone": {"type": "string"}, "email": {"type": "string"}},
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

# SEP-1034: every primitive type with a default.
SEP1034_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"],
                   "default": "active"},
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
    "required": [],
}

# SEP-1330: the five enum shapes (untitled/titled single, legacy enumNames, untitled/titled multi).
SEP1330_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "description": "Select one option",
                           "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "description": "Select one option with titles",
                         "oneOf": [{"const": "value1", "title": "First Option"},
                                   {"const": "value2", "title": "Second Option"},
                                   {"const": "value3", "title": "Third Option"}]},
        "legacyEnum": {"type": "string", "description": "Select one option (legacy)",
                       "enum": ["opt1", "opt2", "opt3"],
                       "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "description": "Select multiple options", "minItems": 1,
                          "maxItems": 3,
                          "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {"type": "array", "description": "Select multiple options with titles", "minItems": 1,
                        "maxItems": 3,
                        "items": {"anyOf": [{"const": "value1", "title": "First Choice"},
                                            {"const": "value2", "title": "Second Choice"},
                                            {"const": "value3", "title": "Third Choice"}]}},
    },
    "required": [],
}


def tool(name: str, description: str, schema: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": schema or EMPTY_OBJECT, **extra}


def string_args(**descriptions: str) -> dict[str, Any]:
    properties = {k: {"type": "string", "description": v} for k, v in descriptions.items()}
    return {"type": "object", "properties": properties, "required": list(descriptions)}


TOOLS: list[dict[str, Any]] = [
    tool("test_simple_text", "Tests simple text content response"),
    tool("test_image_content", "Tests image content response"),
    tool("test_audio_content", "Tests audio content response"),
    tool("test_embedded_resource", "Tests embedded resource content response"),
    tool("test_multiple_content_types", "Tests response with multiple content types (text, image, resource)"),
    tool("test_tool_with_logging", "Tests tool that emits log messages during execution"),
    tool("test_tool_with_progress", "Tests tool that reports progress notifications"),
    tool("test_error_handling", "Tests error response handling"),
    tool("test_reconnection", "Closes the call's SSE stream mid-call; the result comes after the client "
         "reconnects (SEP-1699)"),
    tool("test_sampling", "Tests server-initiated sampling (LLM completion request)",
         string_args(prompt="The prompt to send to the LLM")),
    tool("test_elicitation", "Tests server-initiated elicitation (user input request)",
         string_args(message="The message to show the user")),
    tool("test_elicitation_sep1034_defaults", "Tests elicitation with default values per SEP-1034"),
    tool("test_elicitation_sep1330_enums", "Tests elicitation with enum schema improvements per SEP-1330"),
    tool("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features (SEP-1613)",
         JSON_SCHEMA_2020_12),
    # 2026-07-28 fixtures (SEP-2575 stateless, SEP-2322 multi-round trips)
    tool("test_missing_capability", "Requires the client's sampling capability (-32021 without it)"),
    tool("test_input_required_result_elicitation", "MRTR: InputRequiredResult asking an elicitation"),
    tool("test_input_required_result_sampling", "MRTR: InputRequiredResult asking for sampling"),
    tool("test_input_required_result_list_roots", "MRTR: InputRequiredResult asking roots/list"),
    tool("test_input_required_result_request_state", "MRTR: returns InputRequiredResult with requestState"),
    tool("test_input_required_result_multiple_inputs", "MRTR: InputRequiredResult with three requests"),
    tool("test_input_required_result_multi_round", "MRTR: multi-round InputRequiredResult workflow"),
    tool("test_input_required_result_tampered_state", "MRTR: integrity-protected requestState"),
    tool("test_input_required_result_capabilities", "MRTR: respects client capabilities in inputRequests"),
    # SEP-2243: a parameter mirrored into an Mcp-Param-Region header, which the SDK validates.
    tool("test_x_mcp_header", "Echoes region, which the client also sends as the Mcp-Param-Region header",
         {"type": "object", "properties": {"region": {
             "type": "string", "x-mcp-header": "Region", "description": "Mirrored into Mcp-Param-Region"}}}),
    tool("test_streaming_elicitation", "Streams a progress notification, then the result (never a request)"),
    tool("test_logging_tool", "Logs at info: delivered only when the request opted in with _meta logLevel"),
    # SEP-2663 tasks extension fixtures: task-supporting tools answer a client that negotiated
    # io.modelcontextprotocol/tasks with a CreateTaskResult and run on; the others stay synchronous.
    tool("greet", "Sync only: Hello, {name}!", string_args(name="Who to greet")),
    tool("slow_compute", "Task-supporting: sleeps `seconds`, then answers",
         {"type": "object", "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}}}),
    tool("failing_job", "Task required: reports a tool execution error"),
    tool("protocol_error_job", "Task-supporting: fails with a protocol-level error"),
    tool("confirm_delete", "Task-supporting: asks for confirmation (input_required), then answers",
         {"type": "object", "properties": {"filename": {"type": "string"}}}),
    tool("multi_input", "Task-supporting: asks two questions at once; completes once both are answered"),
    tool("test_tool_with_task", "Task required: asks for a name by a multi-round trip, then runs as a task"),
    tool("test_trigger_tool_change", "Announces a tools list change to subscriptions/listen streams"),
    tool("test_trigger_prompt_change", "Announces a prompts list change to subscriptions/listen streams"),
]

RESOURCES: list[dict[str, Any]] = [
    {"uri": "test://static-text", "name": "static-text", "title": "Static Text Resource",
     "description": "A static text resource for testing", "mimeType": "text/plain"},
    {"uri": "test://static-binary", "name": "static-binary", "title": "Static Binary Resource",
     "description": "A static binary resource (image) for testing", "mimeType": "image/png"},
    {"uri": "test://watched-resource", "name": "watched-resource", "title": "Watched Resource",
     "description": "A resource that can be subscribed to", "mimeType": "text/plain"},
]
TEMPLATES: list[dict[str, Any]] = [
    {"uriTemplate": "test://template/{id}/data", "name": "template", "title": "Resource Template",
     "description": "A resource template with parameter substitution", "mimeType": "application/json"},
]
STATIC_CONTENTS: dict[str, dict[str, Any]] = {
    "test://static-text": {"mimeType": "text/plain",
                           "text": "This is the content of the static text resource."},
    "test://static-binary": {"mimeType": "image/png", "blob": IMAGE_PNG},
    "test://watched-resource": {"mimeType": "text/plain", "text": "Watched resource content"},
}

PROMPTS: list[dict[str, Any]] = [
    {"name": "test_simple_prompt", "title": "Simple Test Prompt",
     "description": "A simple prompt without arguments"},
    {"name": "test_prompt_with_arguments", "title": "Prompt With Arguments",
     "description": "A prompt with required arguments",
     "arguments": [{"name": "arg1", "description": "First test argument", "required": True},
                   {"name": "arg2", "description": "Second test argument", "required": True}]},
    {"name": "test_prompt_with_embedded_resource", "title": "Prompt With Embedded Resource",
     "description": "A prompt that includes an embedded resource",
     "arguments": [{"name": "resourceUri", "description": "URI of the resource to embed", "required": True}]},
    {"name": "test_prompt_with_image", "title": "Prompt With Image",
     "description": "A prompt that includes image content"},
    {"name": "test_input_required_result_prompt",
     "description": "MRTR: prompt that requires elicitation input"},
]

# ---- state -----------------------------------------------------------------------------------

subscriptions: set[str] = set()  # resources/subscribe: accepted and remembered, nothing changes
bus = InMemorySubscriptionBus()  # subscriptions/listen streams (2026-07-28)


def is_modern(ctx: Any) -> bool:
    return ctx.protocol_version not in ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


def input_responses(params: Any) -> dict[str, Any]:
    """The client's MRTR answers as plain dicts, keyed like the inputRequests that asked."""
    responses = getattr(params, "input_responses", None) or {}
    return {key: (value.model_dump(by_alias=True, mode="json", exclude_none=True)
                  if hasattr(value, "model_dump") else value) for key, value in responses.items()}


def answer_field(response: Any, field: str, default: str = "unknown") -> str:
    content = response.get("content") if isinstance(response, dict) else None
    value = content.get(field) if isinstance(content, dict) else None
    return value if isinstance(value, str) else default


# ---- tools -----------------------------------------------------------------------------------

async def list_tools(ctx: Any, params: Any) -> dict[str, Any]:
    return {"tools": TOOLS}


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> dict[str, Any]:
    name, args = params.name, params.arguments or {}
    handler = TOOL_HANDLERS.get(name)
    if handler is None:
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}")
    try:
        return await handler(ctx, params, args)
    except NeedsInput as needs:
        return input_required(needs.requests, needs.state)


async def simple_text(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    return result_text("This is a simple text response for testing.")


async def image_content(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "image", "data": IMAGE_PNG, "mimeType": "image/png"}]}


async def audio_content(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "audio", "data": AUDIO_WAV, "mimeType": "audio/wav"}]}


async def embedded_resource(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "resource", "resource": {
        "uri": "test://embedded-resource", "mimeType": "text/plain",
        "text": "This is an embedded resource content."}}]}


async def multiple_content_types(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    return {"content": [
        text("Multiple content types test:"),
        {"type": "image", "data": IMAGE_PNG, "mimeType": "image/png"},
        {"type": "resource", "resource": {"uri": "test://mixed-content-resource",
                                          "mimeType": "application/json",
                                          "text": json.dumps({"test": "data", "value": 123})}},
    ]}


async def with_logging(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    # Three info entries ~50 ms apart, on the call's own stream (related_request_id).
    messages = ("Tool execution started", "Tool processing data", "Tool execution completed")
    for i, message in enumerate(messages):
        if i:
            await anyio.sleep(0.05)
        await ctx.session.send_log_message("info", message, logger=NAME, related_request_id=ctx.request_id)
    return result_text("Tool with logging executed successfully")


async def with_progress(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    meta = ctx.meta or {}
    token = meta.get("progress_token", meta.get("progressToken"))  # the SDK keys it by field name
    for step in (0, 50, 100):
        if step:
            await anyio.sleep(0.05)
        await ctx.session.report_progress(step, 100, f"Completed step {step} of 100")
    return result_text(str(token if token is not None else 0))


async def error_handling(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    return {"isError": True, "content": [text("This tool intentionally returns an error for testing")]}


async def reconnection(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    # SEP-1699: close this call's SSE stream (after its priming event); the client reconnects with
    # Last-Event-ID and the result is replayed from the event store.
    if ctx.close_sse_stream is not None:
        await ctx.close_sse_stream()
    await anyio.sleep(0.2)
    return result_text("Reconnection test completed successfully. If you received this, the client properly "
                       "reconnected after stream closure.")


class NeedsInput(Exception):
    """Raised to answer the request with an InputRequiredResult (2026-07-28) instead of its result."""

    def __init__(self, requests: dict[str, Any], state: dict[str, Any] | None = None) -> None:
        super().__init__("input required")
        self.requests, self.state = requests, state


STREAM_REQUESTS: dict[str, tuple[Any, Any]] = {
    "elicitation/create": (types.ElicitRequest, types.ElicitResult),
    "sampling/createMessage": (types.CreateMessageRequest, types.CreateMessageResult),
    "roots/list": (types.ListRootsRequest, types.ListRootsResult),
}


async def ask_all(ctx: Any, params: Any, requests: dict[str, Any],
                  state: dict[str, Any] | None = None) -> dict[str, Any]:
    """The client's answers to `requests` (elicitation, sampling, roots/list), keyed as asked, so a
    tool reads the same on both wires.

    2026-07-28, where a server cannot send requests: from the retry's inputResponses; until every
    key is answered (and, with `state`, the retry echoes a requestState carrying those fields), the
    request is answered by an InputRequiredResult asking for them (NeedsInput). Handshake era: each
    request is sent on this call's own stream, in order."""
    if not ctx.session.can_send_request:
        answers, echoed = input_responses(params), request_state(params) or {}
        if not set(requests) <= set(answers) or any(echoed.get(k) != v for k, v in (state or {}).items()):
            raise NeedsInput(requests, state)
        return answers
    answers = {}
    for key, request in requests.items():
        typed, result = STREAM_REQUESTS[request["method"]]
        on_this_call = ServerMessageMetadata(related_request_id=ctx.request_id)
        answer = await ctx.session.send_request(typed.model_validate(request), result, metadata=on_this_call)
        answers[key] = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
    return answers


async def ask_client(ctx: Any, params: Any, request: dict[str, Any]) -> dict[str, Any]:
    return (await ask_all(ctx, params, {"ask": request}))["ask"]


async def sampling_tool(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    try:
        answer = await ask_client(ctx, params, sampling(str(args.get("prompt")), 100))
    except (MCPError, ValidationError) as exc:  # the client refused, or has no back channel: say so
        return result_text(f"Sampling not supported or error: {exc}")
    content = answer.get("content")
    reply = content.get("text") if isinstance(content, dict) else None
    return result_text(f"LLM response: {reply if isinstance(reply, str) else 'No response'}")


async def elicit_with(ctx: Any, params: Any, message: str, schema: dict[str, Any],
                      prefix: str) -> dict[str, Any]:
    request = {"method": "elicitation/create", "params": {"message": message, "requestedSchema": schema}}
    try:
        answer = await ask_client(ctx, params, request)
    except (MCPError, ValidationError) as exc:
        return result_text(f"Elicitation not supported or error: {exc}")
    content = json.dumps(answer.get("content") or {})
    return result_text(f"{prefix}: action={answer.get('action')}, content={content}")


async def elicitation(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    schema = {"type": "object", "required": ["response"],
              "properties": {"response": {"type": "string", "description": "User's response"}}}
    return await elicit_with(ctx, params, str(args.get("message")), schema, "User response")


async def elicitation_sep1034(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    return await elicit_with(ctx, params, "Please review and update the form fields with defaults",
                             SEP1034_SCHEMA, "Elicitation completed")


async def elicitation_sep1330(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    return await elicit_with(ctx, params, "Please select options from the enum fields", SEP1330_SCHEMA,
                             "Elicitation completed")


async def json_schema_tool(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    return result_text(f"JSON Schema 2020-12 tool called with: {json.dumps(args)}")


# ---- tools: 2026-07-28 multi-round trips (SEP-2322) ------------------------------------------
# The SDK's RequestStateBoundary seals every requestState we hand out and rejects a tampered
# echo with -32602 before the handler runs: handlers see only plaintext they minted.

async def missing_capability(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.sampling is None:
        raise MCPError(types.MISSING_REQUIRED_CLIENT_CAPABILITY, "This tool needs the client's sampling "
                       "capability", data={"requiredCapabilities": {"sampling": {}}})
    return result_text("Success")


def input_required(requests: dict[str, Any], state: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"resultType": "input_required", "inputRequests": requests}
    if state is not None:
        body["requestState"] = json.dumps({**state, "nonce": str(uuid.uuid4())})
    return body


def request_state(params: Any) -> dict[str, Any] | None:
    raw = getattr(params, "request_state", None)
    try:
        state = json.loads(raw) if raw else None
    except ValueError:
        return None
    return state if isinstance(state, dict) else None


NAME_QUESTION = elicit_form("What is your name?", {"name": {"type": "string"}}, ["name"])
CONFIRM = elicit_form("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])
ROOTS = {"method": "roots/list", "params": {}}


def count(answer: dict[str, Any], field: str) -> int:
    value = answer.get(field)
    return len(value) if isinstance(value, list) else 0


def sampled_text(answer: dict[str, Any], default: str) -> str:
    content = answer.get("content")
    value = content.get("text") if isinstance(content, dict) else None
    return value if isinstance(value, str) else default


async def mrtr_elicitation(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    answers = await ask_all(ctx, params, {"user_name": NAME_QUESTION})
    return result_text(f"Hello, {answer_field(answers['user_name'], 'name')}!")


async def mrtr_sampling(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    answers = await ask_all(ctx, params, {"sample_request": sampling("What is the capital of France?", 100)})
    return result_text(f"Sampling result: {sampled_text(answers['sample_request'], 'no response')}")


async def mrtr_list_roots(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    answers = await ask_all(ctx, params, {"roots_request": ROOTS})
    return result_text(f"Found {count(answers['roots_request'], 'roots')} root(s)")


async def mrtr_request_state(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    # The retry must echo the requestState we minted (it names what was asked), with the answer.
    answers = await ask_all(ctx, params, {"confirm": CONFIRM}, {"kind": "request-state"})
    content = answers["confirm"].get("content")
    confirmed = isinstance(content, dict) and content.get("ok") is True
    return result_text("state-ok: requestState validated" if confirmed else "state-ok: not confirmed")


async def mrtr_multiple_inputs(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    requests = {"user_name": NAME_QUESTION, "greeting": sampling("Generate a greeting", 50),
                "client_roots": ROOTS}
    answers = await ask_all(ctx, params, requests, {"kind": "multiple-inputs"})
    return result_text(f"Name: {answer_field(answers['user_name'], 'name')}; "
                       f"Greeting: {sampled_text(answers['greeting'], 'Hello there!')}; "
                       f"Roots: {count(answers['client_roots'], 'roots')}")


async def mrtr_multi_round(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    # Two rounds: the name, then (with the name carried in the requestState) the colour. An
    # out-of-order retry matches neither round's state and starts over.
    step1 = elicit_form("Step 1: What is your name?", {"name": {"type": "string"}}, ["name"])
    step2 = elicit_form("Step 2: What is your favorite color?", {"color": {"type": "string"}}, ["color"])
    state = request_state(params) or {}
    name = state.get("name") if state.get("round") == 2 and not ctx.session.can_send_request else None
    if not isinstance(name, str):
        name = answer_field((await ask_all(ctx, params, {"step1": step1}, {"round": 1}))["step1"], "name")
    answers = await ask_all(ctx, params, {"step2": step2}, {"round": 2, "name": name})
    return result_text(f"Multi-round complete for {name} who likes {answer_field(answers['step2'], 'color')}")


async def mrtr_tampered_state(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    await ask_all(ctx, params, {"confirm": CONFIRM}, {"kind": "tamper-test"})
    return result_text("integrity-ok: state verified")


async def mrtr_capabilities(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    # Ask only for what the client declared it can answer.
    capabilities = ctx.session.client_capabilities
    requests: dict[str, Any] = {}
    if capabilities is not None and capabilities.elicitation is not None:
        requests["elicit_input"] = elicit_form("Elicitation input", {"value": {"type": "string"}}, ["value"])
    if capabilities is not None and capabilities.sampling is not None:
        requests["sample_input"] = sampling("Sample request", 50)
    if not requests:
        return result_text("No supported capabilities declared")
    answers = await ask_all(ctx, params, requests, {"kind": "capabilities-test"})
    return result_text(f"capabilities-ok: received {','.join(answers)}")


async def x_mcp_header(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    return result_text(f"region={args.get('region', '<none>')}")


async def streaming(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    # On 2026-07-28 a call's stream may carry notifications only: no request ever rides it.
    await ctx.session.report_progress(50, 100, "halfway")
    return result_text("Streaming complete")


async def logging_tool(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    # The SDK drops this unless the request's _meta carried io.modelcontextprotocol/logLevel.
    await ctx.session.send_log_message("info", "Diagnostic trace logging activated", logger=NAME,
                                       related_request_id=ctx.request_id)
    return result_text("Logging evaluated")


async def trigger_tool_change(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    await bus.publish(ToolsListChanged())
    if not is_modern(ctx):
        await ctx.session.send_tool_list_changed()
    return result_text("Mutation triggered")


async def trigger_prompt_change(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    await bus.publish(PromptsListChanged())
    if not is_modern(ctx):
        await ctx.session.send_prompt_list_changed()
    return result_text("Mutation triggered")


# ---- tasks extension (SEP-2663), 2026-07-28 wire ---------------------------------------------
# A task lives as long as this process (longer than its ttl). The tool's work runs as its own
# asyncio task, apart from the request that created it (a stateless request ends with its
# CreateTaskResult); tasks/get shows its state, tasks/update answers the questions it parked on,
# tasks/cancel stops it.

TASKS = "io.modelcontextprotocol/tasks"
TASK_TTL_MS = 600_000
TASK_POLL_MS = 100
NEEDS_TASKS: dict[str, Any] = {"requiredCapabilities": {"extensions": {TASKS: {}}}}


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Task:
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    status: str = "working"
    created: str = field(default_factory=now)
    updated: str = field(default_factory=now)
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    pending: dict[str, Any] = field(default_factory=dict)  # inputRequests not yet answered
    answers: dict[str, Any] = field(default_factory=dict)
    answered: asyncio.Event = field(default_factory=asyncio.Event)
    runner: asyncio.Task[None] | None = None

    def set(self, status: str) -> None:
        self.status, self.updated = status, now()

    async def ask(self, requests: dict[str, Any]) -> dict[str, Any]:
        """Park the task on `requests` until tasks/update has answered every one of them."""
        self.pending, self.answers = dict(requests), {}
        self.answered.clear()
        self.set("input_required")
        await self.answered.wait()
        self.set("working")
        return self.answers

    def envelope(self) -> dict[str, Any]:
        return {"taskId": self.id, "status": self.status, "createdAt": self.created,
                "lastUpdatedAt": self.updated, "ttlMs": TASK_TTL_MS, "pollIntervalMs": TASK_POLL_MS}


tasks: dict[str, Task] = {}


def tasks_negotiated(ctx: Any) -> bool:
    """The request declared the extension (on 2026-07-28 every request carries its capabilities)."""
    capabilities = ctx.session.client_capabilities
    return is_modern(ctx) and capabilities is not None and TASKS in (capabilities.extensions or {})


def start_task(work: Any) -> dict[str, Any]:
    """Record the task before answering (a tasks/get right after must find it), then run `work`."""
    task = Task()
    tasks[task.id] = task

    async def run() -> None:
        try:
            task.result = await work(task)
            task.set("completed")  # a tool error too: it ran, and its result says isError
        except MCPError as failed:  # a protocol-level error: `failed`, with the JSON-RPC error inlined
            task.error = failed.error.model_dump(by_alias=True, mode="json", exclude_none=True)
            task.set("failed")
        except asyncio.CancelledError:
            task.set("cancelled")

    task.runner = asyncio.get_running_loop().create_task(run())
    return {"resultType": "task", **task.envelope()}


async def run_as_task(ctx: Any, work: Any, *, required: bool = False) -> dict[str, Any]:
    """A task for a client that negotiated tasks; otherwise the same work inline (or -32021 if the
    tool can only run as a task)."""
    if tasks_negotiated(ctx):
        return start_task(work)
    if required:
        raise MCPError(types.MISSING_REQUIRED_CLIENT_CAPABILITY, f"This tool needs the {TASKS} extension",
                       data=NEEDS_TASKS)
    return await work(None)


async def greet(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    return result_text(f"Hello, {args.get('name', 'World')}!")


async def slow_compute(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    seconds = float(args.get("seconds", 1))

    async def work(task: Task | None) -> dict[str, Any]:
        await asyncio.sleep(seconds)
        return result_text(f"computed {args.get('label', '')} in {seconds:g} s")
    return await run_as_task(ctx, work)


async def failing_job(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    async def work(task: Task | None) -> dict[str, Any]:
        await asyncio.sleep(0.2)
        return {"isError": True, "content": [text("failing_job failed, as it always does")]}
    return await run_as_task(ctx, work, required=True)


async def protocol_error_job(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    async def work(task: Task | None) -> dict[str, Any]:
        await asyncio.sleep(0.1)
        raise MCPError(types.INTERNAL_ERROR, "protocol_error_job crashed, as it always does")
    return await run_as_task(ctx, work)


async def confirm_delete(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    filename = str(args.get("filename", "file"))
    question = elicit_form(f"Delete {filename}?", {"confirm": {"type": "boolean"}}, ["confirm"])

    async def work(task: Task | None) -> dict[str, Any]:
        if task is None:  # no task to park: a synchronous caller cannot be asked here
            return result_text(f"{filename} kept: no confirmation possible without tasks")
        answer = (await task.ask({"confirm": question}))["confirm"]
        content = answer.get("content") if isinstance(answer, dict) else None
        confirmed = answer.get("action") == "accept" and isinstance(content, dict) and content.get("confirm")
        return result_text(f"{filename} {'deleted' if confirmed else 'kept'}")
    return await run_as_task(ctx, work)


async def multi_input(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    questions = {"first": elicit_form("First name?", {"name": {"type": "string"}}, ["name"]),
                 "second": elicit_form("Second name?", {"name": {"type": "string"}}, ["name"])}

    async def work(task: Task | None) -> dict[str, Any]:
        if task is None:
            return result_text("multi_input needs tasks to ask its questions")
        answers = await task.ask(questions)
        return result_text("answers: " + ", ".join(answer_field(answers[k], "name") for k in questions))
    return await run_as_task(ctx, work)


async def tool_with_task(ctx: Any, params: Any, args: dict[str, Any]) -> dict[str, Any]:
    # MRTR first (round 1 asks, synchronously), then the final round escalates to a task.
    answers = input_responses(params)
    if "user_name" not in answers:
        if not tasks_negotiated(ctx):
            raise MCPError(types.MISSING_REQUIRED_CLIENT_CAPABILITY, f"This tool needs the {TASKS} extension",
                           data=NEEDS_TASKS)
        return input_required({"user_name": NAME_QUESTION})
    name = answer_field(answers["user_name"], "name", "stranger")

    async def work(task: Task | None) -> dict[str, Any]:
        await asyncio.sleep(0.1)
        return result_text(f"Hello, {name}! (from a task)")
    return await run_as_task(ctx, work, required=True)


class TaskParams(types.RequestParams):
    task_id: str
    input_responses: dict[str, Any] | None = None


def task_for(ctx: Any, params: TaskParams) -> Task:
    """The task a tasks/* request names, after the checks every tasks/* request gets."""
    if not tasks_negotiated(ctx):
        raise MCPError(types.MISSING_REQUIRED_CLIENT_CAPABILITY, f"tasks/* needs the {TASKS} extension",
                       data=NEEDS_TASKS)
    headers = getattr(ctx.request, "headers", None)  # HTTP only: SEP-2663 routes tasks/* by Mcp-Name
    if headers is not None and decode_header_value(headers.get("mcp-name")) != params.task_id:
        raise MCPError(types.HEADER_MISMATCH, "Mcp-Name header does not match params.taskId")
    task = tasks.get(params.task_id)
    if task is None:
        raise MCPError(types.INVALID_PARAMS, f"Unknown task: {params.task_id}")
    return task


async def tasks_get(ctx: Any, params: TaskParams) -> dict[str, Any]:
    task = task_for(ctx, params)
    detailed: dict[str, Any] = {"resultType": "complete", **task.envelope()}
    if task.status == "input_required":
        detailed["inputRequests"] = task.pending
    elif task.status == "completed":
        detailed["result"] = task.result
    elif task.status == "failed":
        detailed["error"] = task.error
    return detailed


async def tasks_update(ctx: Any, params: TaskParams) -> dict[str, Any]:
    # Answers for keys the task is not waiting on are ignored; the ack is empty either way.
    task = task_for(ctx, params)
    for key, answer in (params.input_responses or {}).items():
        if key in task.pending:
            del task.pending[key]
            task.answers[key] = answer
    if task.status == "input_required" and not task.pending:
        task.answered.set()
    return {"resultType": "complete"}


async def tasks_cancel(ctx: Any, params: TaskParams) -> dict[str, Any]:
    task = task_for(ctx, params)  # a terminal task acks the same (idempotent)
    if task.runner is not None and not task.runner.done():
        task.runner.cancel()
        await asyncio.wait([task.runner])
    return {"resultType": "complete"}


TOOL_HANDLERS = {
    "test_simple_text": simple_text,
    "test_image_content": image_content,
    "test_audio_content": audio_content,
    "test_embedded_resource": embedded_resource,
    "test_multiple_content_types": multiple_content_types,
    "test_tool_with_logging": with_logging,
    "test_tool_with_progress": with_progress,
    "test_error_handling": error_handling,
    "test_reconnection": reconnection,
    "test_sampling": sampling_tool,
    "test_elicitation": elicitation,
    "test_elicitation_sep1034_defaults": elicitation_sep1034,
    "test_elicitation_sep1330_enums": elicitation_sep1330,
    "json_schema_2020_12_tool": json_schema_tool,
    "test_missing_capability": missing_capability,
    "test_input_required_result_elicitation": mrtr_elicitation,
    "test_input_required_result_sampling": mrtr_sampling,
    "test_input_required_result_list_roots": mrtr_list_roots,
    "test_input_required_result_request_state": mrtr_request_state,
    "test_input_required_result_multiple_inputs": mrtr_multiple_inputs,
    "test_input_required_result_multi_round": mrtr_multi_round,
    "test_input_required_result_tampered_state": mrtr_tampered_state,
    "test_input_required_result_capabilities": mrtr_capabilities,
    "test_x_mcp_header": x_mcp_header,
    "test_streaming_elicitation": streaming,
    "test_logging_tool": logging_tool,
    "greet": greet,
    "slow_compute": slow_compute,
    "failing_job": failing_job,
    "protocol_error_job": protocol_error_job,
    "confirm_delete": confirm_delete,
    "multi_input": multi_input,
    "test_tool_with_task": tool_with_task,
    "test_trigger_tool_change": trigger_tool_change,
    "test_trigger_prompt_change": trigger_prompt_change,
}

# ---- resources -------------------------------------------------------------------------------

async def list_resources(ctx: Any, params: Any) -> dict[str, Any]:
    return {"resources": RESOURCES}


async def list_resource_templates(ctx: Any, params: Any) -> dict[str, Any]:
    return {"resourceTemplates": TEMPLATES}


async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> dict[str, Any]:
    uri = str(params.uri)
    if uri in STATIC_CONTENTS:
        return {"contents": [{"uri": uri, **STATIC_CONTENTS[uri]}]}
    prefix, suffix = "test://template/", "/data"
    if uri.startswith(prefix) and uri.endswith(suffix) and len(uri) > len(prefix) + len(suffix):
        item = uri[len(prefix):-len(suffix)]
        return {"contents": [{"uri": uri, "mimeType": "application/json", "text": json.dumps(
            {"id": item, "templateTest": True, "data": f"Data for ID: {item}"})}]}
    # SEP-2164: an unknown resource is -32602 (invalid params) with the uri in data.
    raise MCPError(types.INVALID_PARAMS, f"Resource not found: {uri}", data={"uri": uri})


async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> dict[str, Any]:
    subscriptions.add(str(params.uri))
    return {}


async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> dict[str, Any]:
    subscriptions.discard(str(params.uri))
    return {}


# ---- prompts ---------------------------------------------------------------------------------

async def list_prompts(ctx: Any, params: Any) -> dict[str, Any]:
    return {"prompts": PROMPTS}


def user(content: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": content}


async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> dict[str, Any]:
    args = params.arguments or {}
    if params.name == "test_simple_prompt":
        return {"messages": [user(text("This is a simple prompt for testing."))]}
    if params.name == "test_prompt_with_arguments":
        return {"messages": [user(text(f"Prompt with arguments: arg1='{args.get('arg1')}', "
                                       f"arg2='{args.get('arg2')}'"))]}
    if params.name == "test_prompt_with_embedded_resource":
        return {"messages": [
            user({"type": "resource", "resource": {"uri": args.get("resourceUri", "test://example-resource"),
                                                   "mimeType": "text/plain",
                                                   "text": "Embedded resource content for testing."}}),
            user(text("Please process the embedded resource above.")),
        ]}
    if params.name == "test_prompt_with_image":
        return {"messages": [user({"type": "image", "data": IMAGE_PNG, "mimeType": "image/png"}),
                             user(text("Please analyze the image above."))]}
    if params.name == "test_input_required_result_prompt":  # SEP-2322 on a non-tool request
        question = elicit_form("What context should the prompt use?", {"context": {"type": "string"}},
                               ["context"])
        try:
            answers = await ask_all(ctx, params, {"user_context": question})
        except NeedsInput as needs:
            return input_required(needs.requests, needs.state)
        context = answer_field(answers["user_context"], "context")
        return {"messages": [user(text(f"Prompt with context: {context}"))]}
    raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {params.name}")


# ---- logging, completion ---------------------------------------------------------------------

async def set_logging_level(ctx: Any, params: types.SetLevelRequestParams) -> dict[str, Any]:
    return {}


async def complete(ctx: Any, params: types.CompleteRequestParams) -> dict[str, Any]:
    # The scenario needs the capability and a well-formed answer; no suggestions are required.
    return {"completion": {"values": [], "total": 0, "hasMore": False}}


# ---- the server ------------------------------------------------------------------------------

class ConformanceServer(Server[Any]):
    def create_initialization_options(
        self, notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        # Every list can change (test_trigger_*), and the HTTP manager asks with no options.
        return super().create_initialization_options(
            notification_options or NotificationOptions(prompts_changed=True, resources_changed=True,
                                                         tools_changed=True),
            experimental_capabilities, extensions)


def complete_results(handler: Any) -> Any:
    """2026-07-28 results must say `resultType`; the SDK's sieve fills it for typed results only."""
    async def wrapped(ctx: Any, params: Any) -> Any:
        result = await handler(ctx, params)
        if is_modern(ctx) and isinstance(result, dict):
            result.setdefault("resultType", "complete")
        return result
    return wrapped


def build_server() -> ConformanceServer:
    public, private = CacheHint(ttl_ms=300_000, scope="public"), CacheHint(ttl_ms=300_000, scope="private")
    server = ConformanceServer(
        NAME, version="1.0.0",
        # SEP-2549: cacheable results carry freshness hints (the SDK fills them in)
        cache_hints={"tools/list": public, "prompts/list": public, "resources/list": public,
                     "resources/templates/list": public, "resources/read": private},
        on_subscriptions_listen=ListenHandler(bus),
    )
    # Registered by method (the capabilities follow from what is registered); logging/setLevel is
    # handshake-era only, the SDK never routes it on the 2026 wire.
    handlers: list[tuple[str, type[BaseModel], Any]] = [
        ("tools/list", types.PaginatedRequestParams, list_tools),
        ("tools/call", types.CallToolRequestParams, call_tool),
        ("resources/list", types.PaginatedRequestParams, list_resources),
        ("resources/templates/list", types.PaginatedRequestParams, list_resource_templates),
        ("resources/read", types.ReadResourceRequestParams, read_resource),
        ("resources/subscribe", types.SubscribeRequestParams, subscribe),
        ("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe),
        ("prompts/list", types.PaginatedRequestParams, list_prompts),
        ("prompts/get", types.GetPromptRequestParams, get_prompt),
        ("completion/complete", types.CompleteRequestParams, complete),
        ("logging/setLevel", types.SetLevelRequestParams, set_logging_level),
        ("tasks/get", TaskParams, tasks_get),
        ("tasks/update", TaskParams, tasks_update),
        ("tasks/cancel", TaskParams, tasks_cancel),
    ]
    for method, params_type, handler in handlers:
        server.add_request_handler(method, params_type, complete_results(handler))
    server.extensions[TASKS] = {}  # advertised under capabilities.extensions
    # Seals every requestState we hand out; a tampered echo is -32602 before any handler runs.
    server.middleware.append(RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=NAME))
    return server


class MemoryEventStore(EventStore):
    """SEP-1699 resumability: every event of every stream, replayed after a Last-Event-ID."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []  # (stream id, event id, message or None for priming)

    async def store_event(self, stream_id: str, message: Any) -> str:
        event_id = f"{stream_id}:{len(self.events) + 1}"
        self.events.append((stream_id, event_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        index = next((i for i, (_, event_id, _) in enumerate(self.events) if event_id == last_event_id), None)
        if index is None:
            return None
        stream = self.events[index][0]
        for stream_id, event_id, message in self.events[index + 1:]:
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


async def serve_stdio(server: ConformanceServer) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def serve_http(server: ConformanceServer, port: int) -> None:
    import uvicorn

    # DNS rebinding protection is on for 127.0.0.1 (the SDK's default for a loopback host);
    # the retry interval makes a client whose stream we close come back quickly (SEP-1699).
    app = server.streamable_http_app(event_store=MemoryEventStore(), retry_interval=100, host="127.0.0.1")
    listener = socket.create_server(("127.0.0.1", port))  # bound and listening before we say so
    print(f"LISTENING http://127.0.0.1:{listener.getsockname()[1]}/mcp", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[listener])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--http", type=int, metavar="PORT",
                        help="serve streamable HTTP on 127.0.0.1:PORT/mcp (0: any free port); the first "
                             "stdout line is then `LISTENING <url>`")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    server = build_server()
    if args.http is not None:
        asyncio.run(serve_http(server, args.http))
    else:
        anyio.run(serve_stdio, server)


if __name__ == "__main__":
    main()
