"""How a hint names what it names: grants, limits and paths, for the command line, the
Python API or a client of the pool's protocol (Style), and the words every hint shares.

Apart from pynox.engine.hint_text, which words each kind of hint, and
pynox.engine.limit_hints, which words those of the memory and file size limits: a run
with a memory limit under the launcher needs only the latter two modules' words.
"""

from pynox.file_names import OUT_DIR
from pynox.policy.grants import GRANTS_BY_NAME, SESSION_NOTE
from pynox.unit_format import format_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

# The folder inside one that cannot be granted for writing that a hint suggests
# writing into instead (pynox.engine.hints._where_writable).
OUTPUT_FOLDER = "out"
# Where a program may always write.
SCRATCH = "the run's scratch directory ($TMPDIR)"
# A pool run's scratch directory is removed when it ends: only its out/ comes back.
POOL_SCRATCH = (
    f"the run's scratch directory ($TMPDIR), whose {OUT_DIR}/ folder comes back with the result"
)


class Style:
    """How a hint names a grant: as a command-line flag, as an API argument, or, for a
    client of the pool's protocol (json), as the request's field; and, for a pool, which
    grants its [pool.limits] would refuse a request, so that no hint names one that
    following cannot get."""

    def __init__(
        self,
        api: bool,
        ceilings: "Mapping[str, int] | None" = None,
        refuses: "Callable[[str, str | None], bool] | None" = None,
        never: "Callable[[str, str | None], str | None] | None" = None,
        template: bool = False,
        session: bool = False,
        json: bool = False,
    ) -> None:
        self.api = api
        self.json = json  # with api: a request's JSON field ("allow_read": ["/srv"])
        # A pool session's step: its grants and limits are the session's, fixed when it
        # started, so a hint that names one says to start a new session (SESSION_NOTE).
        self.session = session
        self.named = False  # whether the hint being made named a grant or limit
        # Texts with VALUE_PLACEHOLDER for the value, which the launcher shows itself.
        self.template = template
        self.ceilings = ceilings or {}  # the most a limit may be, by grant name
        # (grant name, path or None) -> whether it is refused (None: whatever the path).
        self.refuses = refuses
        # (grant name, path or None) -> what it reaches that no request is ever granted
        # (a pool's scratch directories), or None.
        self.never = never

    def grant(self, name: str, value: str | None = None, shown: str | None = None) -> str:
        """shown: how the command line shows value, when not as shown() would."""
        self.named = True
        if self.api and self.json:
            return json_field(name, True if value is None else [value])
        if self.api:
            if value is None:
                return f"{name}=True"
            return f"{name}=[{value!r}]"
        flag = GRANTS_BY_NAME[name].flag
        if value is None:
            return flag
        return f"{flag}={shown if shown is not None else self.shown(value)}"

    def grant_both(self, names: "tuple[str, str]", value: str, shown: "str | None" = None) -> str:
        """Two grants of one value: flags apart, as a shell takes them; API arguments
        apart by a comma, as Python takes them, and JSON fields as an object holds them."""
        return (", " if self.api else " ").join(self.grant(name, value, shown) for name in names)

    def scratch(self) -> str:
        """Where a run may always write: its scratch directory."""
        return POOL_SCRATCH if self.api else SCRATCH

    def shown(self, path: str) -> "str | None":
        """path as the hint shows it (shown_path); in an API hint, which spells grants in
        Python, a path that is not printable text as its repr: a line break, or a name
        that is not UTF-8, whose surrogates no model API could encode, stays escaped."""
        if self.template:
            return path
        if self.api and not path.isprintable():
            return json_field(None, path) if self.json else repr(path)
        return shown_path(path)

    def limit(self, name: str, value: str) -> str:
        self.named = True
        if self.api and self.json:
            return json_field(name, value)
        if self.api:
            return f"{name}={value!r}"
        return GRANTS_BY_NAME[name].flag + "=" + value

    def field(self, name: str) -> str:
        """A grant or limit named without a value: its flag, or its API argument."""
        self.named = True
        if self.api and self.json:
            return json_field(name, None)
        return name if self.api else GRANTS_BY_NAME[name].flag

    def refused(self, name: str, value: str | None = None) -> bool:
        if self.never is not None and self.never(name, value) is not None:
            return True
        return self.refuses is not None and self.refuses(name, value)

    def ask(self, name: str, value: str | None = None) -> str:
        """'; grant it with G', or why no request can have G."""
        reached = self.never(name, value) if self.never is not None else None
        if reached is not None:
            return f"; no request may be granted it: it reaches {reached}"
        if self.refused(name, value):
            return f"; {LIMITED_BY} lets no request grant it"
        return f"; grant it with {self.grant(name, value)}"

    def larger(self, name: str, now: int, wanted: int) -> "str | None":
        """The limit to suggest in place of `now` (`wanted`, or the most it may be), or
        None when it is at its most already."""
        most = self.ceilings.get(name)
        if most is None:
            return format_size(wanted)
        if now >= most:
            return None
        return format_size(min(wanted, most))


