# An exception whose traceback and context are properties that raise: python reads
# them from the exception itself, never through such a property.
class Hostile(Exception):
    @property
    def __traceback__(self):
        raise RuntimeError("no traceback for you")

    @__traceback__.setter
    def __traceback__(self, value):
        raise RuntimeError("no traceback set")

    @property
    def __context__(self):
        raise RuntimeError("no context for you")


print("raising")
raise Hostile("shown as python shows it")
