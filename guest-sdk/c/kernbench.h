/* KernBench guest SDK for C: write a collective algorithm as two
 * functions, kb_kernel and kb_kernel_args, against the kernel language
 * below (seed 003 §4). Build with `kernbench-host build my_algo.c -o
 * my_algo.wasm`: it generates the bindings of the WIT world
 * `algorithm-outputs`, compiles with clang for wasm32-wasi (Debian: clang, lld,
 * wasi-libc, libclang-rt-dev-wasm32) and makes the component.
 *
 * Work-issuing calls return at once; the work runs on the PE's DMA / MATH
 * engines in simulated time. Every tensor a call returns is owned by the
 * kernel: kb_drop() it when done (dropping a received tensor frees its
 * IPCQ slot). A host-side error (unknown direction, bad address, shape
 * mismatch) aborts the kernel with a message naming the PE and the call.
 */
#ifndef KERNBENCH_H
#define KERNBENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "algorithm_outputs.h"

/* The WIT's types.dtype, case by case (its index). */
typedef enum {
    KB_F16 = 0,
    KB_BF16 = 1,
    KB_F32 = 2,
    KB_I32 = 3,
    KB_I8 = 4,
    KB_U8 = 5,
    KB_U32 = 6,
    KB_I64 = 7,
    KB_U64 = 8,
    KB_F64 = 9
} kb_dtype;

/* A tensor handle in PE-visible memory; the bytes stay in the simulator. */
typedef struct {
    kernbench_sim_tl_own_tensor_t handle;
} kb_tensor;

/* The most kernel arguments kb_kernel_args may return. */
#define KB_MAX_ARGS 64

/* ---- what an algorithm defines ----------------------------------------- */

/* The kernel, run on every participating PE. `args` are kb_kernel_args'
 * values followed by (sip_rank, sip_topo_kind, sip_topo_w, sip_topo_h). */
void kb_kernel(uint64_t t_ptr, const int64_t *args, size_t nargs);

/* The kernel's arguments (seed ADR-0050 D2): write up to KB_MAX_ARGS values
 * into `out`, return how many. */
size_t kb_kernel_args(uint32_t world_size, uint64_t n_elem, uint32_t cube_w, uint32_t cube_h,
                      int64_t *out);

/* ---- optional (weak defaults in kernbench.c) ----------------------------- */

/* One ccl.yaml parameter (`chunk_size`, `reduce_op`, `kernel_*`). */
typedef struct {
    const char *name;
    enum { KB_PARAM_INT, KB_PARAM_FLOAT, KB_PARAM_TEXT, KB_PARAM_FLAG } kind;
    int64_t i;
    double f;
    const char *text;
    bool flag;
} kb_param;

/* kb_kernel_args with the ccl.yaml parameters. Return the argument count,
 * or -1 after writing a message into `err` (`errlen` bytes) to refuse them.
 * Default: kb_kernel_args, refusing any parameter. kb_params_unknown()
 * helps write the refusal. */
long kb_kernel_args_with(uint32_t world_size, uint64_t n_elem, uint32_t cube_w, uint32_t cube_h,
                         const kb_param *params, size_t nparams, int64_t *out, char *err,
                         size_t errlen);

/* The collectives (the WIT's ccl.collective) and reductions (ccl.red-op). */
enum { KB_ALL_REDUCE, KB_BROADCAST, KB_REDUCE, KB_ALL_GATHER, KB_REDUCE_SCATTER, KB_ALL_TO_ALL };
enum { KB_OP_SUM, KB_OP_PROD, KB_OP_MAX, KB_OP_MIN, KB_OP_AVG, KB_OP_PREMUL_SUM };

/* One collective call (the WIT's ccl.call); dtype is a kb_dtype. */
typedef struct {
    uint8_t collective;
    uint8_t dtype;
    uint8_t op;
    uint32_t root;
    uint64_t block;
    uint32_t world_size;
    uint32_t cube_w;
    uint32_t cube_h;
} kb_call;

/* The collectives this algorithm implements (KB_* values) into `out` (room
 * for 7); return how many. Default: KB_ALL_REDUCE only. */
size_t kb_collectives(uint8_t *out);

/* The kernel's arguments for one call with the ccl.yaml parameters: the
 * count, or -1 after writing a message into `err` to refuse the call.
 * Default: kb_kernel_args_with for an f16 sum all_reduce, a refusal for
 * anything else. */
long kb_kernel_args_for(const kb_call *call, const kb_param *params, size_t nparams, int64_t *out,
                        char *err, size_t errlen);

/* Write "unknown parameter X (this algorithm takes A, B)" into `err` for
 * the first of `params` not named in `known` (NULL-terminated); return
 * true if there is one. */
bool kb_params_unknown(const kb_param *params, size_t nparams, const char *const *known, char *err,
                       size_t errlen);

/* TOPO_NAME_TO_KIND: set *kind and return true for a known SIP topology
 * name. Default: the standard kinds (ring_1d 0, torus_2d 1,
 * mesh_2d_no_wrap 2). */
bool kb_topo_name_to_kind(const char *name, int32_t *kind);

/* Those of KB_ALL_REDUCE, KB_BROADCAST and KB_REDUCE whose kernel reads its
 * input at t_ptr and writes its result at kb_out_ptr() (the WIT's
 * `out-of-place` export): their calls get the output's address after the
 * host's four values, and nccl-tests' out-of-place form runs. Write them
 * into `out` (room for 3); return how many. Default: none (they run in
 * place at t_ptr). */
