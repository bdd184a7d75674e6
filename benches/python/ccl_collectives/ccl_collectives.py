"""Every ``torch.distributed`` collective from Python, checked: broadcast,
reduce, all_gather (list and tensor), reduce_scatter (list and tensor),
all_to_all_single, all_reduce with every op, send/recv. One row per call,
``wrong`` the elements that differ from the result PyTorch defines.

Values are small integers, exact in f16 whatever the order of the sums.
"""

N = 6  # elements per block


def value(rank, i):
    return float((rank * 7 + i * 3) % 11 + 1)


def block(rank, n=N):
    return [value(rank, i) for i in range(n)]


def worker(rank, world_size, torch):
    dist = torch.distributed
    torch.ahbm.set_device(rank)
    p = world_size
    took = {}

    def t(values, name):
        x = torch.zeros((len(values),), dtype="f16", name=name)
        x.copy_(values)
        return x

    # Rows are named for the function called; the table counts
    # all_gather_into_tensor as an all_gather, and so on.
    def timed(name, call, op="none"):
        t0 = torch.ahbm.now_ps()
        call()
        took[(name, op)] = torch.ahbm.now_ps() - t0

    def check(name, got, want, op="none"):
        wrong = sum(1 for g, w in zip(got, want) if g != w) + abs(len(got) - len(want))
        t = took[(name, op)]
        torch.report.record(name, 2 * len(want), len(want), "f16", op, t, wrong)

    def wrong_in(got, want):
        return sum(1 for g, w in zip(got, want) if g != w) + abs(len(got) - len(want))

    # The rooted ones in nccl-tests' layout: the root and both blocks, out
    # of place (collective_out_of_place: output apart, input kept) and in
    # place (PyTorch's broadcast and reduce).
    def check_rooted(name, oop, got, want, root, op="none"):
        torch.report.record_perf(name, 2 * len(want), len(want), "f16", op,
                                 out_of_place=oop,
                                 in_place=(took[(name, op)], wrong_in(got, want)), root=root)

    # nccl-tests' out-of-place block: False when the algorithm runs the
    # collective in place only (the block prints N/A, the header says why).
    def out_of_place(name, call, op="none"):
        try:
            timed(name, call, op)
            return True
        except NotImplementedError as e:
            if rank == 0:
                torch.report.note(f"out-of-place block N/A: {e}")
            return False

    if rank == 0:
        torch.report.note(f"all_reduce wants {dist.shards_wanted('all_reduce')} shard(s) per SIP")

    # broadcast from the last rank
    x, y = t(block(rank), "bcast"), t([0.0] * N, "bcast_out")
    oop = None
    if out_of_place("broadcast", lambda: dist.collective_out_of_place("broadcast", y, x, root=p - 1)):
        oop = (took[("broadcast", "none")], wrong_in(y.flat() + x.flat(), block(p - 1) + block(rank)))
    timed("broadcast", lambda: dist.broadcast(x, src=p - 1))
    check_rooted("broadcast", oop, x.flat(), block(p - 1), p - 1)

    # reduce (max) to rank 0: only the root is defined
    want = [max(value(r, i) for r in range(p)) for i in range(N)]
    x, y = t(block(rank), "reduce"), t([0.0] * N, "reduce_out")
    oop = None
    if out_of_place("reduce", lambda: dist.collective_out_of_place("reduce", y, x, "max", 0), "max"):
        oop = (took[("reduce", "max")], wrong_in(y.flat() if rank == 0 else want, want))
    timed("reduce", lambda: dist.reduce(x, dst=0, op=dist.ReduceOp.MAX), "max")
    check_rooted("reduce", oop, x.flat() if rank == 0 else want, want, 0, "max")

    # all_gather into one tensor and into a list
    out = torch.zeros((p * N,), dtype="f16", name="ag_out")
    x = t(block(rank), "ag_in")
    timed("all_gather_into_tensor", lambda: dist.all_gather_into_tensor(out, x))
    check("all_gather_into_tensor", out.flat(), sum((block(r) for r in range(p)), []))
    outs = [torch.zeros((N,), dtype="f16", name=f"ag_{r}") for r in range(p)]
    timed("all_gather", lambda: dist.all_gather(outs, x))
    check("all_gather", sum((o.flat() for o in outs), []), sum((block(r) for r in range(p)), []))

    # reduce_scatter: rank r gets the sum of everyone's block r
    full = t(sum((block(rank + 10 * j) for j in range(p)), []), "rs_in")
    out = torch.zeros((N,), dtype="f16", name="rs_out")
    timed("reduce_scatter_tensor", lambda: dist.reduce_scatter_tensor(out, full))
    want = [sum(value(r + 10 * rank, i) for r in range(p)) for i in range(N)]
    check("reduce_scatter_tensor", out.flat(), want)
    ins = [t(block(rank + 10 * j), f"rs_{j}") for j in range(p)]
    timed("reduce_scatter", lambda: dist.reduce_scatter(out, ins, op="sum"))
    check("reduce_scatter", out.flat(), want)

    # all_to_all_single: block j of rank r goes to rank j
    x = t(sum((block(100 * rank + j) for j in range(p)), []), "a2a_in")
    out = torch.zeros((p * N,), dtype="f16", name="a2a_out")
    timed("all_to_all_single", lambda: dist.all_to_all_single(out, x))
    check("all_to_all_single", out.flat(), sum((block(100 * r + rank) for r in range(p)), []))

    # all_reduce with every op
    for op in ("sum", "prod", "max", "min", "avg"):
        # avg: multiples of p, so that the mean is an integer
        scale = p if op == "avg" else 1
        x = t([float(scale * (rank % 2 + 1))] * N, f"ar_{op}")
        timed("all_reduce", lambda: dist.all_reduce(x, op=op), op)
        vals = [float(scale * (r % 2 + 1)) for r in range(p)]
        r = {"sum": sum(vals), "max": max(vals), "min": min(vals), "avg": sum(vals) / p}
        prod = 1.0
        for v in vals:
            prod *= v
        r["prod"] = prod
        check("all_reduce", x.flat(), [r[op]] * N, op)

    # premul_sum: every rank's input times that rank's own factor
    x = t([float(rank % 2 + 1)] * N, "ar_premul_sum")
    factor = dist._make_nccl_premul_sum(0.5 * (rank + 1))
    timed("all_reduce", lambda: dist.all_reduce(x, op=factor), "premul_sum")
    want = sum(0.5 * (r + 1) * (r % 2 + 1) for r in range(p))
    check("all_reduce", x.flat(), [want] * N, "premul_sum")

    # send/recv: even ranks send to the next odd one
    x = t(block(rank), "p2p")
    if rank % 2 == 0 and rank + 1 < p:
        timed("sendrecv", lambda: dist.send(x, dst=rank + 1))
        check("sendrecv", block(rank), block(rank))
    elif rank % 2 == 1:
        timed("sendrecv", lambda: dist.recv(x, src=rank - 1))
        check("sendrecv", x.flat(), block(rank - 1))


def run(torch):
    torch.distributed.init_process_group(backend="ahbm")
    if not torch.report.data_kept():
        raise RuntimeError("ccl_collectives checks data: run it without --timing-only")
    torch.multiprocessing.spawn(worker, nprocs=torch.distributed.get_world_size())
