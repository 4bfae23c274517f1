"""The soak test (issue 5, "Load"): scripts/soak drives a real main with many elicitations while
windows come and go, then checks that every request was decided exactly once and that the audit
log agrees.

    driver.py  one event loop: a controller issuing tool calls, renderers answering, churn; its peers
               are the testing kit's WirePeer (tests/kit), read without blocking
    verify.py  what must hold afterwards, and the audit log's agreement
"""
