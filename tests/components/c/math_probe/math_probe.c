/* Test algorithm: the Rust math_probe (tests/components/algorithms) modes
 * 3-6 in C, to show the SDK's kernel language gives the same bytes and
 * picoseconds (see the Python port for what each mode does). */
#include "kernbench.h"

#include <math.h>
#include <string.h>

static void tour(uint64_t t_ptr, uint32_t n, int64_t ws) {
    uint32_t shape[2] = {1, n};
    kb_tensor x = kb_load_shape(t_ptr, shape, 2, KB_F16);
    kb_tensor row = kb_reduce(KB_RMAX, x, 0);
    kb_tensor zero = kb_sub(row, row);
    kb_tensor e = kb_unary(KB_EXP, zero);
    kb_tensor ones = kb_fill(n, KB_F16, 1.0);
    kb_tensor one = kb_mul(e, ones);
    kb_tensor mine = kb_div(row, one);
    kb_tensor acc = kb_cast(mine, KB_F32);
    kb_drop(x), kb_drop(row), kb_drop(zero), kb_drop(e), kb_drop(ones), kb_drop(one);
    kb_drop(mine);
    if (ws > 1) {
        kb_future f = kb_recv_async("W", n, KB_F16);
        kb_send_addr("E", t_ptr, n, KB_F16);
        kb_tensor current = kb_wait(f);
        for (int64_t step = 1; step < ws; step++) {
            kb_tensor wide = kb_cast(current, KB_F32);
            kb_tensor sum = kb_add(acc, wide);
            kb_drop(acc), kb_drop(wide);
            acc = sum;
            if (step + 1 < ws) {
                kb_future g = kb_recv_async("W", n, KB_F16);
                kb_send("E", current);
                kb_tensor next = kb_wait(g);
                kb_drop(current);
                current = next;
            }
        }
        kb_drop(current);
    }
    kb_tensor out = kb_cast(acc, KB_F16);
    kb_store(t_ptr, out);
    kb_drop(acc), kb_drop(out);
}

void kb_kernel(uint64_t t_ptr, const int64_t *args, size_t nargs) {
    (void)nargs;
    uint32_t n = (uint32_t)args[0];
    int64_t ws = args[1], mode = args[2];
    if (mode == 6) {
        tour(t_ptr, n, ws);
        return;
    }
    uint32_t d = (uint32_t)sqrt((double)n);
    uint32_t shape[2] = {d, d};
    kb_tensor x = kb_load_shape(t_ptr, shape, 2, KB_F16);
    kb_tensor y;
    if (mode == 3) {
        kb_tensor sq = kb_gemm(x, x, KB_F32);
        y = kb_cast(sq, KB_F16);
        kb_drop(sq);
    } else {
        y = kb_composite(mode == 4 ? KB_GEMM_ACC : KB_GEMM_BIAS, x, x, &x, KB_F16);
    }
    kb_store(t_ptr, y);
    kb_drop(x), kb_drop(y);
}

size_t kb_kernel_args(uint32_t world_size, uint64_t n_elem, uint32_t cube_w, uint32_t cube_h,
                      int64_t *out) {
    (void)cube_w, (void)cube_h;
    out[0] = (int64_t)n_elem;
    out[1] = world_size;
    out[2] = 0;
    return 3;
}

long kb_kernel_args_with(uint32_t world_size, uint64_t n_elem, uint32_t cube_w, uint32_t cube_h,
                         const kb_param *params, size_t nparams, int64_t *out, char *err,
                         size_t errlen) {
    static const char *const known[] = {"kernel_mode", NULL};
    if (kb_params_unknown(params, nparams, known, err, errlen)) return -1;
    long n = (long)kb_kernel_args(world_size, n_elem, cube_w, cube_h, out);
    for (size_t i = 0; i < nparams; i++) {
        if (strcmp(params[i].name, "kernel_mode") == 0 && params[i].kind == KB_PARAM_INT) {
            out[2] = params[i].i;
        }
    }
    return n;
}
