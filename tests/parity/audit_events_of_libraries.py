"""A library may raise an audit event of the standard library's name with arguments of
its own, or none (sys.audit is public): python goes on, and so does the program."""

import sys

for event, args in [
    ("os.listdir", ()),
    ("os.scandir", ()),
    ("shutil.rmtree", ()),
    ("os.listdir", (b"\xff" * 5000,)),
    ("shutil.rmtree", (3.5, None, None)),
    ("os.chdir", ()),
    ("socket.bind", ()),
    ("os.fork", ()),
]:
    sys.audit(event, *args)
    print(event, "went on")
