"""Pieces of `scripts/bench`: one module per figure, plus the scripted peers they drive.

Peers here are written from wire contract v1 (DESIGN.md section 3) with raw pyzmq + msgpack,
like tests/wire_peer.py, so what the benchmark measures is what a third-party peer would see.
"""
