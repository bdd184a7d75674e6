/* The KernBench C SDK: the kernel language over the generated bindings,
 * and the world's exports calling the algorithm's kb_* functions (see
 * kernbench.h). */
#include "kernbench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the kernel language ------------------------------------------------ */

static algorithm_outputs_string_t str(const char *s) {
    algorithm_outputs_string_t out = {(uint8_t *)s, strlen(s)};
    return out;
}

static kernbench_sim_tl_borrow_tensor_t borrow(kb_tensor t) {
    return kernbench_sim_tl_borrow_tensor(t.handle);
}

static kb_tensor wrap(kernbench_sim_tl_own_tensor_t h) {
    kb_tensor t = {h};
    return t;
}

int64_t kb_program_id(uint32_t axis) { return kernbench_sim_tl_program_id(axis); }
int64_t kb_num_programs(uint32_t axis) { return kernbench_sim_tl_num_programs(axis); }

kb_tensor kb_load_shape(uint64_t addr, const uint32_t *shape, size_t rank, kb_dtype dtype) {
    algorithm_outputs_list_u32_t s = {(uint32_t *)shape, rank};
    return wrap(kernbench_sim_tl_load(addr, &s, (kernbench_sim_tl_dtype_t)dtype));
}

kb_tensor kb_load(uint64_t addr, uint32_t n, kb_dtype dtype) {
    return kb_load_shape(addr, &n, 1, dtype);
}

void kb_store(uint64_t addr, kb_tensor value) { kernbench_sim_tl_store(addr, borrow(value)); }

void kb_send(const char *dir, kb_tensor value) {
    algorithm_outputs_string_t d = str(dir);
    kernbench_sim_tl_send(&d, borrow(value));
}

kb_tensor kb_recv(const char *dir, uint32_t n, kb_dtype dtype) {
    algorithm_outputs_string_t d;
    algorithm_outputs_list_u32_t s = {&n, 1};
    if (dir) d = str(dir);
    return wrap(kernbench_sim_tl_recv(dir ? &d : NULL, &s, (kernbench_sim_tl_dtype_t)dtype));
}

kb_tensor kb_recv_into(const char *dir, uint32_t n, kb_dtype dtype, uint64_t dst_addr) {
    algorithm_outputs_string_t d;
    algorithm_outputs_list_u32_t s = {&n, 1};
    if (dir) d = str(dir);
    return wrap(kernbench_sim_tl_recv_into(dir ? &d : NULL, &s, (kernbench_sim_tl_dtype_t)dtype,
                                           dst_addr));
}

void kb_send_addr(const char *dir, uint64_t src_addr, uint32_t n, kb_dtype dtype) {
    algorithm_outputs_string_t d = str(dir);
    algorithm_outputs_list_u32_t s = {&n, 1};
    kernbench_sim_tl_send_addr(&d, src_addr, &s, (kernbench_sim_tl_dtype_t)dtype);
}

kb_future kb_recv_async(const char *dir, uint32_t n, kb_dtype dtype) {
    algorithm_outputs_string_t d;
    algorithm_outputs_list_u32_t s = {&n, 1};
    if (dir) d = str(dir);
    kb_future f = {kernbench_sim_tl_recv_async(dir ? &d : NULL, &s, (kernbench_sim_tl_dtype_t)dtype)};
    return f;
}

kb_tensor kb_wait(kb_future f) {
    return wrap(kernbench_sim_tl_wait(f.handle));
}

static kb_tensor binary(kernbench_sim_tl_binop_t op, kb_tensor a, kb_tensor b) {
    return wrap(kernbench_sim_tl_binary(op, borrow(a), borrow(b)));
}

kb_tensor kb_add(kb_tensor a, kb_tensor b) { return wrap(kernbench_sim_tl_add(borrow(a), borrow(b))); }
kb_tensor kb_sub(kb_tensor a, kb_tensor b) { return binary(KERNBENCH_SIM_TL_BINOP_SUB, a, b); }
kb_tensor kb_mul(kb_tensor a, kb_tensor b) { return binary(KERNBENCH_SIM_TL_BINOP_MUL, a, b); }
kb_tensor kb_max(kb_tensor a, kb_tensor b) { return binary(KERNBENCH_SIM_TL_BINOP_MAX, a, b); }
kb_tensor kb_min(kb_tensor a, kb_tensor b) { return binary(KERNBENCH_SIM_TL_BINOP_MIN, a, b); }
kb_tensor kb_div(kb_tensor a, kb_tensor b) { return binary(KERNBENCH_SIM_TL_BINOP_DIV, a, b); }
kb_tensor kb_scale(kb_tensor a, double f) { return wrap(kernbench_sim_tl_scale(borrow(a), f)); }

