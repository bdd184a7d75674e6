/* The KernBench C SDK's native mock: run a C algorithm's kb_kernel on
 * several ranks, one POSIX thread each, for millisecond unit tests, as the
 * Python SDK's kernbench/mock.py and the Rust SDK's mock runner do.
 *
 * What it is: the kernel language of kernbench.h implemented natively
 * (kernbench_mock.c) over in-memory queues. Each rank is one SIP whose only
 * PE is (cube 0, pe 0): kb_program_id() is 0, kb_num_programs() 1, so
 * kb_pe_tile_addr(t_ptr, ...) is t_ptr. Rank r's memory is inputs[r]
 * encoded in the dtype at KB_MOCK_T_PTR; anything outside it fails. Loads
 * and results of math live in per-rank scratch (addresses from
 * KB_MOCK_SCRATCH up). Sends go to the neighbour of the IPCQ table named by
 * `topology` (the host's builtin tables); a message holds one of its
 * direction's n_slots slots from kb_send until the receiver kb_drop()s the
 * tensor it got (kb_recv_into frees it at once), and kb_send blocks while
 * every slot is taken, so a kernel that keeps received tensors alive
 * deadlocks here as on the simulator. Math is computed in double and
 * rounded once to the dtype (round to nearest even; i32 rounds half away
 * from zero, saturating; i32 division truncates and x / 0 is 0).
 *
 * What it is not: a simulator. No timing (kb_now_ps() is 0), no DMA or
 * fabric, no memory other than the rank's shard, no neighbors() hook, one
 * PE per rank. Correctness only: run the real thing with kernbench-host.
 *
 * Errors: a failing call (unknown direction, access outside the shard,
 * shape mismatch, a tensor handle used after kb_drop, a recv_async future
 * never waited for, ...) stops that rank's thread and kb_mock_run returns
 * non-zero with "mock rank R failed: <message>". The other ranks give up as
 * soon as they block. A kb_send waiting for a free slot, or a kb_recv for
 * a message, fails as a deadlock after KB_MOCK_DEADLOCK_S seconds (an
 * environment variable, default 10; a recv also fails at once when its
 * peer has finished).
 *
 * Build (a project holding <name>.c, test_<name>.c and the SDK in
 * kernbench/):
 *
 *   cc -std=c11 -O1 -Wall -Wextra -pthread -I kernbench/mock -I kernbench \
 *      <name>.c kernbench/mock/kernbench_mock.c test_<name>.c -o test_<name>
 *   ./test_<name>
 *
 * (-I kernbench/mock first: it provides the stand-in algorithm_outputs.h.
 * kernbench/kernbench.c is not compiled: kernbench_mock.c replaces it, weak
 * defaults of the optional hooks included.) No -lm is needed. */
#ifndef KERNBENCH_MOCK_H
#define KERNBENCH_MOCK_H

#include <stddef.h>
#include <stdint.h>

#include "kernbench.h"

/* Where each rank's shard lives: the t_ptr the kernel is given. */
#define KB_MOCK_T_PTR 0x10000000ULL
/* The first address handed out for scratch tensors. */
#define KB_MOCK_SCRATCH 0x400000000000ULL

/* One mock run. Zero-initialise it and set what you need, e.g.
 *   kb_mock_config cfg = {.world_size = 4, .n_elem = 16, .dtype = KB_F16};
 */
typedef struct {
    uint32_t world_size; /* ranks, >= 1 */
    uint64_t n_elem;     /* elements per rank (the shard) */
    kb_dtype dtype;      /* of the shard */
    /* The IPCQ table: "ring_1d" (E, W; the default when NULL),
     * "ring_1d_unidir" (E), "torus_2d" / "mesh_2d" (E, W, S, N on a grid_w
     * x world_size/grid_w grid, rank = y * grid_w + x), "global_ring"
     * (global_E, global_W), "tree_binary" (P, C0, C1) or "none". */
    const char *topology;
    uint32_t grid_w;  /* 2-D tables: the grid's width; 0: isqrt(world_size) */
    uint32_t n_slots; /* slots per direction; 0: 4 */
    /* The kernel's own arguments. NULL: the runner calls
     * kb_kernel_args(world_size, n_elem, 1, 1, ...) itself. Either way it
     * appends (rank, topo_kind, grid_w, grid_h) as the host does: topo_kind
     * is the standard kind of `topology` (ring_1d 0, torus_2d 1, else 0, as
     * the Python mock), grid_w and grid_h are 0 but for 2-D tables. */
    const int64_t *kernel_args;
    size_t nargs;
} kb_mock_config;

/* Run kb_kernel on cfg->world_size ranks, rank r's shard holding the
 * cfg->n_elem values inputs[r] (encoded in cfg->dtype). Afterwards, when
 * `outputs` and outputs[r] are not NULL, outputs[r] gets rank r's shard
 * decoded (n_elem values; it may be inputs[r]). Returns 0 on success; else
 * non-zero with a message in `err` (`errlen` bytes, may be 0): 1 when a
 * rank failed ("mock rank R failed: ..."), 2 for a bad configuration.
 * Runs may be made one after another or from several threads at once. */
int kb_mock_run(const kb_mock_config *cfg, double *const *inputs, double *const *outputs,
                char *err, size_t errlen);

/* `v` rounded to `dtype` exactly as the mock stores it (for expected
 * values of non-integer tests). */
double kb_mock_round(double v, kb_dtype dtype);

#endif
