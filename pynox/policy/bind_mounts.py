"""Where a write grant reaches, through bind mounts, folders it does not name.

A bind mount shows a folder (or a file) of a file system under a second path: with
/usr/lib bound at ~/project/libs, a grant of ~/project writes /usr/lib, which no path
rule sees. /proc/self/mountinfo says what each mount shows: its file system (the
device), the folder of it that is its root, and where it is mounted. A path is taken
to where its file system keeps it, and back to every other path that shows the same
place.
"""

import posix

from pynox import lean_os
from pynox.errors import PolicyError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import select


class Mount:
    __slots__ = ("device", "devices_open", "kind", "layers", "point", "root", "upper", "writable")

    def __init__(
        self,
        device: str,
        root: str,
        point: str,
        writable: bool = True,
        kind: str = "",
        layers: "tuple[str, ...]" = (),
        devices_open: bool = True,
        upper: str = "",
    ) -> None:
        self.device = device  # major:minor, one for every mount of one file system
        self.root = root  # the folder of the file system that shows at point
        self.point = point
        # Mounted read-only (the mount or its file system): nothing is written through it,
        # and the sandbox can remount nothing.
        self.writable = writable
        self.kind = kind  # the file system's type (ext4, overlay, fuse.sshfs), "" if unknown
        # An overlay's folders (its upper and lower layers), whose files it shows at point:
        # what is written in one shows there, as through a bind mount.
        self.layers = layers
        self.upper = upper  # of those, the one written to (upperdir), "" if none
        # Not mounted nodev: the kernel opens a device node through it as the device.
        self.devices_open = devices_open


_MOUNTINFO = "/proc/self/mountinfo"


def mounts() -> "list[Mount]":
    """This process's mounts, in the order they were made (a later one at the same point
    hides an earlier). Raises PolicyError where /proc/self/mountinfo cannot be read: where
    a grant reaches through a mount is then not known, and no grant can be checked."""
    try:
        with open(_MOUNTINFO, "rb") as listing:
            return _parsed(listing.read())
    except OSError as error:
        raise PolicyError(
            f"pynox cannot read {_MOUNTINFO} ({error.strerror or error}), which tells where "
            "a grant reaches through mounts, to check that it reaches nothing pynox "
            "trusts; run pynox where /proc is mounted"
        ) from None


class MountTable:
    """mounts(), read again only once the kernel says the mounts changed (it wakes a poll
    of mountinfo then): a pool checks every request's grants against them, and reading
    the table costs more than the rest of that check. Opened at first use, in the
    process that uses it (not in one forked before)."""

    def __init__(self) -> None:
        self.watch: select.poll | None = None
        self.listing: list[Mount] = []
        self.fd = -1

    def current(self) -> "list[Mount]":
        import select

        if self.watch is None:
            try:
                self.fd = posix.open(_MOUNTINFO, posix.O_RDONLY | posix.O_CLOEXEC)
            except OSError:
                return mounts()
            self.watch = select.poll()
            self.watch.register(self.fd, select.POLLPRI)
            self.watch.poll(0)  # the first poll reports a change: the table is read below
            self.listing = self._read()
        elif self.watch.poll(0):
            self.listing = self._read()
        return self.listing

    def close(self) -> None:
        """Lets go of mountinfo; a later current() opens it again."""
        if self.fd >= 0:
            posix.close(self.fd)
        self.fd, self.watch = -1, None

    def _read(self) -> "list[Mount]":
        chunks = []
        try:
            posix.lseek(self.fd, 0, 0)  # SEEK_SET
            while chunk := posix.read(self.fd, 1 << 16):
                chunks.append(chunk)
        except OSError:
            return mounts()
        return _parsed(b"".join(chunks))


def _parsed(text: bytes) -> "list[Mount]":
    found = []
    for line in text.split(b"\n"):
        # "id parent major:minor root point options ... - type source superoptions"
        fields = line.split(b" ")
        if len(fields) >= 6:
            root, point = (_unescaped(field) for field in fields[3:5])
            own = fields[5].split(b",")  # the mount's options; then its file system's
            options = own + fields[-1].split(b",")
            writable = b"ro" not in options
            kind = fields[fields.index(b"-", 6) + 1] if b"-" in fields[6:-1] else b""
            device = lean_os.fsdecode(fields[2])
            upper, layers = _layers(fields[-1]) if kind == b"overlay" else ("", ())
            devices_open = b"nodev" not in own
            found.append(
                Mount(
                    device,
                    root,
                    point,
                    writable,
                    lean_os.fsdecode(kind),
                    layers,
                    devices_open,
                    upper,
                )
            )
    return found


# The options that name an overlay's layers. Those of the legacy syntax show the text the
# mount was given, where a backslash makes the next character part of a name (a colon in
# a name of lowerdir's list: lo\:w); lowerdir+ and datadir+ (Linux 6.8) take each name as
# it is.
_ESCAPED_LAYER_OPTIONS = (b"upperdir=", b"lowerdir=")
_LITERAL_LAYER_OPTIONS = (b"lowerdir+=", b"datadir+=")


