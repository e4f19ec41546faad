/* The launcher as the supervisor of a run: a wall-clock limit and the run's end,
 * without a second interpreter. */
#ifndef PYNOX_LAUNCHER_SUPERVISE_H
#define PYNOX_LAUNCHER_SUPERVISE_H

#include <stddef.h>

/* "FD:PID": the pipe on which pynox tells its deadline, and this process's id. */
#define SUPERVISOR_VARIABLE "PYNOX_SUPERVISOR"

/* Forks. In the child, returns 1 with the variable's entry in entry (the child then
 * execs the interpreter); returns 0 in this process if it cannot supervise (nothing
 * was forked). This process, the supervisor, never returns: it waits for the child,
 * enforces the deadline pynox sends, and ends as the child ended. */
int supervise(char *entry, size_t size);

#endif
