"""The kernel language ``tl`` (seed 003 §4), over a backend: the simulator
host inside a component, or the native mock.

Work-issuing calls return at once; the work runs on the PE's DMA / MATH
engines in simulated time. Tensor handles overload ``+``, ``-`` and ``*``
(``acc = acc + recv`` issues a MATH add, as in the seed). Dropping the last
reference to a received tensor releases its IPCQ slot.
"""

import math

DTYPES = ("f16", "bf16", "f32", "i32", "i8", "u8", "u32", "i64", "u64", "f64")
UNARY_OPS = ("neg", "abs", "exp", "log", "sqrt", "relu", "recip")
ITEMSIZE = {
    "f16": 2,
    "bf16": 2,
    "f32": 4,
    "i32": 4,
    "i8": 1,
    "u8": 1,
    "u32": 4,
    "i64": 8,
    "u64": 8,
    "f64": 8,
}


def _dtype(d):
    if d not in ITEMSIZE:
        raise ValueError(f"dtype {d!r}: one of {', '.join(DTYPES)}")
    return d


def _shape(shape):
    if isinstance(shape, int):
        return [shape]
    return [int(d) for d in shape]


class Tensor:
    """A tensor in PE-visible memory (HBM, SRAM, TCM or an IPCQ slot); the
    bytes stay in the simulator."""

    __slots__ = ("_tl", "_raw", "__weakref__")

    def __init__(self, tl, raw):
        self._tl = tl
        self._raw = raw

    @property
    def shape(self):
        return tuple(self._tl._b.shape(self._raw))

    @property
    def dtype(self):
        return self._tl._b.dtype(self._raw)

    @property
    def addr(self):
        """Physical address of the first element."""
        return self._tl._b.addr(self._raw)

    @property
    def nbytes(self):
        return self._tl._b.nbytes(self._raw)

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __add__(self, other):
        return self._tl.add(self, other)

    def __sub__(self, other):
        return self._tl.sub(self, other)

    def __mul__(self, other):
        if isinstance(other, Tensor):
            return self._tl.mul(self, other)
        return self._tl.scale(self, other)

    __rmul__ = __mul__

    def __truediv__(self, other):
        if isinstance(other, Tensor):
            return self._tl._binary("div", self, other)
        return self._tl.scale(self, 1.0 / other)

    def __neg__(self):
        return self._tl.unary("neg", self)

    def __matmul__(self, other):
        return self._tl.gemm(self, other)

    def __repr__(self):
        return f"Tensor(shape={self.shape}, dtype={self.dtype!r}, addr={self.addr:#x})"


class Future:
    """A receive in progress (``tl.recv_async``); ``tl.wait`` it once."""

    __slots__ = ("_raw",)

    def __init__(self, raw):
        self._raw = raw