kb_tensor kb_unary(kb_unary_op op, kb_tensor a) {
    return wrap(kernbench_sim_tl_unary((kernbench_sim_tl_unary_op_t)op, borrow(a)));
}
kb_tensor kb_cast(kb_tensor a, kb_dtype dtype) {
    return wrap(kernbench_sim_tl_cast(borrow(a), (kernbench_sim_tl_dtype_t)dtype));
}
kb_tensor kb_fill_shape(const uint32_t *shape, size_t rank, kb_dtype dtype, double value) {
    algorithm_outputs_list_u32_t s = {(uint32_t *)shape, rank};
    return wrap(kernbench_sim_tl_fill(&s, (kernbench_sim_tl_dtype_t)dtype, value));
}
kb_tensor kb_fill(uint32_t n, kb_dtype dtype, double value) {
    return kb_fill_shape(&n, 1, dtype, value);
}
kb_tensor kb_reduce(kb_reduce_op op, kb_tensor a, uint32_t axis) {
    return wrap(kernbench_sim_tl_reduce((kernbench_sim_tl_reduce_op_t)op, borrow(a), axis));
}
kb_tensor kb_gemm(kb_tensor a, kb_tensor b, kb_dtype out) {
    return wrap(kernbench_sim_tl_gemm(borrow(a), borrow(b), (kernbench_sim_tl_dtype_t)out));
}
kb_tensor kb_composite(kb_composite_op op, kb_tensor a, kb_tensor b, const kb_tensor *c,
                       kb_dtype out) {
    kernbench_sim_tl_borrow_tensor_t bc;
    if (c) bc = borrow(*c);
    return wrap(kernbench_sim_tl_composite((kernbench_sim_tl_composite_op_t)op, borrow(a),
                                           borrow(b), c ? &bc : NULL,
                                           (kernbench_sim_tl_dtype_t)out));
}

void kb_drop(kb_tensor t) { kernbench_sim_tl_tensor_drop_own(t.handle); }

uint64_t kb_tensor_addr(kb_tensor t) { return kernbench_sim_tl_method_tensor_addr(borrow(t)); }
uint64_t kb_tensor_nbytes(kb_tensor t) { return kernbench_sim_tl_method_tensor_nbytes(borrow(t)); }
uint64_t kb_now_ps(void) { return kernbench_sim_tl_now_ps(); }

void kb_log(const char *msg) {
    algorithm_outputs_string_t m = str(msg);
    kernbench_sim_tl_log(&m);
}

#include "kernbench_common.c"

/* ---- the world's exports ------------------------------------------------------ */

static char *cstr(const algorithm_outputs_string_t *s) {
    char *out = malloc(s->len + 1);
    memcpy(out, s->ptr, s->len);
    out[s->len] = 0;
    return out;
}

static void ret_args(const int64_t *vals, size_t n, algorithm_outputs_list_s64_t *ret) {
    ret->ptr = malloc(n ? n * sizeof(int64_t) : 1);
    memcpy(ret->ptr, vals, n * sizeof(int64_t));
    ret->len = n;
}

void exports_algorithm_outputs_kernel(uint64_t t_ptr, algorithm_outputs_list_s64_t *args) {
    kb_kernel(t_ptr, args->ptr, args->len);
    algorithm_outputs_list_s64_free(args);
}

void exports_algorithm_outputs_kernel_args(uint32_t world_size, uint64_t n_elem, uint32_t cube_w,
                                        uint32_t cube_h, algorithm_outputs_list_s64_t *ret) {
    int64_t out[KB_MAX_ARGS];
    size_t n = kb_kernel_args(world_size, n_elem, cube_w, cube_h, out);
    ret_args(out, n > KB_MAX_ARGS ? KB_MAX_ARGS : n, ret);
}

/* The WIT parameters as kb_params (free them with params_free). */
static kb_param *params_in(algorithm_outputs_list_param_t *params) {
    size_t np = params->len;
    kb_param *ps = calloc(np ? np : 1, sizeof(kb_param));
    for (size_t i = 0; i < np; i++) {
        kernbench_sim_ccl_param_t *p = &params->ptr[i];
        ps[i].name = cstr(&p->name);
        switch (p->value.tag) {
        case KERNBENCH_SIM_CCL_PARAM_VALUE_INT: ps[i].kind = KB_PARAM_INT; ps[i].i = p->value.val.int_; break;
        case KERNBENCH_SIM_CCL_PARAM_VALUE_FLOAT: ps[i].kind = KB_PARAM_FLOAT; ps[i].f = p->value.val.float_; break;
        case KERNBENCH_SIM_CCL_PARAM_VALUE_TEXT: ps[i].kind = KB_PARAM_TEXT; ps[i].text = cstr(&p->value.val.text); break;
        default: ps[i].kind = KB_PARAM_FLAG; ps[i].flag = p->value.val.flag; break;
        }
    }
    return ps;
}

