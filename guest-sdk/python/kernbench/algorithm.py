"""Export a seed-style algorithm module as the ``algorithm-full`` world
(inside a component only: it uses the bindings componentize-py generates).
``kernbench-host build MODULE.py`` writes the glue."""

from wit_world.imports import ccl as _ccl
from wit_world.imports import tl as _wtl

from componentize_py_types import Err

from . import contract
from ._wit import DTYPE as _DT
from ._wit import DTYPE_NAME as _DT_NAME
from .tl import Tl

_OP = {
    "add": _wtl.Binop.ADD,
    "sub": _wtl.Binop.SUB,
    "mul": _wtl.Binop.MUL,
    "max": _wtl.Binop.MAX,
    "min": _wtl.Binop.MIN,
    "div": _wtl.Binop.DIV,
}
_UNARY = {name: getattr(_wtl.UnaryOp, name.upper()) for name in
          ("neg", "abs", "exp", "log", "sqrt", "relu", "recip")}
_REDUCE = {name: getattr(_wtl.ReduceOp, name.upper()) for name in ("sum", "max", "min")}
_COMPOSITE = {name: getattr(_wtl.CompositeOp, name.upper().replace("-", "_")) for name in
              ("gemm", "gemm-acc", "gemm-bias", "gemm-relu", "gemm-bias-relu")}


class _Host:
    """The ``tl`` backend of a component: the simulator host's imports."""

    program_id = staticmethod(_wtl.program_id)
    num_programs = staticmethod(_wtl.num_programs)
    store = staticmethod(_wtl.store)
    send = staticmethod(_wtl.send)
    now_ps = staticmethod(_wtl.now_ps)
    log = staticmethod(_wtl.log)

    @staticmethod
    def load(addr, shape, dtype):
        return _wtl.load(addr, shape, _DT[dtype])

    @staticmethod
    def recv(dir, shape, dtype):
        return _wtl.recv(dir, shape, _DT[dtype])

    @staticmethod
    def send_addr(dir, addr, shape, dtype):
        _wtl.send_addr(dir, addr, shape, _DT[dtype])

    @staticmethod
    def recv_async(dir, shape, dtype):
        return _wtl.recv_async(dir, shape, _DT[dtype])

    @staticmethod
    def wait(future):
        return _wtl.wait(future)

    @staticmethod
    def recv_into(dir, shape, dtype, dst):
        return _wtl.recv_into(dir, shape, _DT[dtype], dst)

    @staticmethod
    def binary(op, a, b):
        return _wtl.binary(_OP[op], a, b)

    @staticmethod
    def scale(a, f):
        return _wtl.scale(a, f)

    @staticmethod
    def unary(op, a):
        return _wtl.unary(_UNARY[op], a)

    @staticmethod
    def cast(a, dtype):
        return _wtl.cast(a, _DT[dtype])

    @staticmethod
    def fill(shape, dtype, value):
        return _wtl.fill(shape, _DT[dtype], value)

    @staticmethod
    def reduce(op, a, axis):
        return _wtl.reduce(_REDUCE[op], a, axis)

    @staticmethod
    def gemm(a, b, out_dtype):
        return _wtl.gemm(a, b, _DT[out_dtype])

    @staticmethod
    def composite(op, a, b, c, out_dtype):
        return _wtl.composite(_COMPOSITE[op], a, b, c, _DT[out_dtype])

    @staticmethod
    def shape(raw):
        return raw.shape()

    @staticmethod
    def dtype(raw):
        return _DT_NAME[raw.dtype()]

    @staticmethod
    def addr(raw):
        return raw.addr()

    @staticmethod
    def nbytes(raw):
        return raw.nbytes()


def _param(p):
    return p.name, p.value.value


_COLLECTIVES = ("all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter",
                "all_to_all")


def _collective_out(name):
    if name not in _COLLECTIVES:
        raise ValueError(f"COLLECTIVES: unknown collective {name!r} (known: {_COLLECTIVES})")
    return getattr(_ccl.Collective, name.upper())


def _call_in(call):
    """The WIT call as the dict a module's ``kernel_args_for`` gets."""
    return {
        "collective": call.collective.name.lower(),
        "dtype": _DT_NAME[call.dtype],
        "op": call.op.name.lower(),
        "root": call.root,
        "block": call.block,
        "world_size": call.world_size,
        "cube_w": call.cube_w,
        "cube_h": call.cube_h,
    }


def export_algorithm(module):
    """The ``WitWorld`` class componentize-py exports for ``module``."""
    tl = Tl(_Host())

    class WitWorld:
        def kernel(self, t_ptr, args):
            contract.call_kernel(module.kernel, t_ptr, list(args), tl)

        def kernel_args(self, world_size, n_elem, cube_w, cube_h):
            return contract.call_kernel_args(
                module.kernel_args, world_size, n_elem, cube_w, cube_h, {}
            )

        def kernel_args_with(self, world_size, n_elem, cube_w, cube_h, params):
            try:
                return contract.call_kernel_args(
                    module.kernel_args,
                    world_size,
                    n_elem,
                    cube_w,
                    cube_h,
                    dict(_param(p) for p in params),
                )
            except (contract.ParameterError, TypeError, ValueError) as e:
                raise Err(str(e))

        def collectives(self):
            # A module lists what it implements in COLLECTIVES (PyTorch's
            # names); without it, all_reduce only.
            return [_collective_out(c) for c in getattr(module, "COLLECTIVES", ("all_reduce",))]

        def out_of_place(self):
            # OUT_OF_PLACE lists those of all_reduce, broadcast and reduce
            # whose kernel reads t_ptr and writes the output address the
            # host then appends after its four values; default: none.
            return [_collective_out(c) for c in getattr(module, "OUT_OF_PLACE", ())]

        def kernel_args_for(self, call, params):
            given = dict(_param(p) for p in params)
            c = _call_in(call)
            if hasattr(module, "kernel_args_for"):
                try:
                    return [int(a) for a in module.kernel_args_for(c, **given)]
                except (contract.ParameterError, TypeError, ValueError) as e:
                    raise Err(str(e))
            if (c["collective"], c["dtype"], c["op"]) == ("all_reduce", "f16", "sum"):
                return self.kernel_args_with(
                    call.world_size, call.block, call.cube_w, call.cube_h, params
                )
            raise Err("implements only an f16 sum all_reduce (the seed's ABI)")

        def topo_name_to_kind(self, name):
            return contract.topo_kind(module, name)

        def entry_defaults(self):
            d = dict(getattr(module, "ENTRY_DEFAULTS", {}))
            keys = ("topology", "mapper", "buffer_kind", "n_slots", "slot_size", "validator")
            unknown = sorted(set(d) - set(keys))
            if unknown:
                raise ValueError(f"ENTRY_DEFAULTS: unknown keys {unknown} (known: {keys})")
            return _ccl.EntryDefaults(*(d.get(k) for k in keys))

        def neighbors(self, rank, world_size, neighbor_map):
            links = [(l.dir, l.peer, l.peer_dir) for l in neighbor_map]
            row = contract.neighbors_row(module, rank, world_size, links)
            if row is None:
                return None
            return [_ccl.Link(d, p, pd) for d, p, pd in row]

    return WitWorld
