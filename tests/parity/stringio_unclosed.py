import io
import sys

buf = io.StringIO()
buf.write("first line\n")
print("second line", file=buf)
data = io.BytesIO()
data.write(b"\x00\x01binary")
print(repr(buf.getvalue()), data.getvalue(), buf.tell(), data.tell())
sys.stdout.write(buf.getvalue())
# Neither buffer is closed: they are collected at shutdown.
