/* A small classic-BPF emitter for seccomp filters.
 *
 * Programs are built forward, never by hand-counted jump tables. Every write
 * is bounds-checked: on overflow, or on a forward jump beyond BPF's 8-bit
 * offsets, the program is marked broken and must not be installed.
 */
#ifndef PYNOX_BPF_H
#define PYNOX_BPF_H

#include <linux/filter.h>
#include <stddef.h>
#include <stdint.h>

#define PYNOX_BPF_MAX_INSNS 1024

struct pynox_bpf {
    struct sock_filter insns[PYNOX_BPF_MAX_INSNS];
    size_t len;
    const char *broken; /* NULL, or why the program is unusable */
};

void pynox_bpf_init(struct pynox_bpf *prog);

/* Appends one instruction; returns its index (or the capacity on overflow). */
size_t pynox_bpf_emit(struct pynox_bpf *prog, uint16_t code, uint8_t jt, uint8_t jf, uint32_t k);

/* Shorthands for the instructions a seccomp filter uses. */
void pynox_bpf_ret(struct pynox_bpf *prog, uint32_t action);
void pynox_bpf_load(struct pynox_bpf *prog, uint32_t offset); /* A = 32-bit word at offset */
void pynox_bpf_and(struct pynox_bpf *prog, uint32_t mask);

/* Starts a block taken only when A == value: emits a JEQ whose "false" edge
 * skips the block. The block must end in RET on every path; close it with
 * pynox_bpf_end_block(), which patches the skip and checks its range. */
size_t pynox_bpf_begin_block(struct pynox_bpf *prog, uint32_t value);
void pynox_bpf_end_block(struct pynox_bpf *prog, size_t jeq_index);

/* Points the JA at ja_index to the next instruction to be emitted. */
void pynox_bpf_jump_here(struct pynox_bpf *prog, size_t ja_index);

/* A = argument word; RET match_action if A is one of values[0..count),
 * else RET other_action. Ends in RET on every path. */
void pynox_bpf_ret_if_one_of(struct pynox_bpf *prog, const uint32_t *values, size_t count,
                             uint32_t match_action, uint32_t other_action);

/* A set of values and what a filter returns for them (pynox_bpf_ret_by_set). */
struct pynox_bpf_set {
    const uint32_t *values;
    size_t count;
    uint32_t action;
};

/* A = argument word; RET the action of the first of sets[0..set_count) that holds A,
 * else RET other_action. Ends in RET on every path. */
void pynox_bpf_ret_by_set(struct pynox_bpf *prog, const struct pynox_bpf_set *sets,
                          size_t set_count, uint32_t other_action);

#endif
