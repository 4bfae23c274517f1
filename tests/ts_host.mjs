// A second MCP host for tests/test_transparent_gateway.py: the TypeScript SDK's own Client
// (@modelcontextprotocol/sdk, handshake era) runs one scripted session and prints, as one JSON
// object on stdout, what it observed: the handshake, the lists, a call, logging after setLevel,
// sampling, elicitation and roots answered by its handlers, a completion, a subscription and its
// update, progress, a list change, an error and an unknown method.
//
//   node tests/ts_host.mjs SDK_DIR '{"transport": "stdio", "command": ..., "args": [...], "env": {...},
//                                    "cwd": ...}'
//   node tests/ts_host.mjs SDK_DIR '{"transport": "http", "url": ..., "headers": {...}}'
//
// SDK_DIR: the installed @modelcontextprotocol/sdk package (tests/npm_kit.py installs it).

import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [sdkDir, specText] = process.argv.slice(2);
const spec = JSON.parse(specText);
const load = (path) => import(pathToFileURL(join(sdkDir, "dist", "esm", path)).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const sdk = await load("types.js");

const WAIT_MS = 10_000; // for what arrives apart from a request's answer
const record = {};
const seen = { sampling: [], elicitations: [], roots: 0, logs: [], notifications: [] };
const arrivals = new EventTarget();

function take() {
  const taken = Object.fromEntries(Object.entries(seen).filter(([, v]) => (Array.isArray(v) ? v.length : v)));
  Object.assign(seen, { sampling: [], elicitations: [], roots: 0, logs: [], notifications: [] });
  return taken;
}

function noted(list, item) {
  list.push(item);
  arrivals.dispatchEvent(new Event("arrived"));
}

// Until holds() (or WAIT_MS): what arrived is recorded either way, and the comparison shows the rest.
function until(holds) {
  return new Promise((resolve) => {
    if (holds()) return resolve();
    const check = () => {
      if (holds()) done();
    };
    const done = () => {
      clearTimeout(timer);
      arrivals.removeEventListener("arrived", check);
      resolve();
    };
    const timer = setTimeout(done, WAIT_MS);
    arrivals.addEventListener("arrived", check);
  });
}

const count = (method) => seen.notifications.filter((n) => n.method === method).length;

async function outcome(make) {
  try {
    return { result: await make() };
  } catch (error) {
    return { error: { code: error.code, message: error.message, data: error.data } };
  }
}

async function step(name, make, holds) {
  const answer = await outcome(make);
  if (holds) await until(holds);
  record[name] = { answer, ...take() };
}

const client = new Client(
  { name: "transparency-ts-host", version: "1.0.0" },
  { capabilities: { sampling: {}, elicitation: {}, roots: { listChanged: true } } },
);
client.setRequestHandler(sdk.CreateMessageRequestSchema, async (request, extra) => {
  noted(seen.sampling, { id: extra.requestId, params: request.params });
  const prompt = request.params.messages[0].content.text;
  return { role: "assistant", model: "host-model", stopReason: "endTurn",
           content: { type: "text", text: `the host read '${prompt}'` } };
});
client.setRequestHandler(sdk.ElicitRequestSchema, async (request, extra) => {
  noted(seen.elicitations, { id: extra.requestId, params: request.params });
  return { action: "accept", content: { response: "yes" } };
});
client.setRequestHandler(sdk.ListRootsRequestSchema, async () => {
  seen.roots += 1;
  return { roots: [{ uri: "file:///work/project", name: "project" }] };
});
client.setNotificationHandler(sdk.LoggingMessageNotificationSchema, (n) => noted(seen.logs, n.params));
for (const schema of [sdk.ResourceUpdatedNotificationSchema, sdk.ToolListChangedNotificationSchema,
                      sdk.PromptListChangedNotificationSchema, sdk.ResourceListChangedNotificationSchema]) {
  client.setNotificationHandler(schema, (n) => noted(seen.notifications, n));
}

const transport = spec.transport === "stdio"
  ? new StdioClientTransport({ command: spec.command, args: spec.args, env: spec.env, cwd: spec.cwd,
                               stderr: "inherit" })
  : new StreamableHTTPClientTransport(new URL(spec.url), { requestInit: { headers: spec.headers ?? {} } });

// The initialize answer as it came (the Client keeps its parts, not the negotiated version).
let initialized;
let handler;
Object.defineProperty(transport, "onmessage", {
  get: () => handler,
  set: (given) => {
    handler = given && ((message, extra) => {
      if (message.id === 0 && "result" in message && initialized === undefined) {
        initialized = message.result; // initialize is the Client's request 0
      }
      // Progress as it arrives: the Client's onprogress misses a notification that comes in the same
      // read as the call's answer (it handles notifications a microtask later), direct or not.
      if (message.method === "notifications/progress") noted(seen.notifications, message);
      return given(message, extra);
    });
  },
});

await client.connect(transport);
record.connected = {
  initialize: initialized,
  serverVersion: client.getServerVersion(),
  capabilities: client.getServerCapabilities(),
  instructions: client.getInstructions() ?? null,
};
await step("tools/list", () => client.listTools());
await step("resources/list", () => client.listResources());
await step("resources/templates/list", () => client.listResourceTemplates());
await step("prompts/list", () => client.listPrompts());
await step("resources/read", () => client.readResource({ uri: "test://template/7/data" }));
await step("prompts/get", () => client.getPrompt({ name: "test_prompt_with_arguments",
                                                  arguments: { arg1: "a", arg2: "b" } }));
const call = (name, args = {}, options = undefined) =>
  client.callTool({ name, arguments: args }, undefined, options);
await step("tools/call", () => call("test_multiple_content_types"));
await step("logging/setLevel", () => client.setLoggingLevel("debug"));
await step("logging", () => call("test_tool_with_logging"), () => seen.logs.length >= 3);
await step("sampling", () => call("test_sampling", { prompt: "What is 2+2?" }));
await step("elicitation", () => call("test_elicitation", { message: "Your name?" }));
await step("roots", () => call("test_input_required_result_list_roots"));
await step("completion/complete", () => client.complete({
  ref: { type: "ref/prompt", name: "test_prompt_with_arguments" }, argument: { name: "arg1", value: "a" } }));
await step("resources/subscribe", () => client.subscribeResource({ uri: "test://watched-resource" }),
           () => count("notifications/resources/updated") >= 1);
await step("resources/unsubscribe", () => client.unsubscribeResource({ uri: "test://watched-resource" }));
let progressed = 0;
await step("progress", () => call("test_tool_with_progress", {}, { onprogress: () => { progressed += 1; } }),
           () => count("notifications/progress") >= 3);
record.progress.onprogress = progressed >= 1; // called, if maybe not for the last one (above)
await step("list changed", () => call("test_trigger_tool_change"),
           () => count("notifications/tools/list_changed") >= 1);
await step("ping", () => client.ping());
await step("error: unknown resource", () => client.readResource({ uri: "test://no-such-resource" }));
await step("error: needs a capability", () => call("failing_job"));
await step("unknown method", () => client.request({ method: "vendor.example/unknown", params: { x: 1 } },
                                                  sdk.ResultSchema));
await client.close();
process.stdout.write(JSON.stringify(record) + "\n");
