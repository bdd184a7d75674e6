"""ccl_hello in Python, as the seed's bench (seed 003 §1 step 3): run the
``hello_send`` algorithm through all_reduce and check that every rank now
holds its west neighbour's tile.

Up to one rank per SIP: one worker per rank (``mp.spawn``), each on its own
device. With more ranks than SIPs (ccl.yaml ``world_size: 8``: rank = PE),
the seed's single driver places one tensor on SIP 0, one tile per rank.
"""

from kernbench import DPPolicy

N_ELEM = 8


def tile(rank):
    """Rank ``rank``'s tile: distinct per rank, exact in f16."""
    return [float(((rank >> (10 * (i % 4))) & 1023) + 1 + 1024 * (i // 4)) for i in range(N_ELEM)]


def check(torch, rank, world_size, got, time_ps):
    west = (rank - 1) % world_size
    wrong = sum(1 for g, e in zip(got, tile(west)) if g != e)
    print(f"rank {rank}: got {got}, expected rank {west}'s {tile(west)}")
    torch.report.record("sendrecv", N_ELEM * 2, N_ELEM, "f16", "none", time_ps, wrong)


def worker(rank, world_size, torch):
    """Per-rank business logic, as a PyTorch DDP worker."""
    torch.ahbm.set_device(rank)
    t = torch.zeros((N_ELEM,), dtype="f16", name="hello_in")
    t.copy_(tile(rank))
    t0 = torch.ahbm.now_ps()
    torch.distributed.all_reduce(t, op="sum")
    check(torch, rank, world_size, t.flat(), torch.ahbm.now_ps() - t0)


def run(torch):
    """Entry point: initialise the process group, then the ranks."""
    dist = torch.distributed
    dist.init_process_group(backend="ahbm", algorithm="hello_send")
    world_size = dist.get_world_size()
    if world_size <= torch.ahbm.device_count():
        torch.multiprocessing.spawn(worker, nprocs=world_size)
        return
    # The seed's single driver: every rank is a PE of SIP 0.
    torch.ahbm.set_device(0)
    pes = min(world_size, torch.ahbm.get_device_properties(0).pes_per_cube)
    dp = DPPolicy(cube="column_wise", pe="column_wise", num_cubes=world_size // pes, num_pes=pes)
    t = torch.zeros((1, world_size * N_ELEM), dtype="f16", dp=dp, name="hello_in")
    t.copy_([tile(r) for r in range(world_size)])
    t0 = torch.ahbm.now_ps()
    dist.all_reduce(t, op="sum")
    took = torch.ahbm.now_ps() - t0
    flat = t.flat()
    for r in range(world_size):
        check(torch, r, world_size, flat[r * N_ELEM : (r + 1) * N_ELEM], took)
