/* The helper that removes a run's scratch directory once the run's process ends. */
#ifndef PYNOX_LAUNCHER_SCRATCH_H
#define PYNOX_LAUNCHER_SCRATCH_H

#include <stddef.h>

/* The environment variable that tells pynox where to name its scratch directory to
 * the helper: "FD:PID", the pipe's write end and the launcher's own process id. */
#define SCRATCH_HELPER_VARIABLE "PYNOX_SCRATCH_HELPER"

/* The helper's pipe: ends[0] (close-on-exec) for the helper, ends[1] for pynox.
 * Returns 0, or -1 with nothing open. */
int scratch_helper_pipe(int ends[2]);

/* Forks the helper on the pipe's read end, and closes that end here. The helper
 * leaves this process's session and outlives it; nobody waits for it. */
void scratch_helper_spawn(int read_end);

/* "PYNOX_SCRATCH_HELPER=FD:PID" into entry: the write end and the process that will
 * exec the interpreter. Returns 1, or 0 if it does not fit. */
int scratch_helper_entry(char *entry, size_t size, int write_end, long pid);

#endif
