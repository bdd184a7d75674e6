"""Test algorithm: the Rust ``math_probe`` (tests/components/algorithms)
modes 3-6 in Python, to show the SDK's kernel language gives the same
bytes and picoseconds: 3 squares a d x d f16 tile on the matrix unit (f32)
and casts it back; 4 is ``x + x @ x`` in one gemm-acc composite; 5 a
gemm-bias composite with a bias of the wrong shape (must fail); 6 a ring
all-reduce touring reduce, exp, fill, div, casts, send from an address and
recv_async / wait."""


def kernel(t_ptr, n, ws, mode, tl):
    if mode == 6:
        x = tl.load(t_ptr, shape=(1, n), dtype="f16")
        row = tl.max(x, axis=0)
        one = tl.exp(row - row) * tl.fill((n,), "f16", 1.0)
        acc = tl.cast(row / one, "f32")
        if ws > 1:
            f = tl.recv_async(dir="W", shape=(n,), dtype="f16")
            tl.send(dir="E", src_addr=t_ptr, nbytes=n * 2, shape=(n,), dtype="f16")
            current = tl.wait(f)
            acc = acc + tl.cast(current, "f32")
            for _ in range(2, ws):
                f = tl.recv_async(dir="W", shape=(n,), dtype="f16")
                tl.send(dir="E", src=current)
                nxt = tl.wait(f)
                acc = acc + tl.cast(nxt, "f32")
                current = nxt
            del current
        tl.store(t_ptr, tl.cast(acc, "f16"))
        return
    d = int(n ** 0.5)
    x = tl.load(t_ptr, shape=(d, d), dtype="f16")
    if mode == 3:
        tl.store(t_ptr, tl.cast(tl.gemm(x, x, "f32"), "f16"))
    else:
        op = "gemm-acc" if mode == 4 else "gemm-bias"
        tl.store(t_ptr, tl.composite(op, x, x, x, "f16"))


def kernel_args(world_size, n_elem, kernel_mode=0):
    return (n_elem, world_size, kernel_mode)