def json_field(name: "str | None", value: object) -> str:
    """A request's field as a client of the pool's protocol sends it ("memory": "512m"),
    its name alone ("memory") without a value, or a value alone without a name."""
    from pynox.readable_json import dumps_readable

    if name is None:
        return dumps_readable(value)
    if value is None:
        return dumps_readable(name)
    return f"{dumps_readable(name)}: {dumps_readable(value)}"


# Who keeps a pool's requests within bounds, as a hint names it.
LIMITED_BY = "[pool.limits]"


# Where a hint's value goes in the texts hint_texts gives.
VALUE_PLACEHOLDER = "\0"

# What a path may hold to be shown as it is: the shell reads it as one word (shlex.quote's
# own set). runtime/launcher_result.c shows a --json run's hint by the same rules.
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-")


def _breaks_line(character: str) -> bool:
    """Control characters, line and paragraph separators and bidirectional overrides: in
    a hint they would start a line of its own or turn its text around."""
    point = ord(character)
    return (
        point < 0x20
        or 0x7F <= point <= 0x9F
        or 0x2028 <= point <= 0x202E
        or 0x2066 <= point <= 0x2069
    )


def shown_path(path: str) -> "str | None":
    """path as a hint shows it: as it is, or in single quotes where the shell would read
    it as more than one word (as shlex.quote writes it), so that no path a program names
    reads as a grant of its own; None when it holds a character that would break the
    hint's line."""
    if not path or any(_breaks_line(character) for character in path):
        return None
    if all(character in _PLAIN for character in path):
        return path
    return "'" + path.replace("'", "'\"'\"'") + "'"


def worded(
    hint_of: "Callable[[object, object, Style, int | None, int | None], str | None]",
    kind: object,
    target: object,
    style: Style,
    memory: int | None,
    max_file_size: int | None,
) -> str | None:
    """The text hint_of gives for the kind and value, with the note a session's step
    needs when it names a grant or limit (which only a new session can change)."""
    style.named = False
    text = hint_of(kind, target, style, memory, max_file_size)
    if text is not None and style.session and style.named:
        text += SESSION_NOTE
    return text


def templates(
    format_hint: "Callable[[object, object, Style, int | None, int | None], str | None]",
    kinds: "frozenset[str]",
    memory: int | None,
    max_file_size: int | None,
) -> dict[str, str]:
    """The command line's hint of each of kinds that has one, as format_hint words it,
    with VALUE_PLACEHOLDER for the value (for the launcher's --json result)."""
    texts = {}
    style = Style(False, template=True)
    for kind in sorted(kinds):
        text = format_hint(kind, VALUE_PLACEHOLDER, style, memory, max_file_size)
        if text is not None:
            texts[kind] = text
    return texts