size_t kb_out_of_place(uint8_t *out);

/* Where the kernel writes its result: the output address the host appends
 * after its four values (args[n_own + 4]) for a collective with an output
 * of its own, else t_ptr. `n_own`: the count kb_kernel_args* returned. */
uint64_t kb_out_ptr(uint64_t t_ptr, const int64_t *args, size_t nargs, size_t n_own);

/* ---- the kernel language --------------------------------------------------- */

/* axis 0: this PE's index in its cube; axis 1: the cube index. */
int64_t kb_program_id(uint32_t axis);
/* axis 0: PEs per cube; axis 1: cubes per SIP. */
int64_t kb_num_programs(uint32_t axis);

/* DMA read of `n` elements (a 1-D tensor) at `addr` into TCM. */
kb_tensor kb_load(uint64_t addr, uint32_t n, kb_dtype dtype);
/* The same with a shape of `rank` dimensions. */
kb_tensor kb_load_shape(uint64_t addr, const uint32_t *shape, size_t rank, kb_dtype dtype);
/* DMA write of `value` to `addr`. */
void kb_store(uint64_t addr, kb_tensor value);
/* Send `value` to the neighbour in `dir` (blocks while its slots are full). */
void kb_send(const char *dir, kb_tensor value);
/* Receive `n` elements from `dir` (NULL: round-robin over every direction). */
kb_tensor kb_recv(const char *dir, uint32_t n, kb_dtype dtype);
/* Receive and copy to `dst_addr`; the slot is freed once the copy is done. */
kb_tensor kb_recv_into(const char *dir, uint32_t n, kb_dtype dtype, uint64_t dst_addr);

/* Send `n` elements straight from memory at `src_addr` (no load first);
 * the DMA reads them when its transfer starts. */
void kb_send_addr(const char *dir, uint64_t src_addr, uint32_t n, kb_dtype dtype);

/* A receive in progress (kb_recv_async); kb_wait gives its tensor. A future
 * never waited for fails the kernel when it ends. */
typedef struct {
    kernbench_sim_tl_own_recv_future_t handle;
} kb_future;
kb_future kb_recv_async(const char *dir, uint32_t n, kb_dtype dtype);
kb_tensor kb_wait(kb_future f);

/* Element-wise on the MATH unit; shapes and dtypes must match. */
kb_tensor kb_add(kb_tensor a, kb_tensor b);
kb_tensor kb_sub(kb_tensor a, kb_tensor b);
kb_tensor kb_mul(kb_tensor a, kb_tensor b);
kb_tensor kb_max(kb_tensor a, kb_tensor b);
kb_tensor kb_min(kb_tensor a, kb_tensor b);
kb_tensor kb_div(kb_tensor a, kb_tensor b);
kb_tensor kb_scale(kb_tensor a, double factor);

typedef enum { KB_NEG, KB_ABS, KB_EXP, KB_LOG, KB_SQRT, KB_RELU, KB_RECIP } kb_unary_op;
typedef enum { KB_SUM, KB_RMAX, KB_RMIN } kb_reduce_op;
typedef enum { KB_GEMM, KB_GEMM_ACC, KB_GEMM_BIAS, KB_GEMM_RELU, KB_GEMM_BIAS_RELU } kb_composite_op;
/* `op(a)` element-wise, rounded once. */
kb_tensor kb_unary(kb_unary_op op, kb_tensor a);
/* `a` converted to `dtype`. */
kb_tensor kb_cast(kb_tensor a, kb_dtype dtype);
/* `n` elements (a 1-D tensor) of `dtype` in TCM, every one `value`
 * converted as kb_cast converts (kernbench:sim 0.8.1). */
kb_tensor kb_fill(uint32_t n, kb_dtype dtype, double value);
/* The same with a shape of `rank` dimensions. */
kb_tensor kb_fill_shape(const uint32_t *shape, size_t rank, kb_dtype dtype, double value);
/* `op` over `axis` of `a` (the axis dropped). */
kb_tensor kb_reduce(kb_reduce_op op, kb_tensor a, uint32_t axis);
/* `a [m, k] x b [k, n]` on the matrix unit, rounded once to `out`. */
kb_tensor kb_gemm(kb_tensor a, kb_tensor b, kb_dtype out);
/* The GEMM then `op`'s epilogue with `c` (NULL for gemm / gemm-relu):
 * the seed's tl.composite. */
kb_tensor kb_composite(kb_composite_op op, kb_tensor a, kb_tensor b, const kb_tensor *c,
                       kb_dtype out);

/* Give the handle back (a received tensor's slot is freed once no issued
 * command still reads it). */
void kb_drop(kb_tensor t);

uint64_t kb_tensor_addr(kb_tensor t);
uint64_t kb_tensor_nbytes(kb_tensor t);
/* Simulated time of this PE in picoseconds. */
uint64_t kb_now_ps(void);
/* A line for the kernel trace, printed with the PE's name. */
void kb_log(const char *msg);

/* Bytes per element. */
size_t kb_itemsize(kb_dtype dtype);
/* Whether the dtype holds integers (division truncates). */
int kb_is_integer(kb_dtype dtype);
/* The seed kernels' tile of this PE: t_ptr + rank * n_elem * itemsize, with
 * rank = cube_id * pes_per_cube + local_pe (ADR-0022). */
uint64_t kb_pe_tile_addr(uint64_t t_ptr, uint64_t n_elem, kb_dtype dtype);

#endif
