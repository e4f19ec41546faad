# A ModuleNotFoundError whose name raises when read.
class Missing(ModuleNotFoundError):
    @property
    def name(self):
        raise RuntimeError("no name")


raise Missing("No module named 'nowhere'", name="nowhere")
