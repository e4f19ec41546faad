# A temporary file still open when an error ends the program: its finalizer removes
# the file while the interpreter shuts down, after module globals are cleared.
import tempfile

scratch = tempfile.NamedTemporaryFile()  # noqa: SIM115 - open at the end, on purpose
scratch.write(b"partial results")
raise ValueError("the analysis failed")
