/* Ring all-reduce, the seed's algorithm (seed 003 §2), in C: for
 * world_size - 1 steps send the current tile east and add the one received
 * from the west; forward what was received, so every rank's tile travels
 * the ring once; store the sum once. Parameter chunk_size (elements): the
 * tile in chunks of at most that many elements, one after another. */
#include "kernbench.h"

#include <stdio.h>

void kb_kernel(uint64_t t_ptr, const int64_t *args, size_t nargs) {
    uint64_t n_elem = (uint64_t)args[0], chunk = (uint64_t)args[2];
    uint32_t world_size = (uint32_t)args[1];
    uint64_t addr = kb_pe_tile_addr(t_ptr, n_elem, KB_F16);
    /* Out of place the sum goes to the output's tile (kb_out_of_place). */
    uint64_t out = kb_pe_tile_addr(kb_out_ptr(t_ptr, args, nargs, 3), n_elem, KB_F16);
    uint64_t n_chunks = chunk ? (n_elem + chunk - 1) / chunk : 1;
    if (n_chunks == 0) n_chunks = 1;
    uint64_t base = n_elem / n_chunks, extra = n_elem % n_chunks;
    for (uint64_t c = 0; c < n_chunks; c++) {
        uint32_t n = (uint32_t)(base + (c < extra ? 1 : 0));
        kb_tensor acc = kb_load(addr, n, KB_F16);
        kb_tensor current = acc;
        bool forwarding = false;
        for (uint32_t step = 1; step < world_size; step++) {
            kb_send("E", current);
            kb_tensor recv = kb_recv("W", n, KB_F16);
            kb_tensor sum = kb_add(acc, recv);
            kb_drop(acc);
            if (forwarding) kb_drop(current);
            acc = sum;
            current = recv; /* forward what was received, not the sum */
            forwarding = true;
        }
        if (forwarding) kb_drop(current);
        kb_store(out, acc);
        kb_drop(acc);
        addr += (uint64_t)n * 2;
        out += (uint64_t)n * 2;
    }
}

size_t kb_kernel_args(uint32_t world_size, uint64_t n_elem, uint32_t cube_w, uint32_t cube_h,
                      int64_t *out) {
    (void)cube_w;
    (void)cube_h;
    out[0] = (int64_t)n_elem;
    out[1] = world_size;
    out[2] = (int64_t)n_elem;
    return 3;
}

long kb_kernel_args_with(uint32_t world_size, uint64_t n_elem, uint32_t cube_w, uint32_t cube_h,
                         const kb_param *params, size_t nparams, int64_t *out, char *err,
                         size_t errlen) {
    static const char *const known[] = {"chunk_size", NULL};
    if (kb_params_unknown(params, nparams, known, err, errlen)) return -1;
    size_t n = kb_kernel_args(world_size, n_elem, cube_w, cube_h, out);
    for (size_t i = 0; i < nparams; i++) {
        if (params[i].kind != KB_PARAM_INT) {
            snprintf(err, errlen, "parameter chunk_size must be an integer");
            return -1;
        }
        if (params[i].i < 1) {
            snprintf(err, errlen, "chunk_size must be >= 1 element, got %lld", (long long)params[i].i);
            return -1;
        }
        out[2] = params[i].i < (int64_t)(n_elem ? n_elem : 1) ? params[i].i : (int64_t)(n_elem ? n_elem : 1);
    }
    return (long)n;
}

size_t kb_out_of_place(uint8_t *out) {
    out[0] = KB_ALL_REDUCE;
    return 1;
}
