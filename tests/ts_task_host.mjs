// A host that asks for a task on its call (tests/test_long_waits_tasks_e2e.py): the TypeScript SDK's
// `client.experimental.tasks.callToolStream` with `task` set and a short request timeout, writing one
// JSON line per thing it sees: connected, the task created, each status it polled (with the time
// since the call started), then the call's result or error.
//
//   node tests/ts_task_host.mjs SDK_DIR '{"command": ..., "args": [...], "env": {...}, "cwd": ...,
//                                         "tool": ..., "arguments": {...}, "timeoutMs": 3000}'

import { connectStdioHost, line } from "./ts_stdio_host.mjs";

const { client, spec } = await connectStdioHost("task-ts-host");
line({ connected: true, serverTasks: client.getServerCapabilities()?.tasks ?? null });
const started = Date.now();
const elapsedMs = () => Date.now() - started;
const stream = client.experimental.tasks.callToolStream({ name: spec.tool, arguments: spec.arguments }, undefined,
                                                        { timeout: spec.timeoutMs, task: { ttl: 60000 } });
for await (const message of stream) {
  if (message.type === "error") {
    line({ error: { code: message.error.code, message: message.error.message }, elapsedMs: elapsedMs() });
  } else if (message.type === "result") {
    line({ result: message.result, elapsedMs: elapsedMs() });
  } else {
    line({ [message.type]: message.task, elapsedMs: elapsedMs() });
  }
}
await client.close();
