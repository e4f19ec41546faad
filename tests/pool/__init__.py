"""Robustness of `pynox pool` (docs/pool-protocol.md) against its clients and its children.

Malformed and hostile lines (hypothesis against the parser, then a sample through a live
pool); children that segfault, run out of memory, time out, forge protocol lines on every
descriptor or break their channel; host functions that raise or hang; sessions; the
[pool.limits] caps; the client or the pool killed mid-request (no orphans); and 10,000
requests in a row with bounded descriptors, processes and memory.

Every test talks to the installed `pynox pool` through support/pool_client.py, except the
parser's own tests, which call it directly.
"""
