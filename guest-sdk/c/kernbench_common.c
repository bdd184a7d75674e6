/* What the KernBench C SDK (kernbench.c, for wasm) and its native mock
 * (mock/kernbench_mock.c) share, #included by both: the helpers built on
 * the kernel language and the weak defaults of the optional hooks. */

size_t kb_itemsize(kb_dtype dtype) {
    switch (dtype) {
    case KB_I8:
    case KB_U8: return 1;
    case KB_F16:
    case KB_BF16: return 2;
    case KB_F32:
    case KB_I32:
    case KB_U32: return 4;
    default: return 8;
    }
}

int kb_is_integer(kb_dtype dtype) {
    return !(dtype == KB_F16 || dtype == KB_BF16 || dtype == KB_F32 || dtype == KB_F64);
}

uint64_t kb_pe_tile_addr(uint64_t t_ptr, uint64_t n_elem, kb_dtype dtype) {
    uint64_t rank = (uint64_t)(kb_program_id(1) * kb_num_programs(0) + kb_program_id(0));
    return t_ptr + rank * n_elem * kb_itemsize(dtype);
}

/* ---- optional hooks: weak defaults ------------------------------------------ */

bool kb_params_unknown(const kb_param *params, size_t nparams, const char *const *known, char *err,
                       size_t errlen) {
    for (size_t i = 0; i < nparams; i++) {
        bool ok = false;
        for (const char *const *k = known; k && *k; k++) ok = ok || strcmp(*k, params[i].name) == 0;
        if (ok) continue;
        size_t at = (size_t)snprintf(err, errlen, "unknown parameter %s (this algorithm takes ",
                                     params[i].name);
        if (!known || !*known) {
            snprintf(err + at, errlen > at ? errlen - at : 0, "none)");
            return true;
        }
        for (const char *const *k = known; *k; k++) {
            at += (size_t)snprintf(err + at, errlen > at ? errlen - at : 0, "%s%s", *k,
                                   k[1] ? ", " : ")");
        }
        return true;
    }
    return false;
}

__attribute__((weak)) long kb_kernel_args_with(uint32_t world_size, uint64_t n_elem,
                                               uint32_t cube_w, uint32_t cube_h,
                                               const kb_param *params, size_t nparams,
                                               int64_t *out, char *err, size_t errlen) {
    static const char *const none[] = {NULL};
    if (kb_params_unknown(params, nparams, none, err, errlen)) return -1;
    return (long)kb_kernel_args(world_size, n_elem, cube_w, cube_h, out);
}

__attribute__((weak)) size_t kb_out_of_place(uint8_t *out) {
    (void)out;
    return 0;
}

uint64_t kb_out_ptr(uint64_t t_ptr, const int64_t *args, size_t nargs, size_t n_own) {
    return nargs > n_own + 4 ? (uint64_t)args[n_own + 4] : t_ptr;
}

__attribute__((weak)) size_t kb_collectives(uint8_t *out) {
    out[0] = KB_ALL_REDUCE;
    return 1;
}

__attribute__((weak)) long kb_kernel_args_for(const kb_call *call, const kb_param *params,
                                              size_t nparams, int64_t *out, char *err,
                                              size_t errlen) {
    if (call->collective == KB_ALL_REDUCE && call->dtype == 0 && call->op == KB_OP_SUM) {
        return kb_kernel_args_with(call->world_size, call->block, call->cube_w, call->cube_h,
                                   params, nparams, out, err, errlen);
    }
    snprintf(err, errlen, "implements only an f16 sum all_reduce (the seed's ABI)");
    return -1;
}

__attribute__((weak)) bool kb_topo_name_to_kind(const char *name, int32_t *kind) {
    static const char *const names[] = {"ring_1d", "torus_2d", "mesh_2d_no_wrap"};
    for (int32_t i = 0; i < 3; i++) {
        if (strcmp(name, names[i]) == 0) {
            *kind = i;
            return true;
        }
    }
    return false;
}
