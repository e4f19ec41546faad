/* The launcher as the supervisor of a run: a wall-clock limit and the run's end,
 * without a second interpreter. */
#ifndef PYNOX_LAUNCHER_SUPERVISE_H
#define PYNOX_LAUNCHER_SUPERVISE_H

#include <stddef.h>

/* "FD:PID": the pipe on which pynox tells its deadline, and this process's id. */
#define SUPERVISOR_VARIABLE "PYNOX_SUPERVISOR"

/* Forks. In the child, returns 1 with the variable's entry in entry (the child then
 * execs the interpreter), and, with *helper set, the scratch helper's entry in
 * helper_entry (launcher_scratch.h); returns 0 in this process if it cannot
 * supervise (nothing was forked). This process, the supervisor, never returns: it
 * starts the scratch helper, waits for the child, enforces the deadline pynox sends,
 * and ends as the child ended. Both entries are `size` bytes. */
int supervise(char *entry, char *helper_entry, size_t size, int *helper);

#endif
