"""What a supervisor hands the child it forks, and the bytes the two exchange.

Apart from pynox.engine.child so that a supervisor can fork before it imports
the child's half (the sandbox core among it): the child imports that itself,
and the supervisor's smaller heap is cheaper to fork.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn, Protocol

    from pynox.engine.prepared_sandbox import Prepared
    from pynox.engine.program import Program
    from pynox.errors import SandboxError
    from pynox.policy.resolve import Policy

    class PoolLink(Protocol):
        """What a pool child does that others do not (pynox.pool.child_link)."""

        def before_confinement(self) -> None: ...
        def run(self, program: "Program", policy: "Policy", setup: "ChildSetup") -> "NoReturn": ...

    # Where the caller's python finds packages, as its environment says before pynox
    # empties it: the user base of the user site, PYTHONPATH, VIRTUAL_ENV.
    PackageEnv = tuple[str | None, str | None, str | None]
    # What pynox started with that names paths no write grant may reach, as its
    # environment says before pynox empties it (the variables of
    # pynox.policy.system_paths.PATH_NAMING_VARIABLES that are set), the folders it
    # imports from and this user's home directory as /etc/passwd lists it, which the
    # sandbox may not read (see pynox.policy.trusted.named_by_environment).
    PathEnv = tuple[dict[str, str], list[str], str]


# The first byte of the report once the process is confined. Only the
# trusted side writes before it; whatever follows comes from the program, so a
# report after it can never claim that the sandbox failed.
REPORT_CONFINED = b"\x06"
# What the child writes once Python has seen the program to its end.
PYTHON_FINISHED = b"\x04"


class ChildSetup:
    """What the supervisor hands its child besides the program and policy."""

    __slots__ = (
        "stdout_fd",
        "stderr_fd",
        "stdin_null",
        "report_fd",
        "unbuffered",
        "no_site",
        "dont_write_bytecode",
        "api_hints",
        "parent_pid",
        "system_reads",
        "channel_fd",
        "pool_link",
        "scrub_failure",
        "environment_emptied",
        "prepared",
        "scratch_fd",
        "end_fd",
        "config_package_dirs",
        "package_env",
        "path_env",
        "config_paths",
        "start_cwd",
        "own_pipes",
        "new_session",
        "own_group",
        "report_reserve",
    )

    def __init__(self) -> None:
        self.stdout_fd: int | None = None  # capture pipes, or None for the user's own
        self.stderr_fd: int | None = None
        self.stdin_null = False
        self.report_fd: int | None = None  # where a JSON error report goes
        self.unbuffered = False
        self.no_site = False
        self.dont_write_bytecode = False  # -B: imports write no .pyc files
        self.api_hints = False
        self.parent_pid = 0
        self.system_reads: list[str] = []  # what the interpreter itself reads
        # The pool's frame channel (host functions, session steps), if any, and what
        # a pool child does over it, then instead of the engine's run once confined
        # (pynox.pool.child_link.ChildLink).
        self.channel_fd: int | None = None
        self.pool_link: PoolLink | None = None
        self.scrub_failure: SandboxError | None = None
        # Whether the environment was emptied before this process was forked (a pool's
        # zygote empties its own once, for every spare), with package_env and
        # scrub_failure set then (pynox.engine.child.empty_environment).
        self.environment_emptied = False
        # A pool's spare confines itself in two halves (pynox.engine.prepared_sandbox):
        # the first half, or why it failed, waits here for the request.
        self.prepared: Prepared | SandboxError | None = None
        # A run in pynox's own process: the pipe whose end tells the helper that
        # removes the scratch directory that the run is over (pynox.engine.scratch).
        self.scratch_fd: int | None = None
        # Where the child says that Python saw the program to its end (see
        # supervisor.Outcome.python_finished), when the supervisor watches for it.
        self.end_fd: int | None = None
        # What the report and end pipes are (device, inode), taken before the program
        # runs: a program may close them and open files of its own under their numbers.
        self.own_pipes: dict[int, tuple[int, int]] = {}
        # A descriptor held while the program runs and let go for its error report: a
        # program that used up its descriptors would leave none to import the report with.
        self.report_reserve: int | None = None
        # A child bound to a supervisor (parent_pid) leaves the terminal's session,
        # except under the launcher's own supervision: it stays the foreground job.
        self.new_session = True
        # Whether that foreground-less run left the launcher's group for one of its own
        # (pynox.engine.job_group), which then holds only the program's processes.
        self.own_group = False
        # Package directories a pynox.toml names, granted or not (profiles, [pool]), and
        # what the caller's environment said of its packages (PackageEnv): where the
        # ModuleNotFoundError hint looks for a module the program could not import,
        # besides pynox's and the interpreter's own site-packages (see
        # pynox.engine.report._module_hint).
        self.config_package_dirs: list[str] = []
        self.package_env: PackageEnv = (None, None, None)
        # What a write hint must not name a grant of, beyond what this process finds
        # itself once confined (pynox.engine.hints): PathEnv, and the pynox.toml the run
        # was given, if any.
        self.path_env: PathEnv = ({}, [], "")
        self.config_paths: list[str] = []
        # The working directory pynox ran in, as the program starts: its pynox.toml is
        # one of the paths no write grant may reach (see pynox.engine.hints).
        self.start_cwd: str | None = None

    def kept_fds(self) -> list[int]:
        """The descriptors of pynox's own that the confined process keeps."""
        kept = (self.report_fd, self.channel_fd, self.scratch_fd, self.end_fd)
        return [fd for fd in kept if fd is not None]
