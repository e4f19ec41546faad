/* The helper that makes a run's scratch directory, and removes it once the run's
 * process ends. */
#ifndef PYNOX_LAUNCHER_SCRATCH_H
#define PYNOX_LAUNCHER_SCRATCH_H

#include <stddef.h>

/* The environment variable that names the helper's pipes to pynox: "PATH,MADE:PID",
 * the write end on which pynox names the directory to remove, the read end on which
 * the helper names the directory it made, and the launcher's own process id. */
#define SCRATCH_HELPER_VARIABLE "PYNOX_SCRATCH_HELPER"
/* How the names of scratch directories begin (pynox.engine.scratch.PREFIX). */
#define SCRATCH_PREFIX "pynox-run-"

/* The helper's two pipes: path[0] and made[1] (close-on-exec) for the helper,
 * path[1] and made[0] for pynox. */
struct scratch_pipes {
    int path[2];
    int made[2];
};

/* Makes both pipes. Returns 0, or -1 with nothing open. */
int scratch_helper_pipes(struct scratch_pipes *pipes);

/* Closes the helper's ends (helpers), or pynox's. */
void scratch_helper_close(const struct scratch_pipes *pipes, int helpers);

/* Forks the helper, which makes a directory in tmpdir (the TMPDIR variable's value,
 * or NULL) or /tmp, and closes the helper's ends here. The helper leaves this
 * process's session and outlives it; nobody waits for it. run: the process that
 * runs the program, a child of this one not yet waited for, whose end the helper
 * waits for too. */
void scratch_helper_spawn(const struct scratch_pipes *pipes, const char *tmpdir, long run);

/* "PYNOX_SCRATCH_HELPER=PATH,MADE:PID" into entry: pynox's ends and the process that
 * will exec the interpreter. Returns 1, or 0 if it does not fit. */
int scratch_helper_entry(char *entry, size_t size, const struct scratch_pipes *pipes, long pid);

#endif
