# Exceptions whose attributes raise when read: python shows them all the same.
class Denied(PermissionError):
    @property
    def filename(self):
        raise RuntimeError("no filename")

    @property
    def errno(self):
        raise RuntimeError("no errno")


print("raising")
raise Denied(13, "Permission denied", "/nowhere")
