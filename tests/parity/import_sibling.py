import os

import _helper
from _helper import add

print(_helper.GREETING)
print(add(2, 3), _helper.describe())
print(os.path.dirname(_helper.__file__) == os.path.dirname(os.path.abspath(__file__)))
print(_helper.__name__, _helper.__spec__.name, type(_helper.__loader__).__name__)
