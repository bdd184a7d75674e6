"""train_step in Python: one training iteration of a GPT-style transformer
with Megatron-LM tensor parallelism inside groups of ``--tp`` ranks and
PyTorch DDP data parallelism across ``--dp`` of them, written as a
Megatron/DDP script would be. The same model, arguments and output as the
Rust ``train_step`` (see its documentation, benches/train_step): the GEMMs
are charged with ``torch.ahbm.gemm`` by the device's roofline, the TP
all-reduces block, the DP gradient buckets are all-reduced with
``async_op=True`` while the layers below run their backward, and every
collective's bf16 result is checked."""

DT = "bf16"


def parse_args(argv):
    o = {"algorithm": "ring_rsag_allreduce_groups", "tp": 2, "dp": None, "layers": 2,
         "hidden": 256, "seq": 128, "micro_batches": 1, "bucket_mb": 25}
    names = {"--tp": "tp", "--dp": "dp", "--layers": "layers", "--hidden": "hidden",
             "--seq": "seq", "--micro-batches": "micro_batches", "--bucket-mb": "bucket_mb"}
    it = iter(argv)
    for a in it:
        v = next(it, None)
        if v is None:
            raise ValueError(f"train_step: {a} needs a value")
        if a == "--algorithm":
            o["algorithm"] = v
            continue
        if a not in names:
            raise ValueError(f"train_step: unknown argument {a} (--tp, --dp, --layers, --hidden, "
                             "--seq, --micro-batches, --bucket-mb, --algorithm)")
        if not v.isdigit() or int(v) == 0:
            raise ValueError(f"train_step: {a} {v!r} is not a positive integer")
        o[names[a]] = int(v)
    return o


def value(rank, i):
    return float((rank + i) % 4 + 1)


