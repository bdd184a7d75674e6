"""Run an algorithm's kernel natively, every rank in a thread, for
millisecond unit tests (seed 003 §6). Correctness only: no timing, no DMA,
no fabric. Each rank's memory is its input at ``MOCK_T_PTR``; ``program_id``
is 0 and ``num_programs`` 1, so the seed's ``t_ptr + rank * nbytes`` is
``t_ptr``. Bounded queues of ``n_slots`` stand in for the IPCQ rings.
"""

import math
import queue
import struct
import threading

from . import contract
from .tl import ITEMSIZE, Tl
from .topo import standard_kind

MOCK_T_PTR = 0x1000_0000
_SCRATCH = 0x4000_0000_0000
DEADLOCK_TIMEOUT = 10.0
_COMPASS = {"E": "W", "W": "E", "N": "S", "S": "N"}


def _bf16_bits(x):
    (bits,) = struct.unpack("<I", struct.pack("<f", x))
    if math.isnan(x):
        return 0x7FC0
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


# Integer dtypes: struct format and range (values saturate, as the host's).
_INTS = {
    "i8": ("b", -(1 << 7), (1 << 7) - 1),
    "u8": ("B", 0, (1 << 8) - 1),
    "i32": ("i", -(1 << 31), (1 << 31) - 1),
    "u32": ("I", 0, (1 << 32) - 1),
    "i64": ("q", -(1 << 63), (1 << 63) - 1),
    "u64": ("Q", 0, (1 << 64) - 1),
}


def _to_int(v, lo, hi):
    """``v`` rounded half away from zero and saturated (NaN: 0)."""
    if math.isnan(v):
        return 0
    if math.isinf(v):
        return hi if v > 0 else lo
    t = math.trunc(v)  # exact for every float
    if abs(v - t) >= 0.5:
        t += 1 if v > 0 else -1
    return min(max(t, lo), hi)


def _int_binary(op, dtype, a, b):
    """``op`` of two encoded integer tensors as the host's MATH unit does
    it: exact, add / sub / mul wrapping at the dtype's width, div
    truncating toward zero and 0 for a zero divisor."""
    fmt, lo, hi = _INTS[dtype]
    n = len(a) // ITEMSIZE[dtype]
    xs, ys = struct.unpack(f"<{n}{fmt}", a), struct.unpack(f"<{n}{fmt}", b)
    span = hi - lo + 1

    def div(p, q):
        if q == 0:
            return 0
        r = abs(p) // abs(q)
        return r if (p >= 0) == (q >= 0) else -r

    f = {
        "add": lambda p, q: p + q,
        "sub": lambda p, q: p - q,
        "mul": lambda p, q: p * q,
        "max": max,
        "min": min,
        "div": div,
    }[op]
    out = [(f(p, q) - lo) % span + lo for p, q in zip(xs, ys)]
    return struct.pack(f"<{n}{fmt}", *out)


def encode(values, dtype):
    """Little-endian bytes of ``values`` in ``dtype``."""
    values = [float(v) for v in values]
    if dtype in _INTS:
        fmt, lo, hi = _INTS[dtype]
        return struct.pack(f"<{len(values)}{fmt}", *(_to_int(v, lo, hi) for v in values))
    if dtype == "f64":
        return struct.pack(f"<{len(values)}d", *values)
    if dtype == "f16":
        return struct.pack(f"<{len(values)}e", *values)
    if dtype == "f32":
        return struct.pack(f"<{len(values)}f", *values)
    if dtype == "bf16":
        return struct.pack(f"<{len(values)}H", *(_bf16_bits(v) for v in values))
    raise ValueError(f"dtype {dtype!r}")


def decode(data, dtype):
    n = len(data) // ITEMSIZE[dtype]
    if dtype in _INTS:
        return [float(v) for v in struct.unpack(f"<{n}{_INTS[dtype][0]}", data)]
    if dtype == "f64":
        return list(struct.unpack(f"<{n}d", data))
    if dtype == "f16":
        return list(struct.unpack(f"<{n}e", data))
    if dtype == "f32":
        return list(struct.unpack(f"<{n}f", data))
    if dtype == "bf16":
        return [
            struct.unpack("<f", struct.pack("<I", h << 16))[0]
            for h in struct.unpack(f"<{n}H", data)
        ]
    raise ValueError(f"dtype {dtype!r}")


def _grid(world_size, grid_w):
    w = grid_w or int(math.isqrt(world_size))
    if w <= 0 or world_size % w:
        raise ValueError(f"mock: world_size {world_size} is not a {w}-wide grid")
    return w, world_size // w