static void params_free(kb_param *ps, size_t np) {
    for (size_t i = 0; i < np; i++) {
        free((void *)ps[i].name);
        if (ps[i].kind == KB_PARAM_TEXT) free((void *)ps[i].text);
    }
    free(ps);
}

/* The result of an args export: `n` args in `out`, or the refusal `msg`. */
static bool args_result(long n, const int64_t *out, const char *msg, const char *fallback,
                        algorithm_outputs_list_s64_t *ret, algorithm_outputs_string_t *err) {
    if (n < 0) {
        algorithm_outputs_string_dup(err, msg[0] ? msg : fallback);
        return false;
    }
    ret_args(out, (size_t)n > KB_MAX_ARGS ? KB_MAX_ARGS : (size_t)n, ret);
    return true;
}

bool exports_algorithm_outputs_kernel_args_with(uint32_t world_size, uint64_t n_elem,
                                             uint32_t cube_w, uint32_t cube_h,
                                             algorithm_outputs_list_param_t *params,
                                             algorithm_outputs_list_s64_t *ret,
                                             algorithm_outputs_string_t *err) {
    size_t np = params->len;
    kb_param *ps = params_in(params);
    int64_t out[KB_MAX_ARGS];
    char msg[512] = {0};
    long n = kb_kernel_args_with(world_size, n_elem, cube_w, cube_h, ps, np, out, msg, sizeof msg);
    params_free(ps, np);
    algorithm_outputs_list_param_free(params);
    return args_result(n, out, msg, "kernel_args_with refused the parameters", ret, err);
}

/* `n` collectives of `vals` (at most `max`) as a WIT list's ptr and len. */
static void ret_collectives(const uint8_t *vals, size_t n, size_t max, uint8_t **ptr,
                            size_t *len) {
    if (n > max) n = max;
    *ptr = malloc(n ? n : 1);
    memcpy(*ptr, vals, n);
    *len = n;
}

void exports_algorithm_outputs_collectives(algorithm_outputs_list_collective_t *ret) {
    uint8_t out[8];
    ret_collectives(out, kb_collectives(out), 7, &ret->ptr, &ret->len);
}

void exports_algorithm_outputs_out_of_place(algorithm_outputs_list_ccl_collective_t *ret) {
    uint8_t out[4];
    ret_collectives(out, kb_out_of_place(out), 3, &ret->ptr, &ret->len);
}

bool exports_algorithm_outputs_kernel_args_for(algorithm_outputs_call_t *call,
                                            algorithm_outputs_list_param_t *params,
                                            algorithm_outputs_list_s64_t *ret,
                                            algorithm_outputs_string_t *err) {
    kb_call c = {call->collective, call->dtype, call->op, call->root,
                 call->block, call->world_size, call->cube_w, call->cube_h};
    size_t np = params->len;
    kb_param *ps = params_in(params);
    int64_t out[KB_MAX_ARGS];
    char msg[512] = {0};
    long n = kb_kernel_args_for(&c, ps, np, out, msg, sizeof msg);
    params_free(ps, np);
    algorithm_outputs_list_param_free(params);
    return args_result(n, out, msg, "kernel_args_for refused the call", ret, err);
}

bool exports_algorithm_outputs_topo_name_to_kind(algorithm_outputs_string_t *name, int32_t *ret) {
    char *n = cstr(name);
    bool known = kb_topo_name_to_kind(n, ret);
    free(n);
    algorithm_outputs_string_free(name);
    return known;
}

void exports_algorithm_outputs_entry_defaults(algorithm_outputs_entry_defaults_t *ret) {
    memset(ret, 0, sizeof *ret);
}

bool exports_algorithm_outputs_neighbors(uint32_t rank, uint32_t world_size,
                                      algorithm_outputs_list_link_t *neighbor_map,
                                      algorithm_outputs_list_link_t *ret) {
    (void)rank;
    (void)world_size;
    (void)ret;
    algorithm_outputs_list_link_free(neighbor_map);
    return false;
}