class Step:
    def __init__(self, torch, o, rank, tp, dp):
        self.torch, self.o, self.rank, self.tp, self.dp = torch, o, rank, tp, dp
        self.keep = torch.report.data_kept()
        self.tp_calls, self.tp_ps, self.tp_wrong = 0, 0, 0

    def filled(self, n, name):
        t = self.torch.zeros((n,), dtype=DT, name=name)
        if self.keep:
            t.copy_([value(self.rank, i) for i in range(n)])
        return t

    def wrong(self, t, ranks):
        if not self.keep:
            return 0
        return sum(1 for i, g in enumerate(t.flat()) if g != sum(value(r, i) for r in ranks))

    def gemm(self, m, n, k):
        self.torch.ahbm.gemm(m, n, k, DT)

    def tp_all_reduce(self):
        dist, now = self.torch.distributed, self.torch.ahbm.now_ps
        x = self.filled(self.o["seq"] * self.o["hidden"], "activations")
        t0 = now()
        dist.all_reduce(x, op=dist.ReduceOp.SUM, group=self.tp)
        self.tp_calls += 1
        self.tp_ps += now() - t0
        self.tp_wrong += self.wrong(x, dist.get_process_group_ranks(self.tp))

    def forward_layer(self):
        s, h, t = self.o["seq"], self.o["hidden"], self.o["tp"]
        self.gemm(s, 3 * h // t, h)
        self.gemm(s, s, h // t)
        self.gemm(s, h // t, s)
        self.gemm(s, h, h // t)
        self.tp_all_reduce()
        self.gemm(s, 4 * h // t, h)
        self.gemm(s, h, 4 * h // t)
        self.tp_all_reduce()

    def backward_layer(self):
        s, h, t = self.o["seq"], self.o["hidden"], self.o["tp"]
        for _ in range(2):
            self.gemm(s, h, 4 * h // t)
        for _ in range(2):
            self.gemm(s, 4 * h // t, h)
        self.tp_all_reduce()
        for _ in range(2):
            self.gemm(s, h, h // t)
            self.gemm(s, h // t, s)
            self.gemm(s, s, h // t)
            self.gemm(s, 3 * h // t, h)
        self.tp_all_reduce()

    def reduce_gradients(self):
        per_layer = 12 * self.o["hidden"] * self.o["hidden"] // self.o["tp"]
        bucket = max(self.o["bucket_mb"] * (1 << 20) // 2, 1)
        out, left = [], per_layer
        while left > 0:
            n = min(left, bucket)
            g = self.filled(n, "gradients")
            out.append((self.torch.distributed.all_reduce(g, group=self.dp, async_op=True), g))
            left -= n
        return out


def worker(rank, world, torch):
    dist, now = torch.distributed, torch.ahbm.now_ps
    o = parse_args(torch.argv)
    torch.ahbm.set_device(rank)
    tp_n = o["tp"]
    dp_n = world // tp_n
    tp_lists = [list(range(d * tp_n, (d + 1) * tp_n)) for d in range(dp_n)]
    dp_lists = [[d * tp_n + t for d in range(dp_n)] for t in range(tp_n)]

    def mine(lists):
        found = None
        for ranks in lists:
            g = dist.new_group(ranks, algorithm=o["algorithm"])
            if rank in ranks:
                found = g
        return found

    tp, dp = mine(tp_lists), mine(dp_lists)
    step = Step(torch, o, rank, tp, dp)
    start = now()
    forward = backward = 0
    buckets = []
    for mb in range(o["micro_batches"]):
        t0 = now()
        for _ in range(o["layers"]):
            step.forward_layer()
        t1 = now()
        for _ in range(o["layers"]):
            step.backward_layer()
            if mb + 1 == o["micro_batches"]:
                buckets.extend(step.reduce_gradients())
        forward += t1 - t0
        backward += now() - t1
    t0 = now()
    dp_wrong = dp_bytes = 0
    for w, g in buckets:
        w.wait()
        dp_wrong += step.wrong(g, dist.get_process_group_ranks(dp))
        dp_bytes += g.nbytes
    dp_wait = now() - t0
    params = 12 * o["hidden"] * o["hidden"] // tp_n * o["layers"]
    t1 = now()
    torch.ahbm.gemm(params, 1, 1, DT)
    optimizer = now() - t1
    total = now() - start

    def us(ps):
        return ps / 1e6

    torch.report.note(
        f"rank {rank}: step {us(total):.3f} us = forward {us(forward):.3f} + backward "
        f"{us(backward):.3f} + DP wait {us(dp_wait):.3f} + optimizer {us(optimizer):.3f}; "
        f"TP group {dist.get_process_group_ranks(tp)}, DP group {dist.get_process_group_ranks(dp)}")
    act = o["seq"] * o["hidden"] * 2
    torch.report.record("all_reduce", act, act // 2, DT, "sum",
                        step.tp_ps // max(step.tp_calls, 1), step.tp_wrong)
    torch.report.record("all_reduce", dp_bytes, dp_bytes // 2, DT, "sum", dp_wait, dp_wrong)


def run(torch):
    o = parse_args(torch.argv)
    dist = torch.distributed
    dist.init_process_group(backend="ahbm")
    world = dist.get_world_size()
    dp = o["dp"] or max(world // o["tp"], 1)
    if o["tp"] * dp != world:
        raise ValueError(
            f"train_step: --tp {o['tp']} x --dp {dp} = {o['tp'] * dp} ranks, but the machine has "
            f"{world} SIPs (set system.sips.count, or choose --tp and --dp whose product is "
            f"{world})")
    if o["hidden"] % o["tp"]:
        raise ValueError(f"train_step: --hidden {o['hidden']} must divide by --tp {o['tp']}")
    per_rank = 12 * o["hidden"] * o["hidden"] // o["tp"] * o["layers"]
    torch.report.note(
        f"train_step: tp {o['tp']} x dp {dp}, {o['layers']} layers, hidden {o['hidden']}, seq "
        f"{o['seq']}, {o['micro_batches']} micro-batch(es), bf16; {per_rank} parameters per rank")
    torch.multiprocessing.spawn(worker, nprocs=world)
