/* Hello world (seed 003 §1), in C: send your tile east, receive the west
 * neighbour's and store it in place of your own. */
#include "kernbench.h"

void kb_kernel(uint64_t t_ptr, const int64_t *args, size_t nargs) {
    (void)nargs;
    uint32_t n_elem = (uint32_t)args[0];
    uint64_t pe_addr = kb_pe_tile_addr(t_ptr, n_elem, KB_F16);
    kb_tensor src = kb_load(pe_addr, n_elem, KB_F16);
    kb_send("E", src);
    kb_tensor recv = kb_recv("W", n_elem, KB_F16);
    kb_store(pe_addr, recv);
    kb_drop(src);
    kb_drop(recv);
}

size_t kb_kernel_args(uint32_t world_size, uint64_t n_elem, uint32_t cube_w, uint32_t cube_h,
                      int64_t *out) {
    (void)world_size;
    (void)cube_w;
    (void)cube_h;
    out[0] = (int64_t)n_elem;
    return 1;
}