class Tl:
    """``tl``: what a kernel calls. Directions are strings (``"E"``,
    ``"W"``, ``"global_E"``, ``"C0"``, ...) as the IPCQ table names them."""

    def __init__(self, backend):
        self._b = backend

    def _wrap(self, raw):
        return Tensor(self, raw)

    @staticmethod
    def _raw(t, what):
        if not isinstance(t, Tensor):
            raise TypeError(f"{what}: expected a tl tensor, got {type(t).__name__}")
        return t._raw

    def program_id(self, axis=0):
        """axis 0: this PE's index in its cube; axis 1: the cube index."""
        return self._b.program_id(axis)

    def num_programs(self, axis=0):
        """axis 0: PEs per cube; axis 1: cubes per SIP."""
        return self._b.num_programs(axis)

    def load(self, addr, shape, dtype="f16"):
        """DMA read of ``shape`` / ``dtype`` elements at ``addr`` into TCM."""
        return self._wrap(self._b.load(int(addr), _shape(shape), _dtype(dtype)))

    def store(self, addr, value):
        """DMA write of ``value`` to ``addr``."""
        self._b.store(int(addr), self._raw(value, "tl.store"))

    def send(self, dir, src=None, **kw):
        """Send ``src`` to the neighbour in direction ``dir`` (blocks while
        the peer has no free slot). The seed's raw-address form,
        ``tl.send(dir, src_addr=..., shape=..., dtype=..., nbytes=...,
        space=...)``, sends straight from memory without a load: the DMA
        reads the bytes when its transfer starts (``nbytes``, if given, must
        match the shape; ``space`` is implied by the address)."""
        if src is None:
            src = kw.pop("value", None)
        if src is None and "src_addr" in kw:
            addr, shape = kw.pop("src_addr"), tuple(kw.pop("shape", ()))
            dtype = kw.pop("dtype", "f16")
            nbytes, _space = kw.pop("nbytes", None), kw.pop("space", None)
            if kw:
                raise TypeError(f"tl.send: unexpected arguments {sorted(kw)}")
            want = math.prod(shape) * ITEMSIZE[_dtype(dtype)]
            if nbytes is not None and nbytes != want:
                raise ValueError(f"tl.send: nbytes={nbytes} but shape {shape} of {dtype} is {want} bytes")
            self._b.send_addr(dir, int(addr), [int(d) for d in shape], _dtype(dtype))
            return
        if kw:
            raise TypeError(f"tl.send: unexpected arguments {sorted(kw)}")
        self._b.send(dir, self._raw(src, "tl.send"))

    def recv(self, dir=None, shape=None, dtype="f16"):
        """Receive from ``dir`` (or round-robin over every direction when
        None); the result points at the IPCQ slot."""
        if shape is None:
            raise TypeError("tl.recv needs shape= and dtype=")
        return self._wrap(self._b.recv(dir, _shape(shape), _dtype(dtype)))

    def recv_async(self, dir=None, shape=None, dtype="f16"):
        """Start a receive and return at once; ``tl.wait(future)`` gives
        its tensor. Receives on one direction take their messages in issue
        order; a future never waited for fails the kernel."""
        if shape is None:
            raise TypeError("tl.recv_async needs shape= and dtype=")
        return Future(self._b.recv_async(dir, _shape(shape), _dtype(dtype)))

    def wait(self, future):
        """Wait for ``future``'s message: a tensor on its IPCQ slot."""
        if not isinstance(future, Future) or future._raw is None:
            raise TypeError("tl.wait: expected a future from tl.recv_async, not yet waited for")
        raw, future._raw = future._raw, None
        return self._wrap(self._b.wait(raw))

    def recv_into(self, dir=None, shape=None, dtype="f16", dst_addr=None):
        """Receive and copy to ``dst_addr``; the slot is released after the copy."""
        if shape is None or dst_addr is None:
            raise TypeError("tl.recv_into needs shape=, dtype= and dst_addr=")
        return self._wrap(self._b.recv_into(dir, _shape(shape), _dtype(dtype), int(dst_addr)))

    def _binary(self, op, a, b):
        return self._wrap(self._b.binary(op, self._raw(a, f"tl.{op}"), self._raw(b, f"tl.{op}")))

    def add(self, a, b):
        return self._binary("add", a, b)

    def sub(self, a, b):
        return self._binary("sub", a, b)

    def mul(self, a, b):
        return self._binary("mul", a, b)

    def maximum(self, a, b):
        return self._binary("max", a, b)

    def minimum(self, a, b):
        return self._binary("min", a, b)

    def unary(self, op, a):
        """``op(a)`` element-wise on the MATH unit: neg, abs, exp, log,
        sqrt, relu or recip."""
        if op not in UNARY_OPS:
            raise ValueError(f"tl.unary: op {op!r} is one of {', '.join(UNARY_OPS)}")
        return self._wrap(self._b.unary(op, self._raw(a, f"tl.{op}")))

    def exp(self, a):
        return self.unary("exp", a)

    def sqrt(self, a):
        return self.unary("sqrt", a)

    def cast(self, a, dtype):
        """``a`` converted to ``dtype`` on the MATH unit."""
        return self._wrap(self._b.cast(self._raw(a, "tl.cast"), _dtype(dtype)))

    def fill(self, shape, dtype, value):
        """A tensor of ``shape`` / ``dtype`` in TCM whose every element is
        ``value``, converted as :meth:`cast` converts (one MATH command;
        kernbench:sim 0.8.1)."""
        return self._wrap(self._b.fill(_shape(shape), _dtype(dtype), float(value)))

    def sum(self, a, axis=0):
        """Sum over ``axis`` on the MATH unit (the axis is dropped)."""
        return self.reduce("sum", a, axis)

    def max(self, a, axis=0):
        return self.reduce("max", a, axis)

    def min(self, a, axis=0):
        return self.reduce("min", a, axis)

    def reduce(self, op, a, axis=0):
        if op not in ("sum", "max", "min"):
            raise ValueError(f"tl.reduce: op {op!r} is one of sum, max, min")
        return self._wrap(self._b.reduce(op, self._raw(a, f"tl.{op}"), int(axis)))

    def gemm(self, a, b, out_dtype=None):
        """``a [m, k] @ b [k, n]`` on the matrix unit (``a @ b``), rounded
        once to ``out_dtype`` (default: the inputs' dtype)."""
        out = _dtype(out_dtype or a.dtype)
        return self._wrap(self._b.gemm(self._raw(a, "tl.gemm"), self._raw(b, "tl.gemm"), out))

    COMPOSITES = ("gemm", "gemm-acc", "gemm-bias", "gemm-relu", "gemm-bias-relu")

    def composite(self, op, a, b, c=None, out_dtype=None):
        """The seed's ``tl.composite``: ``a @ b`` on the matrix unit, then
        ``op``'s epilogue on the MATH unit, one non-blocking command:
        ``gemm-acc`` is ``c + a @ b`` (``c`` is ``[m, n]``), ``gemm-bias``
        ``a @ b + c`` (``c`` a bias row ``[n]``), ``gemm-relu``
        ``relu(a @ b)``, ``gemm-bias-relu`` ``relu(a @ b + c)``. Rounded
        once to ``out_dtype`` (default: the inputs' dtype)."""
        if op not in self.COMPOSITES:
            raise ValueError(f"tl.composite: op {op!r} is one of {', '.join(self.COMPOSITES)}")
        call = f"tl.composite({op})"
        out = _dtype(out_dtype or a.dtype)
        raw_c = None if c is None else self._raw(c, call)
        return self._wrap(self._b.composite(op, self._raw(a, call), self._raw(b, call), raw_c, out))

    def scale(self, a, factor):
        """``a * factor`` on the MATH unit."""
        return self._wrap(self._b.scale(self._raw(a, "tl.scale"), float(factor)))

    def now_ps(self):
        """Simulated time of this PE in picoseconds (0 in the mock)."""
        return self._b.now_ps()

    def log(self, msg):
        """A trace line, printed with the PE's name."""
        self._b.log(str(msg))
