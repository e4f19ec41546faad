/* The launcher as the supervisor of a run: a wall-clock limit, the run's end and, for
 * --json, its output and result, without a second interpreter. */
#ifndef PYNOX_LAUNCHER_SUPERVISE_H
#define PYNOX_LAUNCHER_SUPERVISE_H

#include <stddef.h>

#include "launcher_scratch.h"

/* "CONTROL,END:PID": the pipe on which pynox tells its deadline, the one on which the
 * program's process says Python saw the program to its end, and this process's id. */
#define SUPERVISOR_VARIABLE "PYNOX_SUPERVISOR"
/* "OUT,ERR,REPORT:PID": the write ends of the pipes a captured run writes into. */
#define CAPTURE_VARIABLE "PYNOX_CAPTURE"

/* The environment entries supervise() makes for the interpreter, "NAME=VALUE". */
struct supervision {
    char supervisor_entry[sizeof SUPERVISOR_VARIABLE + 48];
    char helper_entry[sizeof SCRATCH_HELPER_VARIABLE + 72];  /* the scratch helper's (launcher_scratch.h) */
    char capture_entry[sizeof CAPTURE_VARIABLE + 80];
    int helper;   /* whether helper_entry is set */
    int capture;  /* whether capture_entry is set */
};

/* Forks. In the child, returns 1 with the supervisor's entry set, and the others as
 * their flags say (the child then execs the interpreter); returns 0 in this process
 * if it cannot supervise (nothing was forked). With `capture` (the command line has
 * --json), it also makes the pipes for the run's output. This process, the
 * supervisor, never returns: it starts the scratch helper (which makes the run's
 * directory in tmpdir, TMPDIR's value or NULL: launcher_scratch.h), waits for the child,
 * enforces the deadline pynox sends, writes the result of a captured run, and ends as
 * the child ended. */
int supervise(struct supervision *entries, int capture, const char *tmpdir);

#endif