def _layers(options: bytes) -> "tuple[str, tuple[str, ...]]":
    """The folders an overlay's options name as its layers: upperdir (also given alone,
    "" if none), and lowerdir's folders (separated by colons, "::" before data-only ones)
    or those of lowerdir+ and datadir+."""
    folders: list[bytes] = []
    upper = b""
    for option in options.split(b","):  # a comma of a name is written \054
        name, _, value = option.partition(b"=")
        if option.startswith(_LITERAL_LAYER_OPTIONS):
            folders.append(_octal_unescaped(value))
        elif option.startswith(_ESCAPED_LAYER_OPTIONS):
            names = _overlay_names(_octal_unescaped(value), split=name == b"lowerdir")
            folders += names
            if name == b"upperdir":
                upper = names[0]
    layers = tuple(lean_os.fsdecode(folder) for folder in folders if folder)
    return lean_os.fsdecode(upper), layers


def _overlay_names(text: bytes, split: bool) -> "list[bytes]":
    """The names an overlay's option gives, as the kernel reads them: each backslash
    taken off and the character after it kept, and (split) a list cut at the colons
    left."""
    names = [bytearray()]
    escaped = False
    for byte in text:
        if escaped or byte != ord("\\") and not (split and byte == ord(":")):
            names[-1].append(byte)
            escaped = False
        elif byte == ord("\\"):
            escaped = True
        else:
            names.append(bytearray())
    return [bytes(name) for name in names]


def _unescaped(field: bytes) -> str:
    return lean_os.fsdecode(_octal_unescaped(field))


def _octal_unescaped(field: bytes) -> bytes:
    """A path of mountinfo, where a space, tab, newline, backslash (and in a mount
    option, a comma) are written in octal (\\040, \\011, \\012, \\134, \\054)."""
    parts = field.split(b"\\")
    text = parts[0]
    for part in parts[1:]:
        if len(part) >= 3 and all(48 <= byte <= 55 for byte in part[:3]):
            text += bytes([int(part[:3], 8) & 0xFF]) + part[3:]
        else:
            text += b"\\" + part
    return text


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _below(path: str, root: str) -> str:
    """What follows root in path (inside it), with its leading slash, or ""."""
    return path[len(root.rstrip("/")) :] if root != "/" else path


def _joined(root: str, rest: str) -> str:
    return (root.rstrip("/") + rest) or "/"


def mount_of(path: str, listing: "list[Mount]") -> "Mount | None":
    """The mount that shows path: the deepest point holding it, the last made there."""
    best = None
    for mount in listing:
        if _inside(path, mount.point) and (best is None or len(mount.point) >= len(best.point)):
            best = mount
    return best


def kinds_reached(grant: str, listing: "list[Mount]") -> "set[str]":
    """The types of the file systems a grant reaches: the one that holds it, and those
    mounted inside it ("" for one not known, as where the table could not be read)."""
    holding = mount_of(grant, listing)
    kinds = {holding.kind if holding is not None else ""}
    return kinds | {mount.kind for mount in listing if _inside(mount.point, grant)}


def devices(listing: "list[Mount]") -> "set[int]":
    """The device numbers (st_dev) of the mounted file systems."""
    found = set()
    for mount in listing:
        major, _, minor = mount.device.partition(":")
        if major.isdigit() and minor.isdigit():
            found.add(posix.makedev(int(major), int(minor)))
    return found


def opens_devices(grant: str, listing: "list[Mount]") -> bool:
    """Whether a device node reached through grant may open as its device: the mount that
    holds it, or one mounted inside it, is not mounted nodev (where the kernel refuses to
    open any device node, whatever its mode)."""
    holding = mount_of(grant, listing)
    if holding is None or holding.devices_open:
        return True
    return any(mount.devices_open and _inside(mount.point, grant) for mount in listing)


def holds_a_mount(grant: str, listing: "list[Mount]") -> bool:
    """Whether a mount point lies inside grant, which may then hold another file system."""
    return any(mount.point != grant and _inside(mount.point, grant) for mount in listing)


def shown_elsewhere(grant: str, listing: "list[Mount]") -> "list[tuple[str, str]]":
    """The other paths whose files a write grant of the real path grant reaches through a
    bind mount, as (that path, the point of the mount that joins them): where the grant
    lies inside what a mount shows, holds a mount point, or holds what a mount elsewhere
    shows; or through an overlay, where it lies inside or holds one of its layers."""
    # (device, the folder of its file system the grant reaches, the point of the mount
    # that shows it there when that one shows a folder of its file system, else "")
    places: list[tuple[str, str, str]] = []
    holding = mount_of(grant, listing)
    if holding is not None and holding.writable:
        folder = _joined(holding.root, _below(grant, holding.point))
        places.append((holding.device, folder, holding.point if holding.root != "/" else ""))
    places += [
        (mount.device, mount.root, mount.point)
        for mount in listing
        if mount.writable and mount.point != grant and _inside(mount.point, grant)
    ]
    found: dict[tuple[str, str], None] = {}
    for mount in listing:
        for layer in mount.layers:
            if _inside(grant, layer):  # what the grant reaches shows at the overlay's point
                path = _joined(mount.point, _below(grant, layer))
            elif _inside(layer, grant):  # all the overlay shows of that layer is reached
                path = mount.point
            else:
                continue
            if not _inside(path, grant):
                found.setdefault((path, mount.point), None)
    for device, folder, point in places:
        for other in listing:
            if other.device != device:
                continue
            if _inside(folder, other.root):  # what the grant reaches shows at other too
                path = _joined(other.point, _below(folder, other.root))
            elif _inside(other.root, folder):  # all other shows is reached
                path = other.point
            else:
                continue
            if not _inside(path, grant):
                found.setdefault((path, point or other.point), None)
    return list(found)
