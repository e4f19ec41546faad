import sys

for name in ("stdin", "stdout", "stderr"):
    stream = getattr(sys, name)
    print(name, repr(stream.name), stream.mode, stream.encoding, stream.errors,
          stream.line_buffering, stream.write_through, stream.isatty(), stream.fileno(),
          type(stream.buffer).__name__, getattr(stream.buffer, "name", None))
print(sys.stdout is sys.__stdout__, sys.stderr is sys.__stderr__, sys.stdin is sys.__stdin__)
print(repr(sys.stdin.read()))
