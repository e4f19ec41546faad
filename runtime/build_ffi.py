"""Write the C source of the cffi (API mode) extension ``pynox._core``.

CMake runs this at configure time and compiles its output together with the
sandbox core, so the extension is an ordinary module built for one target.
"""

from __future__ import annotations

import sys
from pathlib import Path

import cffi

CDEF = """
struct pynox_policy {
    const char *const *read_paths;
    size_t read_count;
    const char *const *write_paths;
    size_t write_count;
    const int *keep_fds;
    size_t keep_fd_count;
    int allow_network;
    long long memory_bytes;
    long long max_file_size;
    int new_session;
    int own_group;
    int parent_pid;
    int paths_resolved;
    const char *scratch_path;
};
int pynox_sandbox_apply(const struct pynox_policy *base, const struct pynox_policy *policy,
                        char *err, size_t err_len);

struct pynox_prepared {
    int ready;
    int rulesets[2];
    unsigned long long handled_fs;
};
int pynox_sandbox_prepare(const struct pynox_policy *base, struct pynox_prepared *prepared,
                          char *err, size_t err_len);
int pynox_sandbox_share_filter(char *err, size_t err_len);
int pynox_sandbox_finish(struct pynox_prepared *prepared, const struct pynox_policy *base,
                         const struct pynox_policy *policy, char *err, size_t err_len);

struct pynox_probe {
    int landlock_abi;
    int seccomp_filter;
    int no_new_privs;
    int pidfd;
    int capabilities;
};
void pynox_probe_kernel(struct pynox_probe *out);
int pynox_limit_landlock_abi(int abi);

enum pynox_filter_part { PYNOX_FILTER_WHOLE, PYNOX_FILTER_SHARED, PYNOX_FILTER_OWN };
struct pynox_seccomp_rule {
    unsigned int first;
    unsigned int last;
    int denied;
    unsigned int action;
};
int pynox_seccomp_rules(const struct pynox_policy *policy, int merged, int part,
                        struct pynox_seccomp_rule *rules, size_t capacity, char *err,
                        size_t err_len);
int pynox_scrub_environment_block(char *err, size_t err_len);
"""


def main(output: str) -> None:
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    ffi.set_source("pynox._core", '#include "sandbox.h"')
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    ffi.emit_c_code(output)


if __name__ == "__main__":
    main(sys.argv[1])
