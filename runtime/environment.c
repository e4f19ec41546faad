/* Wipe the environment block the kernel put on the stack at exec.
 *
 * The supervisor starts with the user's whole environment; a sandboxed
 * program sees only what its policy allows through os.environ, but the
 * original strings stay in memory, where ctypes could read them. This
 * overwrites them in place: /proc/self/stat gives the block's bounds.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Fields 50 and 51 of /proc/self/stat (env_start, env_end), counted from 1;
 * the second field is the command name in parentheses, which may hold spaces. */
#define STAT_FIELD_ENV_START 50

int pynox_scrub_environment_block(char *err, size_t err_len)
{
    char buffer[4096];
    FILE *file = fopen("/proc/self/stat", "re");
    if (file == NULL)
        return pynox_fail(err, err_len, "cannot read /proc/self/stat: %s", strerror(errno));
    size_t length = fread(buffer, 1, sizeof buffer - 1, file);
    int read_error = ferror(file);
    if (fclose(file) != 0 || read_error || length == 0)
        return pynox_fail(err, err_len, "cannot read /proc/self/stat");
    buffer[length] = '\0';

    const char *cursor = strrchr(buffer, ')');
    if (cursor == NULL)
        return pynox_fail(err, err_len, "/proc/self/stat has no command field");
    int field = 2;
    unsigned long env_start = 0;
    unsigned long env_end = 0;
    while (*cursor != '\0' && field < STAT_FIELD_ENV_START + 1) {
        if (*cursor == ' ') {
            field++;
            if (field == STAT_FIELD_ENV_START && sscanf(cursor + 1, "%lu %lu", &env_start,
                                                        &env_end) != 2)
                return pynox_fail(err, err_len, "/proc/self/stat has no environment bounds");
        }
        cursor++;
    }
    if (env_start == 0 || env_end < env_start)
        return pynox_fail(err, err_len, "/proc/self/stat gives no environment block");
    /* An empty block (a process started with no environment) has nothing to wipe. */
    memset((void *)env_start, 0, env_end - env_start);
    return 0;
}
