"""Audit events raised in a subinterpreter (listing a folder, opening a file, id()):
code that runs there sees what it sees under python, and the program goes on."""

try:
    import _interpreters as interpreters  # 3.13 on
except ImportError:
    try:
        import _xxsubinterpreters as interpreters  # 3.12
    except ImportError:
        interpreters = None

CODE = """
import os
names = sorted(os.listdir("."))
with open(os.devnull) as null:
    null.read()
id(names)
print("subinterpreter listed", "subinterpreter_events.py" in names)
"""

if interpreters is None:
    print("subinterpreter listed True")
else:
    interpreter = interpreters.create()
    interpreters.run_string(interpreter, CODE)
    interpreters.destroy(interpreter)
print("main interpreter goes on")
