/* The JSON result of a captured run (`pynox --json`), written by the launcher.
 *
 * pynox computes, before the program starts, everything in the result that does not
 * depend on how the run goes (see pynox/engine/launcher_link.py): the result's text
 * with slots for the rest, the error object of a timeout, the names of signals and
 * the text of every hint. The launcher collects the program's output and pynox's
 * error report, and fills the slots once the program ended. The rules are those of
 * pynox/engine/supervisor.py (Capture) and pynox/engine/result.py, which write the
 * same result when pynox supervises a run itself.
 */
#ifndef PYNOX_LAUNCHER_RESULT_H
#define PYNOX_LAUNCHER_RESULT_H

#include <stddef.h>

struct text {
    const char *data;
    size_t length;
};

/* What pynox sent for the run's result. */
struct result_frame {
    size_t max_output;    /* bytes kept of each output stream */
    size_t report_limit;  /* the largest error report taken */
    struct text layout;   /* the result, with "\x01" and a letter where a value goes */
    struct text timeout_error;
    struct text stopped_error;  /* the same, when a stop signal had stopped the program */
    struct text signal_names;  /* one line per signal from 1; an empty line: no name */
    struct text hints;         /* netstring pairs: a kind, its text ("\0": the value) */
};

/* One output stream as the result keeps it: its head, and the last bytes it carried. */
struct capture {
    char *head;
    size_t head_length;
    char *ring;  /* the stream's last `share` bytes, written round */
    size_t share;
    size_t limit;
    unsigned long long seen;
    int truncated;
};

/* Reads a netstring, "LENGTH:BYTES", at *at in message; 0 and the field, or -1. */
int netstring(struct text message, size_t *at, struct text *field);

/* Whether text is word, whole. */
int text_is(struct text text, const char *word);

/* Line `number` (from 1) of lines separated by "\n"; empty if there is no such line. */
struct text numbered_line(struct text lines, int number);

/* 0, or -1 if there is no memory for it. */
int capture_init(struct capture *capture, size_t limit);
void capture_add(struct capture *capture, const char *data, size_t size);

/* How the run ended. */
struct run_end {
    int status;  /* as wait4 gives it */
    int timed_out;
    int stopped;  /* a stop signal had stopped the program when its time limit came */
    long duration_ns;
    /* Under a memory limit, how native code ends a program when an allocation fails: */
    int native_signal;  /* a signal it dies of then */
    int native_exit;    /* an exit with a failure status before Python saw the program end */
};

/* Writes the result to fd; returns the exit status `pynox --json` ends with. */
int write_result(int fd, const struct result_frame *frame, struct capture *out,
                 struct capture *err, struct capture *report, const struct run_end *end);

#endif
