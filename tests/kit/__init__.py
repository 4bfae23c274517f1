"""One testing kit for tests/, scripts/bench and scripts/soak: real processes, a contract-only peer,
and the contract oracle.

Importable as `kit` from tests (pytest puts tests/ on sys.path) and from scripts (they insert
ROOT/tests). Everything here except `window_probe` is written from the wire contract alone (raw
pyzmq + msgpack): it never imports the project's `shared`, `main_process` or `renderer_process`,
so what passes with it is what a third-party peer built from DESIGN.md section 3 would see.

Modules, one job each:
    paths         where the project and its demo server are
    env           private temp dirs and the environment every child runs in
    output        a child's output, drained as it comes and kept for failure messages
    procs         ending processes, finding a process's descendants
    stats         percentiles
    contract      topics, error codes, limits and body shapes of the wire contract
    oracle        what main must answer to a frame, per the contract
    frames        malformed frames of every kind, reproducible from a seed
    wire          encoding, decoding and the hello
    peer          WirePeer: one DEALER speaking the contract (blocking and non-blocking modes)
    main          RunningMain: `elicitron main` in isolated dirs, and waits on what it reports
    zygote        mains and CLI commands forked from a process that imported main once (zygote_server,
                  run as its own process: the one place the kit's processes import main's code)
    demo          the demo MCP server: its config entry, and over HTTP
    window        WindowProcess: a real window process and the events it reports
    receiver      WebhookReceiver: a real HTTP server on loopback that keeps what it is sent
    window_probe  (run as `python -m kit.window_probe`) the real window, reporting its events
"""
