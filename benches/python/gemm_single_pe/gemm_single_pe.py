"""gemm_single_pe in Python: one GEMM on cube 0 / PE 0 of device 0 through
the built-in ``gemm`` kernel, checked against a reference computed here,
reported in the compute table (the Rust bench of the same name sweeps
shapes and dtypes; this one takes ``-m -n -k``, default 32 x 32 x 32 f16).

The ``gemm`` kernel's arguments (``kernbench_guest::kernels::GemmArgs``):
m, n, k, a_ptr, b_ptr, b_stride, has_bias (0 / 1), bias_ptr, bias_stride,
c_ptr, dtype code, out dtype code, PEs per cube, rows per matrix-unit command.
"""

F16 = 0  # the WIT dtype code


def value(seed, i):
    """A deterministic value in [-1, 1), exact in f16 (a multiple of 1/64)."""
    return float((seed * 7919 + i * 104729) % 128 - 64) / 64.0


def run(torch):
    args = dict(zip(torch.argv[::2], torch.argv[1::2]))
    m, n, k = (int(args.get(f, 32)) for f in ("-m", "-n", "-k"))
    torch.ahbm.set_device(0)
    a = torch.zeros((m, k), dtype="f16", name="A")
    b = torch.zeros((k, n), dtype="f16", name="B")
    c = torch.zeros((m, n), dtype="f16", name="C")
    av = [value(1, i) for i in range(m * k)]
    bv = [value(2, i) for i in range(k * n)]
    a.copy_(av)
    b.copy_(bv)
    time_ps = torch.launch("gemm", c, m, n, k, a.data_ptr(), b.data_ptr(), 0, 0, 0, 0,
                           c.data_ptr(), F16, F16, 1, 128)
    got = c.flat()
    u = 2.0 ** -11  # f16's unit roundoff: the unit sums exactly and rounds once
    wrong, worst = 0, 0.0
    for i in range(m):
        for j in range(n):
            terms = [av[i * k + p] * bv[p * n + j] for p in range(k)]
            want, scale = sum(terms), sum(abs(t) for t in terms)
            err = 0.0 if got[i * n + j] == want else abs(got[i * n + j] - want) / scale
            worst = max(worst, err)
            wrong += err > u
    torch.report.record_kernel("gemm", f"m={m} n={n} k={k}", "f16", 1, 2 * m * n * k, time_ps,
                               checked=m * n, wrong=wrong, max_rel_err=worst, tolerance=u)
