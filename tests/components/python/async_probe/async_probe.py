"""Test bench: asynchronous collectives from Python, the Rust
``async_probe``'s ``async``, ``order``, ``two_pairs``, ``p2p``, ``overlap`` and ``gemm``
modes in PyTorch's words (``async_op=True``, ``isend`` / ``irecv``,
``Work``, ``torch.ahbm.busy`` / ``gemm``). ``argv``: MODE N [ARGS]. Rank 0 records the Rust probe's rows, named and valued
alike."""


def value(rank, i):
    return float(rank * 1000 + i % 97 + 1)


def make(torch, rank, n, name):
    t = torch.zeros((n,), dtype="i32", name=name)
    t.copy_([value(rank, i) for i in range(n)])
    return t


def wrong_sum(t, ranks):
    got = t.flat()
    return sum(1 for i, g in enumerate(got) if g != sum(value(r, i) for r in ranks))


def row(torch, name, n, time_ps, wrong):
    torch.report.record(name, n * 4, n, "i32", "sum", time_ps, wrong)


def worker(rank, world_size, torch):
    dist = torch.distributed
    mode, n = torch.argv[0], int(torch.argv[1])
    torch.ahbm.set_device(rank)
    world = list(range(world_size))
    start = torch.ahbm.now_ps()
    if mode == "async":
        x = make(torch, rank, n, "x")
        dist.all_reduce(x, op=dist.ReduceOp.SUM, async_op=True).wait()
        if rank == 0:
            row(torch, "all_reduce", n, torch.ahbm.now_ps() - start, wrong_sum(x, world))
    elif mode == "order":
        sizes = [4 * n, n, n, n]
        xs = [make(torch, rank, s, "x%d" % i) for i, s in enumerate(sizes)]
        works = [dist.all_reduce(x, async_op=True) for x in xs]
        early = 0
        for i, w in enumerate(works):
            assert w.wait() is True
            if rank == 0:
                row(torch, "order %d" % i, sizes[i], torch.ahbm.now_ps() - start,
                    wrong_sum(xs[i], world))
            if i == 0 and works[1].is_completed():
                early += 1
        z = make(torch, rank, n, "z")
        before = torch.ahbm.now_ps()
        dist.all_reduce(z)
        if rank == 0:
            row(torch, "order blocking", n, torch.ahbm.now_ps() - before, wrong_sum(z, world))
            row(torch, "early", n, 0, early)
    elif mode == "two_pairs":
        a = dist.new_group([0, 1])
        b = dist.new_group([0, 1])
        if rank <= 1:
            x, y = make(torch, rank, n, "x"), make(torch, rank, n, "y")
            start = torch.ahbm.now_ps()
            works = [dist.all_reduce(x, group=a, async_op=True),
                     dist.all_reduce(y, group=b, async_op=True)]
            for w in works:
                w.wait()
            if rank == 0:
                row(torch, "pairs", n, torch.ahbm.now_ps() - start,
                    wrong_sum(x, [0, 1]) + wrong_sum(y, [0, 1]))
    elif mode == "p2p":
        if rank <= 1:
            peer = 1 - rank
            out, inp = make(torch, rank, n, "out"), torch.zeros((n,), dtype="i32", name="in")
            works = [dist.isend(out, peer), dist.irecv(inp, peer)]
            for w in works:
                w.wait()
            wrong = sum(1 for i, g in enumerate(inp.flat()) if g != value(peer, i))
            if rank == 0:
                row(torch, "p2p", n, torch.ahbm.now_ps() - start, wrong)
    elif mode == "overlap":
        x = make(torch, rank, n, "x")
        w = dist.all_reduce(x, async_op=True)
        busy = torch.ahbm.busy(int(torch.argv[2]))
        w.wait()
        if rank == 0:
            row(torch, "overlap", n, torch.ahbm.now_ps() - start, wrong_sum(x, world))
            row(torch, "busy", n, busy, 0)
    elif mode == "gemm":
        m, k = int(torch.argv[2]), int(torch.argv[3])
        alone = torch.ahbm.gemm(m, m, k, "bf16")
        x = make(torch, rank, n, "x")
        t0 = torch.ahbm.now_ps()
        w = dist.all_reduce(x, async_op=True)
        torch.ahbm.gemm(m, m, k, dtype="bf16")
        w.wait()
        if rank == 0:
            row(torch, "gemm", n, alone, 0)
            row(torch, "gemm overlap", n, torch.ahbm.now_ps() - t0, wrong_sum(x, world))
    else:
        raise ValueError("unknown mode " + mode)


def run(torch):
    torch.distributed.init_process_group(backend="ahbm")
    torch.multiprocessing.spawn(worker, nprocs=torch.distributed.get_world_size())
