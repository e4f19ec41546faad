import helperpkg
import helperpkg.sub as sub
from helperpkg import *  # noqa: F403

print(helperpkg.__doc__)
print(helperpkg.VERSION, helperpkg.double(4), sub.double("ab"), double(1.5))  # noqa: F405
print(sorted(k for k in vars(helperpkg) if not k.startswith("__")))
print(helperpkg.__package__, sub.__name__, helperpkg.__path__[0].endswith("helperpkg"))
