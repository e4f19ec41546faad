"""The names of files handed to a run and taken back from it, checked the same way by
the API (before sending) and the pool (on receipt): a relative path of plain components.
"""

from pynox.limits import MAX_FILE_DEPTH, MAX_FILE_NAME, MAX_FILE_NAME_PART

# The directory of the run's scratch directory whose files come back with the result.
OUT_DIR = "out"


def problem(name: object) -> "str | None":
    """What is wrong with a file's name, or None: a non-empty relative path of at most
    MAX_FILE_DEPTH components, no "", "." or ".." among them and none longer than
    MAX_FILE_NAME_PART bytes, no NUL, valid UTF-8."""
    if not isinstance(name, str) or not name:
        return "is not a non-empty string"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        # A surrogate, os.fsdecode's spelling of a byte that is not UTF-8: such a name
        # could not come back from out/ either.
        return "is not valid Unicode: it holds a lone surrogate; give a name that UTF-8 can encode"
    if size > MAX_FILE_NAME:
        return f"is longer than {MAX_FILE_NAME} bytes"
    if "\0" in name:
        return "contains a NUL character"
    if name.startswith("/"):
        return "is absolute; give a path relative to the scratch directory"
    parts = name.split("/")
    if len(parts) > MAX_FILE_DEPTH:
        return f"nests deeper than {MAX_FILE_DEPTH} directories"
    if any(part in ("", ".", "..") for part in parts):
        return 'has an empty, "." or ".." component; give a plain relative path'
    if any(len(part.encode("utf-8")) > MAX_FILE_NAME_PART for part in parts):
        return (
            f"has a component longer than {MAX_FILE_NAME_PART} bytes, the most a file system "
            "takes; give shorter names"
        )
    return None
