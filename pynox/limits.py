"""Limits and defaults that the command, the pool and its clients share, each defined once."""

# Output kept per stream of a captured run when no grant sets max_output.
DEFAULT_MAX_OUTPUT = 65536
# The longest wall-clock limit a run may have, in seconds, and the shortest a hint suggests:
# below that, a doubled limit may still not cover the interpreter's own start (a hundredth
# of a second on a fast machine, far more on a slow or busy one).
MAX_TIMEOUT = 24 * 60 * 60.0
SHORTEST_SUGGESTED_TIMEOUT = 1.0
# A pool's workers when neither its caller nor its config says (`pynox pool`, RayPool).
DEFAULT_WORKERS = 2
# The pool's wall-clock limit for a request when neither the request nor its config sets one.
DEFAULT_TIMEOUT = 30.0
# How long a pool session may wait for its next step before the pool closes it, in seconds,
# when [pool] session_idle does not say.
DEFAULT_SESSION_IDLE = 600.0
# `pynox mcp`: the most sessions open at once when [pool] max_sessions does not say, and the
# longest code (in characters) one tool call may carry; the pool's own MAX_LINE stays far
# above it, whatever the code's JSON escaping.
DEFAULT_MCP_SESSIONS = 16
MAX_MCP_CODE = 1 << 20
# The longest line of the pool protocol (a request with its code); longer ones are refused.
MAX_LINE = 16 << 20
# The smallest --memory a program can start in, and the most output kept per stream.
MIN_MEMORY = 32 * 1024 * 1024
MAX_OUTPUT_LIMIT = 16 * 1024 * 1024
# The most a child's JSON error report may take on its pipe.
REPORT_LIMIT = 1 << 20
# A host function's signature when its client cannot tell it (shown in its repr and help).
UNKNOWN_SIGNATURE = "(...)"
# What the file of pool code is called in tracebacks unless the request names it.
DEFAULT_NAME = "agent.py"
# Files a request hands to its run ("files"): how many, and their bytes together, decoded.
MAX_FILES_IN = 1000
MAX_FILES_IN_BYTES = 8 << 20
# Files a result carries back from the run's out/ directory: how many, and their bytes
# together; what goes past either, or is not a regular file, is named in files_left_out.
MAX_FILES_OUT = 100
MAX_FILES_OUT_BYTES = 8 << 20
# The longest name of a file handed in or out (bytes of UTF-8), and its deepest nesting.
MAX_FILE_NAME = 1024
MAX_FILE_DEPTH = 16
# The longest name of one directory or file along that path: what Linux file systems take.
MAX_FILE_NAME_PART = 255
# The most entries of out/ (files and directories) looked at, whatever the program left.
MAX_OUT_ENTRIES = 10000
# Bytes of lines the pool has written and its client has not read yet, beyond which it
# stops reading the output of streaming requests (their programs then wait on their pipes).
STREAM_BACKLOG = 1 << 20
# Characters of streamed output the Python client holds for a loop that has not taken them
# yet; beyond, it counts them as skipped rather than hold more (pynox.api.stream).
STREAM_BUFFER = 16 << 20
# What a pool run gives back besides its output (pynox.pool.display): the repr of the code's
# last expression, cut to the run's max_output bytes of UTF-8 (value_limit) and never to more
# than this many; and the PNG images of the figures it drew, at most this many per run or
# session step, this many bytes together, and this many pixels a side.
MAX_VALUE = 65536
MAX_IMAGES = 8
MAX_IMAGE_BYTES = 4 << 20
MAX_IMAGE_SIDE = 8192


def value_limit(max_output: int) -> int:
    """The most bytes of a run's value: max_output bounds it as it bounds each stream, so
    that what a model is shown stays within it."""
    return min(max_output, MAX_VALUE)


# Host calls of one pool request waiting for the client at once: at most this many, carrying
# at most this many bytes of JSON between them (pynox_host waits for room; a program that
# writes call frames itself and passes either ends its request).
MAX_CALLS_IN_FLIGHT = 4
MAX_CALL_BYTES_IN_FLIGHT = 16 << 20
