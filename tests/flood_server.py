"""A stdio MCP server (stdlib only; run as a script) that writes more than anyone reads, or reads
nothing, for the backpressure tests (tests/test_backpressure.py).

Tools: `flood {mib}` writes `mib` MiB of `notifications/message` lines (64 KiB each, numbered), then
its result; `deaf` answers, then never reads its stdin again. Its stdout is non-blocking: when a
write finds no room for a second (whoever reads it stopped), it says so once in the file named by
ELICITRON_FLOOD_STATUS (`blocked <bytes written>`), then waits for room; `done <bytes>` at the end.
"""

import json
import os
import select
import signal
import sys

STATUS = os.environ.get("ELICITRON_FLOOD_STATUS", "")
LINE_BYTES = 64 << 10
STALLED_S = 1.0  # no room in stdout for this long: whoever reads it has stopped
TOOLS = [{"name": "flood", "description": "Writes `mib` MiB of log notifications, then answers.",
          "inputSchema": {"type": "object", "properties": {"mib": {"type": "integer"}}}},
         {"name": "deaf", "description": "Answers, then reads nothing more.",
          "inputSchema": {"type": "object", "properties": {}}}]


def say(status: str) -> None:
    if STATUS:
        with open(STATUS, "a") as out:
            out.write(status + "\n")


class Out:
    def __init__(self) -> None:
        self.fd = sys.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.written = 0
        self.blocked_once = False

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                sent = os.write(self.fd, view)
            except BlockingIOError:
                _, writable, _ = select.select([], [self.fd], [], STALLED_S)
                if not writable and not self.blocked_once:
                    self.blocked_once = True  # no room for a whole second: nobody reads on
                    say(f"blocked {self.written}")
                continue
            view = view[sent:]
            self.written += sent

    def message(self, message: dict[str, object]) -> None:
        self.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")


def flood(out: Out, mib: int) -> None:
    pad = "x" * (LINE_BYTES - 100)
    for number in range(mib * (1 << 20) // LINE_BYTES):
        out.message({"jsonrpc": "2.0", "method": "notifications/message",
                     "params": {"level": "info", "data": f"{number:08d} {pad}"}})
    say(f"done {out.written}")


def main() -> None:
    out = Out()
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue
        if method == "initialize":
            result: dict[str, object] = {"protocolVersion": message["params"]["protocolVersion"],
                                         "capabilities": {"tools": {}, "logging": {}},
                                         "serverInfo": {"name": "flood", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call" and message["params"]["name"] == "flood":
            flood(out, int(message["params"].get("arguments", {}).get("mib", 1)))
            result = {"content": [{"type": "text", "text": "flooded"}]}
        elif method == "tools/call" and message["params"]["name"] == "deaf":
            out.message({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": "deaf"}]}})
            say("deaf")
            while True:
                signal.pause()  # reads nothing more, until it is ended
        else:
            result = {}
        out.message({"jsonrpc": "2.0", "id": request_id, "result": result})


if __name__ == "__main__":
    main()