def table(topology, world_size, rank, grid_w=None):
    """``[(dir, peer, peer_dir)]`` of ``rank``: the host's builtin tables
    (``sim/src/ccl/tables.rs``)."""
    n = world_size
    if topology == "ring_1d":
        return [("E", (rank + 1) % n, "W"), ("W", (rank - 1) % n, "E")]
    if topology == "ring_1d_unidir":
        return [("E", (rank + 1) % n, "W")]
    if topology == "none":
        return []
    if topology == "global_ring":
        return [("global_E", (rank + 1) % n, "global_W"), ("global_W", (rank - 1) % n, "global_E")]
    if topology == "tree_binary":
        row = []
        if rank > 0:
            row.append(("P", (rank - 1) // 2, "C0" if rank % 2 == 1 else "C1"))
        for child, d in ((2 * rank + 1, "C0"), (2 * rank + 2, "C1")):
            if child < n:
                row.append((d, child, "P"))
        return row
    if topology in ("mesh_2d", "torus_2d"):
        w, h = _grid(n, grid_w)
        x, y = rank % w, rank // w
        row = []
        for d, dx, dy in (("E", 1, 0), ("W", -1, 0), ("S", 0, 1), ("N", 0, -1)):
            nx, ny = x + dx, y + dy
            if topology == "torus_2d":
                nx, ny = nx % w, ny % h
            if 0 <= nx < w and 0 <= ny < h and (nx, ny) != (x, y):
                row.append((d, ny * w + nx, _COMPASS[d]))
        return row
    raise ValueError(f"mock: unknown topology {topology!r}")


def rows(module, topology, world_size, rank, grid_w=None):
    """``rank``'s row after ``module.neighbors`` (if any), resolved as the
    host does."""
    builtin = table(topology, world_size, rank, grid_w)
    new = contract.neighbors_row(module, rank, world_size, builtin) if module else None
    if new is None:
        return builtin
    out = []
    for d, peer, pd in new:
        if not 0 <= peer < world_size:
            raise ValueError(f"mock: neighbors() of rank {rank}: {d!r} leads to rank {peer}")
        if pd is None:
            pd = next((b[2] for b in builtin if b[0] == d and b[1] == peer), _COMPASS.get(d))
        if pd is None:
            raise ValueError(f"mock: neighbors() of rank {rank}: direction {d!r} needs a peer_dir")
        out.append((d, peer, pd))
    return out


class _Raw:
    __slots__ = ("addr", "shape", "dtype", "data")

    def __init__(self, addr, shape, dtype, data):
        self.addr, self.shape, self.dtype, self.data = addr, list(shape), dtype, data


class _InSlot(_Raw):
    """A received tensor: it holds its IPCQ slot until it is dropped, as
    the simulator's does (the sender waits for a free slot meanwhile), so
    a kernel that keeps more received tensors alive than there are slots
    deadlocks here as it would there."""

    __slots__ = ("_slots",)

    def __init__(self, addr, shape, dtype, data, slots):
        super().__init__(addr, shape, dtype, data)
        self._slots = slots

    def __del__(self):
        self._slots.release()


_UNARY = {
    "neg": lambda x: -x,
    "abs": abs,
    "exp": math.exp,
    "log": lambda x: math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan),
    "sqrt": lambda x: math.sqrt(x) if x >= 0 else math.nan,
    "relu": lambda x: max(x, 0.0),
    "recip": lambda x: 1.0 / x if x else math.copysign(math.inf, x),
}

_OPS = {
    "div": lambda a, b: a / b if b else (math.copysign(math.inf, a) if a else math.nan),
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "max": max,
    "min": min,
}


class _Rank:
    """The ``tl`` backend of one mock rank."""

    def __init__(self, rank, memory, tx, rx):
        self.rank, self.memory, self.tx, self.rx = rank, memory, tx, rx
        self.next_scratch = _SCRATCH
        self.rr = 0
        # recv_async futures per direction not yet given a message, in
        # issue order; the messages of those that were.
        self.pending = {}
        self.claimed = {}
        self.next_future = 0

    def _fail(self, msg):
        raise RuntimeError(f"mock rank {self.rank}: {msg}")

    def _range(self, addr, n):
        start = addr - MOCK_T_PTR
        if start < 0 or start + n > len(self.memory):
            self._fail(
                f"access [{addr:#x}, +{n}) is outside the shard "
                f"[{MOCK_T_PTR:#x}, +{len(self.memory)})"
            )
        return slice(start, start + n)

    def _scratch(self, shape, dtype, data):
        addr = self.next_scratch
        self.next_scratch += len(data)
        return _Raw(addr, shape, dtype, data)

    def program_id(self, axis):
        return 0

    def num_programs(self, axis):
        return 1

    def load(self, addr, shape, dtype):
        n = math.prod(shape) * ITEMSIZE[dtype]
        return _Raw(addr, shape, dtype, bytes(self.memory[self._range(addr, n)]))

    def store(self, addr, raw):
        self.memory[self._range(addr, len(raw.data))] = raw.data

    def send(self, dir, raw):
        link = self.tx.get(dir)
        if link is None:
            self._fail(f"send to direction {dir!r}, which is not installed")
        q, slots = link
        if not slots.acquire(timeout=DEADLOCK_TIMEOUT):
            self._fail(
                f"deadlock: send(dir={dir!r}) waited {DEADLOCK_TIMEOUT} s for a free slot "
                "(a slot is free again when the peer drops the tensor it received there: "
                "does it keep received tensors alive?)"
            )
        q.put((raw.data, slots))

    def send_addr(self, dir, addr, shape, dtype):
        self.send(dir, self.load(addr, shape, dtype))

    def _take(self, dir):
        if dir is not None:
            q = dict(self.rx).get(dir)
            if q is None:
                self._fail(f"recv from direction {dir!r}, which is not installed")
            try:
                return q.get(timeout=DEADLOCK_TIMEOUT)
            except queue.Empty:
                self._fail(f"deadlock: recv(dir={dir!r}) waited {DEADLOCK_TIMEOUT} s")
        import time

        deadline = time.monotonic() + DEADLOCK_TIMEOUT
        while time.monotonic() < deadline:
            for i in range(len(self.rx)):
                idx = (self.rr + i) % len(self.rx)
                try:
                    data = self.rx[idx][1].get_nowait()
                except queue.Empty:
                    continue
                self.rr = (idx + 1) % len(self.rx)
                return data
            time.sleep(0.001)
        self._fail(f"deadlock: recv() waited {DEADLOCK_TIMEOUT} s on every direction")

    def _serve_one(self, dir):
        fid = self.pending[dir].pop(0)
        self.claimed[fid] = self._take(dir)

    def recv_async(self, dir, shape, dtype):
        self.next_future += 1
        self.pending.setdefault(dir, []).append(self.next_future)
        return (self.next_future, dir, shape, dtype)

    def wait(self, future):
        fid, dir, shape, dtype = future
        while fid not in self.claimed:
            self._serve_one(dir)
        return self._checked(dir, shape, dtype, self.claimed.pop(fid))

    def unwaited(self):
        return sum(len(q) for q in self.pending.values()) + len(self.claimed)

    def recv(self, dir, shape, dtype):
        while self.pending.get(dir):
            self._serve_one(dir)
        return self._checked(dir, shape, dtype, self._take(dir))

    def _checked(self, dir, shape, dtype, message):
        data, slots = message
        want = math.prod(shape) * ITEMSIZE[dtype]
        if len(data) != want:
            slots.release()
            self._fail(f"recv(dir={dir!r}) of {want} bytes got a message of {len(data)}")
        addr = self.next_scratch
        self.next_scratch += len(data)
        return _InSlot(addr, shape, dtype, data, slots)

    def recv_into(self, dir, shape, dtype, dst):
        raw = self.recv(dir, shape, dtype)
        self.store(dst, raw)
        return _Raw(dst, shape, dtype, raw.data)

    def binary(self, op, a, b):
        if a.shape != b.shape or a.dtype != b.dtype:
            self._fail(f"{op}: shapes/dtypes differ: {a.shape} {a.dtype} vs {b.shape} {b.dtype}")
        if a.dtype in _INTS:
            return self._scratch(a.shape, a.dtype, _int_binary(op, a.dtype, a.data, b.data))
        f = _OPS[op]
        out = [f(x, y) for x, y in zip(decode(a.data, a.dtype), decode(b.data, b.dtype))]
        return self._scratch(a.shape, a.dtype, encode(out, a.dtype))

    def unary(self, op, a):
        out = [_UNARY[op](x) for x in decode(a.data, a.dtype)]
        return self._scratch(a.shape, a.dtype, encode(out, a.dtype))

    def cast(self, a, dtype):
        return self._scratch(a.shape, dtype, encode(decode(a.data, a.dtype), dtype))

    def fill(self, shape, dtype, value):
        return self._scratch(shape, dtype, encode([value] * math.prod(shape), dtype))

    def reduce(self, op, a, axis):
        if not 0 <= axis < len(a.shape):
            self._fail(f"reduce over axis {axis} of {a.shape}")
        v = decode(a.data, a.dtype)
        n = a.shape[axis]
        inner = math.prod(a.shape[axis + 1 :])
        outer = math.prod(a.shape[:axis])
        f = {"sum": sum, "max": max, "min": min}[op]
        out = [
            f(v[(o * n + k) * inner + i] for k in range(n))
            for o in range(outer)
            for i in range(inner)
        ]
        shape = a.shape[:axis] + a.shape[axis + 1 :] or [1]
        return self._scratch(shape, a.dtype, encode(out, a.dtype))

    def gemm(self, a, b, out_dtype):
        return self.composite("gemm", a, b, None, out_dtype)

    def composite(self, op, a, b, c, out_dtype):
        (m, k), (k2, n) = a.shape, b.shape
        if k != k2 or a.dtype != b.dtype:
            self._fail(f"{op} of {a.shape} {a.dtype} and {b.shape} {b.dtype}")
        x, y = decode(a.data, a.dtype), decode(b.data, b.dtype)
        out = [sum(x[i * k + p] * y[p * n + j] for p in range(k)) for i in range(m) for j in range(n)]
        want_c = {"gemm-acc": [m, n], "gemm-bias": [n], "gemm-bias-relu": [n]}.get(op)
        if (want_c is None) != (c is None) or (c is not None and list(c.shape) not in (want_c, [1, n])):
            self._fail(f"composite {op} of an [{m}, {n}] result: c of shape {None if c is None else c.shape}")
        if c is not None:
            cv = decode(c.data, c.dtype)
            out = [v + (cv[i] if op == "gemm-acc" else cv[i % n]) for i, v in enumerate(out)]
        if op in ("gemm-relu", "gemm-bias-relu"):
            out = [max(v, 0.0) for v in out]
        return self._scratch([m, n], out_dtype, encode(out, out_dtype))

    def scale(self, a, factor):
        out = [x * factor for x in decode(a.data, a.dtype)]
        return self._scratch(a.shape, a.dtype, encode(out, a.dtype))

    def now_ps(self):
        return 0

    def log(self, msg):
        print(f"[mock rank {self.rank}] {msg}")

    def shape(self, raw):
        return raw.shape

    def dtype(self, raw):
        return raw.dtype

    def addr(self, raw):
        return raw.addr

    def nbytes(self, raw):
        return len(raw.data)


def run_kernel_in_mock(
    kernel_fn,
    world_size,
    topology="ring_1d",
    inputs=None,
    kernel_args=(),
    dtype="f16",
    n_slots=4,
    module=None,
    grid_w=None,
):
    """Run ``kernel_fn`` on ``world_size`` ranks over the builtin table
    ``topology`` (rewritten by ``module.neighbors`` when ``module`` has
    one), rank r's shard holding ``inputs[r]``; return every rank's shard
    afterwards (lists of floats). An exception in any rank is raised again
    naming the rank."""
    if inputs is None or len(inputs) != world_size:
        raise ValueError("mock: need one input per rank")
    kind = standard_kind(topology) or 0
    gw, gh = _grid(world_size, grid_w) if topology in ("mesh_2d", "torus_2d") else (0, 0)
    tx = [{} for _ in range(world_size)]
    rx = [[] for _ in range(world_size)]
    for r in range(world_size):
        for d, peer, pd in rows(module, topology, world_size, r, grid_w):
            # Messages wait in the queue; a message holds one of the
            # direction's n_slots from its send until the receiver drops it.
            q = queue.Queue()
            tx[r][d] = (q, threading.Semaphore(n_slots))
            rx[peer].append((pd, q))
    ranks = [
        _Rank(r, bytearray(encode(inputs[r], dtype)), tx[r], rx[r]) for r in range(world_size)
    ]
    errors = [None] * world_size

    def go(r):
        args = list(kernel_args) + [r, kind, gw, gh]
        if contract.kernel_arity(kernel_fn) == len(args) + 1:
            # It takes the output's address too (OUT_OF_PLACE): in place.
            args.append(MOCK_T_PTR)
        try:
            contract.call_kernel(kernel_fn, MOCK_T_PTR, args, Tl(ranks[r]))
            if ranks[r].unwaited():
                raise RuntimeError(
                    f"the kernel ended without waiting for {ranks[r].unwaited()} "
                    "recv_async future(s)"
                )
        except BaseException as e:  # re-raised below with the rank
            errors[r] = e

    threads = [threading.Thread(target=go, args=(r,), daemon=True) for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r, e in enumerate(errors):
        if e is not None:
            raise RuntimeError(f"mock rank {r} failed: {e}") from e
    return [decode(bytes(rk.memory), dtype) for rk in ranks]
