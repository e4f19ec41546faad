/* The classic-BPF emitter behind the seccomp filter (see bpf.h). */
#include "bpf.h"

void pynox_bpf_init(struct pynox_bpf *prog)
{
    prog->len = 0;
    prog->broken = NULL;
}

size_t pynox_bpf_emit(struct pynox_bpf *prog, uint16_t code, uint8_t jt, uint8_t jf, uint32_t k)
{
    if (prog->len >= PYNOX_BPF_MAX_INSNS) {
        prog->broken = "the seccomp filter outgrew its instruction buffer";
        return PYNOX_BPF_MAX_INSNS;
    }
    prog->insns[prog->len] = (struct sock_filter){.code = code, .jt = jt, .jf = jf, .k = k};
    return prog->len++;
}

void pynox_bpf_ret(struct pynox_bpf *prog, uint32_t action)
{
    pynox_bpf_emit(prog, BPF_RET | BPF_K, 0, 0, action);
}

void pynox_bpf_load(struct pynox_bpf *prog, uint32_t offset)
{
    pynox_bpf_emit(prog, BPF_LD | BPF_W | BPF_ABS, 0, 0, offset);
}

void pynox_bpf_and(struct pynox_bpf *prog, uint32_t mask)
{
    pynox_bpf_emit(prog, BPF_ALU | BPF_AND | BPF_K, 0, 0, mask);
}

size_t pynox_bpf_begin_block(struct pynox_bpf *prog, uint32_t value)
{
    return pynox_bpf_emit(prog, BPF_JMP | BPF_JEQ | BPF_K, 0, 0, value);
}

void pynox_bpf_end_block(struct pynox_bpf *prog, size_t jeq_index)
{
    if (jeq_index >= prog->len) /* the JEQ itself overflowed */
        return;
    size_t skip = prog->len - jeq_index - 1;
    if (skip > UINT8_MAX) {
        prog->broken = "a seccomp filter block is longer than a BPF jump can skip";
        return;
    }
    prog->insns[jeq_index].jf = (uint8_t)skip;
}

void pynox_bpf_ret_by_set(struct pynox_bpf *prog, const struct pynox_bpf_set *sets,
                          size_t set_count, uint32_t other_action)
{
    /* Layout: the JEQs of every set, in order; RET other; then one RET per set.
     * A JEQ of set k jumps to that set's RET, past the JEQs after it. */
    size_t comparisons = 0;
    for (size_t k = 0; k < set_count; k++)
        comparisons += sets[k].count;
    if (comparisons + set_count > UINT8_MAX) {
        prog->broken = "a seccomp argument check has too many values for a BPF jump";
        return;
    }
    size_t emitted = 0;
    for (size_t k = 0; k < set_count; k++) {
        for (size_t i = 0; i < sets[k].count; i++, emitted++) {
            size_t ahead = comparisons - emitted + k; /* RET other, then the RETs before k's */
            pynox_bpf_emit(prog, BPF_JMP | BPF_JEQ | BPF_K, (uint8_t)ahead, 0, sets[k].values[i]);
        }
    }
    pynox_bpf_ret(prog, other_action);
    for (size_t k = 0; k < set_count; k++)
        pynox_bpf_ret(prog, sets[k].action);
}

void pynox_bpf_ret_if_one_of(struct pynox_bpf *prog, const uint32_t *values, size_t count,
                             uint32_t match_action, uint32_t other_action)
{
    const struct pynox_bpf_set match = {values, count, match_action};
    pynox_bpf_ret_by_set(prog, &match, 1, other_action);
}

void pynox_bpf_jump_here(struct pynox_bpf *prog, size_t ja_index)
{
    if (ja_index >= prog->len) /* the JA itself overflowed */
        return;
    if (prog->insns[ja_index].code != (BPF_JMP | BPF_JA)) {
        prog->broken = "a seccomp filter jump was patched at the wrong place";
        return;
    }
    prog->insns[ja_index].k = (uint32_t)(prog->len - ja_index - 1);
}
