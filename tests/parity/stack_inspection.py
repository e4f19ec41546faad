"""What a program sees of its own call stack: only its own frames."""
import inspect
import sys
import traceback
import warnings


def show():
    traceback.print_stack(file=sys.stdout)
    print("frames:", len(inspect.stack()), len(traceback.extract_stack()))


show()
frame = sys._getframe()
print("module frame's caller:", frame.f_back)
warnings.warn("attributed beyond the top frame", stacklevel=2)
