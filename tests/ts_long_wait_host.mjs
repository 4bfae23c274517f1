// A host whose request timeout is shorter than the person takes (tests/test_long_waits_e2e.py): the
// TypeScript SDK's Client makes one tools/call with `timeout` and `resetTimeoutOnProgress`, and
// writes one JSON line per thing it sees: connected, each progress notification (with the time since
// the call started), then the call's result or error.
//
//   node tests/ts_long_wait_host.mjs SDK_DIR '{"command": ..., "args": [...], "env": {...}, "cwd": ...,
//                                              "tool": ..., "arguments": {...}, "timeoutMs": 1000}'

import { connectStdioHost, line } from "./ts_stdio_host.mjs";

const { client, spec } = await connectStdioHost("long-wait-ts-host");
line({ connected: true });
const started = Date.now();
try {
  const result = await client.callTool({ name: spec.tool, arguments: spec.arguments }, undefined, {
    timeout: spec.timeoutMs,
    resetTimeoutOnProgress: true,
    onprogress: (progress) => line({ progress, elapsedMs: Date.now() - started }),
  });
  line({ result, elapsedMs: Date.now() - started });
} catch (error) {
  line({ error: { code: error.code, message: error.message }, elapsedMs: Date.now() - started });
}
await client.close();
