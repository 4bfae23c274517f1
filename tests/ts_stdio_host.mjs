// What the long-wait and task hosts share (tests/ts_long_wait_host.mjs, tests/ts_task_host.mjs): the
// TypeScript SDK loaded from SDK_DIR, a Client named `name` connected over stdio to the spec's
// command (argv: SDK_DIR SPEC_JSON), and one JSON line on stdout per thing the host sees.

import { join } from "node:path";
import { pathToFileURL } from "node:url";

export const line = (record) => process.stdout.write(JSON.stringify(record) + "\n");

export async function connectStdioHost(name) {
  const [sdkDir, specText] = process.argv.slice(2);
  const spec = JSON.parse(specText);
  const load = (path) => import(pathToFileURL(join(sdkDir, "dist", "esm", path)).href);
  const { Client } = await load("client/index.js");
  const { StdioClientTransport } = await load("client/stdio.js");
  const client = new Client({ name, version: "1.0.0" }, { capabilities: {} });
  await client.connect(new StdioClientTransport({ command: spec.command, args: spec.args, env: spec.env,
                                                  cwd: spec.cwd, stderr: "inherit" }));
  return { client, spec };
}
