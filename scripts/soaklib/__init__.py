"""The soak test (issue 5, "Load"): scripts/soak drives a real main with many elicitations while
windows come and go, then checks that every request was decided exactly once and that the audit
log agrees.

    peer.py    a non-blocking peer written from wire contract v1 only (pyzmq + msgpack)
    driver.py  one event loop: a controller issuing tool calls, renderers answering, churn
    verify.py  what must hold afterwards, and the audit log's agreement
"""
