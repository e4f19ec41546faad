/* The helper that removes a run's scratch directory once the run's process ends. */
#ifndef PYNOX_LAUNCHER_SCRATCH_H
#define PYNOX_LAUNCHER_SCRATCH_H

#include <stddef.h>

/* The environment variable that tells pynox where to name its scratch directory to
 * the helper: "FD:PID", the pipe's write end and the launcher's own process id. */
#define SCRATCH_HELPER_VARIABLE "PYNOX_SCRATCH_HELPER"

/* Starts the helper, detached from this process, and writes the variable's entry
 * ("PYNOX_SCRATCH_HELPER=FD:PID") into entry. Returns 1 if it did, 0 if there is no
 * helper (pynox then starts one of its own). */
int scratch_helper_start(char *entry, size_t size);

#endif
