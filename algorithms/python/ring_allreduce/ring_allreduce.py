"""Ring all-reduce, the seed's algorithm (seed 003 §2), in Python.

For ``world_size - 1`` steps every PE sends its current tile east and adds
the tile received from the west; what it received is what it forwards next
(``current = recv``), so every rank's tile travels the ring once. The sum is
stored back once. Parameter ``chunk_size`` (elements): all-reduce the tile
in chunks of at most that many elements, one after another.
"""


# Out of place the sum goes to the output (the host appends its address).
OUT_OF_PLACE = ("all_reduce",)


def kernel(t_ptr, n_elem, world_size, chunk, _sip_rank, _topo_kind, _topo_w, _topo_h, out_ptr,
           tl):
    # Global rank from program_id(0/1) (ADR-0022).
    rank = tl.program_id(axis=1) * tl.num_programs(axis=0) + tl.program_id(axis=0)
    nbytes = n_elem * 2  # f16
    pe_addr = t_ptr + rank * nbytes
    out = out_ptr + rank * nbytes
    n_chunks = max(1, -(-n_elem // max(1, chunk)))
    base, extra = divmod(n_elem, n_chunks)
    addr = pe_addr
    for c in range(n_chunks):
        n = base + (1 if c < extra else 0)
        acc = tl.load(addr, shape=(n,), dtype="f16")
        current = acc
        for _step in range(world_size - 1):
            tl.send(dir="E", src=current)
            recv = tl.recv(dir="W", shape=(n,), dtype="f16")
            acc = acc + recv
            current = recv  # forward what was received, not the sum
        del current
        tl.store(out, acc)
        addr += n * 2
        out += n * 2


def kernel_args(world_size, n_elem, chunk_size=None):
    """(n_elem, world_size, chunk) after t_ptr; ``chunk_size`` from ccl.yaml."""
    if chunk_size is None:
        return (n_elem, world_size, n_elem)
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1 element, got {chunk_size}")
    return (n_elem, world_size, min(chunk_size, max(n_elem, 1)))
