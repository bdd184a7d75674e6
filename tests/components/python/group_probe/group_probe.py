"""Test bench: process groups from Python, the Rust ``group_probe``'s
all_reduce and all_gather in PyTorch's words. ``argv``: COLLECTIVE LAYOUT
N, LAYOUT one of ``pairs`` (``new_subgroups(2)``), ``strided``
(``new_subgroups_by_enumeration``), ``mesh-tp`` / ``mesh-dp`` (the groups
along one dimension of ``init_device_mesh("ahbm", (2, world // 2),
mesh_dim_names=("dp", "tp"))``). Each group's rank 0 records one row,
named and valued as the Rust probe's; a rank outside a group checks that
a call on it returns at once."""


def value(rank, i):
    return float(rank * 1000 + i % 97 + 1)


def my_group(dist, layout, world):
    if layout == "pairs":
        return dist.new_subgroups(2)[0]
    if layout == "strided":
        return dist.new_subgroups_by_enumeration([list(range(k, world, 2)) for k in range(2)])[0]
    mesh = dist.init_device_mesh("ahbm", (2, world // 2), mesh_dim_names=("dp", "tp"))
    return mesh.get_group(layout.split("-")[1])


def worker(rank, world_size, torch):
    dist = torch.distributed
    collective, layout, n = torch.argv[0], torch.argv[1], int(torch.argv[2])
    torch.ahbm.set_device(rank)
    g = my_group(dist, layout, world_size)
    ranks = dist.get_process_group_ranks(g)
    gs, me = dist.get_world_size(group=g), dist.get_rank(group=g)
    assert dist.get_global_rank(g, me) == rank and dist.get_group_rank(g, rank) == me
    x = torch.zeros((n,), dtype="i32", name="x")
    x.copy_([value(rank, i) for i in range(n)])
    big = torch.zeros((n * gs,), dtype="i32", name="big")
    t0 = torch.ahbm.now_ps()
    if collective == "all_reduce":
        dist.all_reduce(x, op=dist.ReduceOp.SUM, group=g)
        out, want = x, [sum(value(r, i) for r in ranks) for i in range(n)]
    elif collective == "all_gather":
        dist.all_gather_into_tensor(big, x, group=g)
        out, want = big, [value(r, i) for r in ranks for i in range(n)]
    else:
        raise ValueError(f"unknown collective {collective}")
    time_ps = torch.ahbm.now_ps() - t0
    # Every rank makes a group of the last rank alone: a call on it from
    # any other returns at once.
    last = dist.new_group([world_size - 1])
    if rank != world_size - 1:
        assert last is dist.GroupMember.NON_GROUP_MEMBER, last
        t1 = torch.ahbm.now_ps()
        dist.all_reduce(x, group=last)
        assert torch.ahbm.now_ps() == t1 and dist.get_rank(group=last) == -1
        assert dist.get_world_size(group=last) == -1
    wrong = sum(1 for a, b in zip(out.flat(), want) if a != b)
    if me == 0:
        torch.report.record(f"{collective} group {g._id}", n * 4, n, "i32",
                            "ranks " + "+".join(str(r) for r in ranks), time_ps, wrong)


def run(torch):
    torch.distributed.init_process_group(backend="ahbm")
    torch.multiprocessing.spawn(worker, nprocs=torch.distributed.get_world_size())
