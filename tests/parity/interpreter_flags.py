"""sys.flags and sys.orig_argv as python sets them from its own command line."""
import sys

# python's command line after its executable: options, program and arguments as given.
print(sys.orig_argv[1:])
print(sys.dont_write_bytecode)
# All but no_site, which stays 1 under pynox: it runs no site module.
names = [name for name in dir(sys.flags) if name[0] != "_" and name != "no_site"]
print([(name, getattr(sys.flags, name)) for name in names if name not in ("count", "index")])
print(type(sys.flags).__name__, len(sys.flags))
