print("importing the broken module")
import _broken_syntax  # noqa: E402

print(_broken_syntax.VALUE)
