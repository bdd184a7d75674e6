"""A seed-style bench module as the ``bench`` world: ``run(torch)`` is the
entry point, ``worker(rank, world_size, torch)`` one rank of
``torch.multiprocessing.spawn`` (inside a component only: it uses the
bindings componentize-py generates). ``torch`` here is the simulator's
PyTorch-like surface: ``torch.zeros``, ``torch.distributed``,
``torch.multiprocessing``, ``torch.ahbm`` / ``torch.accelerator``, plus
``torch.report`` for the result table and ``torch.argv`` (the bench's
command-line arguments)."""

import traceback as _traceback

from componentize_py_types import Err
from wit_world.imports import accelerator as _acc
from wit_world.imports import ahbm as _ahbm
from wit_world.imports import distributed as _dist
from wit_world.imports import multiprocessing as _mp
from wit_world.imports import report as _report
from wit_world.imports import torch as _torch

from ._wit import DTYPE as _DT
from ._wit import DTYPE_NAME as _DT_NAME
from .placement import DPPolicy

_MODE = {
    "replicate": _torch.DpMode.REPLICATE,
    "row_wise": _torch.DpMode.ROW_WISE,
    "column_wise": _torch.DpMode.COLUMN_WISE,
    "tiled": _torch.DpMode.TILED,
}


def _unwrap(e):
    """A WIT error as the Python exception the seed raises."""
    v = e.value
    if isinstance(v, _dist.DistError_ValueError):
        return ValueError(v.value)
    if isinstance(v, _dist.DistError_NotImplemented):
        return NotImplementedError(v.value)
    if isinstance(v, _dist.DistError_RuntimeError):
        return RuntimeError(v.value)
    return RuntimeError(str(v))


def _call(f, *args):
    try:
        return f(*args)
    except Err as e:
        raise _unwrap(e) from None


def _flatten(values):
    out = []
    stack = [values]
    while stack:
        v = stack.pop()
        if isinstance(v, (list, tuple)):
            stack.extend(reversed(v))
        elif isinstance(v, Tensor):
            out.extend(v.flat())
        else:
            out.append(float(v))
    return out


class Tensor:
    """A device tensor on the calling rank's SIP."""

    __slots__ = ("_t",)

    def __init__(self, t):
        self._t = t

    @property
    def shape(self):
        return tuple(self._t.shape())

    @property
    def dtype(self):
        return _DT_NAME[self._t.dtype()]

    def numel(self):
        return self._t.numel()

    @property
    def nbytes(self):
        return self._t.nbytes()

    @property
    def device(self):
        return self._t.device()

    def data_ptr(self):
        """The tensor's virtual base on its SIP (a kernel's ``t_ptr``)."""
        return self._t.data_ptr()

    def shards(self):
        """``ShardSpec(sip, cube, pe)`` of every shard, in (cube, pe) order."""
        return self._t.shards()

    def copy_(self, values):
        """Overwrite the contents with ``values`` (nested lists, a flat
        sequence or another tensor), as ``Tensor.copy_``."""
        flat = _flatten(values)
        if len(flat) != self.numel():
            raise ValueError(f"copy_: {len(flat)} values for a tensor of {self.numel()}")
        _call(self._t.copy_from_f64, flat)
        return self

    def copy_at(self, first, values):
        """Overwrite elements ``first..`` with ``values`` (a large tensor in pieces)."""
        _call(self._t.copy_from_f64_at, first, [float(v) for v in values])

    def flat(self, first=0, count=None):
        """Elements ``first .. first + count`` as floats, row-major."""
        if first == 0 and count is None:
            return _call(self._t.to_f64)
        count = self.numel() - first if count is None else count
        return _call(self._t.to_f64_range, first, count)

    def tolist(self):
        """The contents as nested lists, as ``Tensor.tolist``."""
        flat = self.flat()
        for d in reversed(self.shape[1:]):
            flat = [flat[i : i + d] for i in range(0, len(flat), d)]
        return flat


def _op(op):
    """A ``ReduceOp`` (its name) or a name, as the host spells it."""
    return str(op).lower()


class Launched:
    """A ``torch.launch_async`` in flight."""

    def __init__(self, handle):
        self._h = handle

    def wait(self):
        """The simulated picoseconds the launch took; its error raised."""
        return _call(self._h.wait)

    def is_completed(self):
        """Whether it has ended (a False costs 100 ns of simulated time)."""
        return self._h.is_completed()


class Work:
    """PyTorch's ``Work``: a call made with ``async_op=True`` (and
    ``isend`` / ``irecv``). A rank's calls on one group run in its issue
    order, different groups' at once; dropping it does not cancel the
    call, and a call that fails with nobody waiting fails the bench when
    it returns."""

    def __init__(self, w):
        self._w = w

    def wait(self, timeout=None):
        """Wait until the call has ended on every rank of its group; raise
        its error as the blocking call would have. True, as PyTorch's."""
        _call(self._w.wait)
        return True

    def is_completed(self):
        """Whether it has ended (a False costs 100 ns of simulated time)."""
        return self._w.is_completed()


class ProcessGroup:
    """A process group: ``new_group``'s, or the default group
    (``dist.group.WORLD``). Its id is the same on every rank."""

    def __init__(self, gid, ranks):
        self._id, self._ranks = gid, list(ranks)

    def size(self):
        return len(self._ranks)

    def rank(self):
        """This rank's rank in the group, -1 when it is not a member."""
        me = _call(_dist.get_rank)
        return self._ranks.index(me) if me in self._ranks else -1

    def __repr__(self):
        return f"ProcessGroup(id={self._id}, ranks={self._ranks})"


class _NonGroupMember:
    """What ``new_group`` returns to a rank outside the group (PyTorch's
    ``GroupMember.NON_GROUP_MEMBER``): calls on it return at once."""

    def __repr__(self):
        return "NON_GROUP_MEMBER"


class GroupMember:
    """``torch.distributed.GroupMember``."""

    WORLD = None  # the default group (``group=None``)
    NON_GROUP_MEMBER = _NonGroupMember()


class _Group:
    """``torch.distributed.group``: ``group.WORLD``."""

    @property
    def WORLD(self):
        return ProcessGroup(0, _call(_dist.group_ranks, 0))


class DeviceMesh:
    """``torch.distributed.device_mesh.DeviceMesh``: ranks laid out as an
    n-dimensional array (row-major), a process group along each
    dimension. ``mesh.get_group(dim)`` is the group of this rank along
    ``dim`` (an index or a name)."""

    def __init__(self, device_type, shape, names, groups):
        self.device_type = device_type
        self.shape = tuple(shape)
        self.mesh_dim_names = tuple(names) if names else None
        self._groups = groups  # per dim, this rank's group

    @property
    def ndim(self):
        return len(self.shape)

    def _dim(self, dim):
        if isinstance(dim, str):
            if not self.mesh_dim_names or dim not in self.mesh_dim_names:
                raise KeyError(f"mesh dimension {dim!r} is not one of {self.mesh_dim_names}")
            return self.mesh_dim_names.index(dim)
        if dim is None:
            if self.ndim != 1:
                raise RuntimeError("get_group: a mesh of several dimensions needs mesh_dim")
            return 0
        return int(dim)

    def get_group(self, mesh_dim=None):
        return self._groups[self._dim(mesh_dim)]

    def size(self, mesh_dim=None):
        if mesh_dim is None:
            n = 1
            for d in self.shape:
                n *= d
            return n
        return self.shape[self._dim(mesh_dim)]

    def get_local_rank(self, mesh_dim=None):
        return self.get_group(mesh_dim).rank()

    def get_rank(self):
        return _call(_dist.get_rank)

    def __getitem__(self, name):
        d = self._dim(name)
        return DeviceMesh(self.device_type, (self.shape[d],), (name,) if isinstance(name, str)
                          else None, [self._groups[d]])

    def __repr__(self):
        return f"DeviceMesh({self.device_type!r}, {self.shape}, mesh_dim_names={self.mesh_dim_names})"


def _mesh_groups(shape):
    """For each dimension of a row-major mesh of ``shape``, the rank
    lists of its groups, in the order PyTorch makes them."""
    import itertools
    strides = []
    acc = 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    strides.reverse()
    per_dim = []
    for dim in range(len(shape)):
        others = [range(n) if i != dim else range(1) for i, n in enumerate(shape)]
        lists = []
        for idx in itertools.product(*others):
            base = sum(i * s for i, s in zip(idx, strides))
            lists.append([base + k * strides[dim] for k in range(shape[dim])])
        per_dim.append(lists)
    return per_dim


class _Distributed:
    """``torch.distributed`` (seed ADR-0047), with process groups
    (``group=`` on every call)."""

    GroupMember = GroupMember
    ProcessGroup = ProcessGroup

    def __init__(self):
        self.group = _Group()

    def init_process_group(self, backend="ahbm", world_size=None, rank=None, algorithm=None):
        opts = _dist.PgOptions(algorithm) if algorithm else None
        _call(_dist.init_process_group, backend, world_size, rank, opts)

    def is_initialized(self):
        return _dist.is_initialized()

    def get_rank(self, group=None):
        if group is GroupMember.NON_GROUP_MEMBER:
            return -1
        if group is None or group._id == 0:
            return _call(_dist.get_rank)
        return group.rank()

    def get_world_size(self, group=None):
        if group is GroupMember.NON_GROUP_MEMBER:
            return -1
        if group is None:
            return _call(_dist.get_world_size)
        return group.size()

    def get_backend(self, group=None):
        return _call(_dist.get_backend)

    def new_group(self, ranks=None, algorithm=None, **_ignored):
        """A process group of the world's ``ranks`` (all when None),
        sorted as PyTorch sorts them, with IPCQ of its own. Every rank
        calls it, in the same order with the same ranks; a rank outside
        the group gets ``GroupMember.NON_GROUP_MEMBER``. ``algorithm`` is
        the ccl.yaml entry serving it (PyTorch's ``pg_options``)."""
        if ranks is None:
            ranks = range(_call(_dist.get_world_size))
        opts = _dist.PgOptions(algorithm) if algorithm else None
        gid = _call(_dist.new_group, [int(r) for r in ranks], opts)
        group = ProcessGroup(gid, _call(_dist.group_ranks, gid))
        return group if group.rank() >= 0 else GroupMember.NON_GROUP_MEMBER

    def new_subgroups(self, group_size=None, **_ignored):
        """The world cut into consecutive groups of ``group_size`` ranks:
        (this rank's group, every group)."""
        world = _call(_dist.get_world_size)
        if group_size is None or group_size <= 0 or world % group_size:
            raise ValueError(f"The world size ({world}) must be divisible by group_size ({group_size})")
        lists = [list(range(s, s + group_size)) for s in range(0, world, group_size)]
        return self.new_subgroups_by_enumeration(lists)

    def new_subgroups_by_enumeration(self, ranks_per_subgroup_list, **_ignored):
        """A group of each list (no rank in two): (this rank's group,
        every group)."""
        seen = set()
        for ranks in ranks_per_subgroup_list:
            for r in ranks:
                if r in seen:
                    raise ValueError(f"Rank {r} has appeared in multiple subgroups.")
                seen.add(r)
        mine, groups = None, []
        for ranks in ranks_per_subgroup_list:
            gid = _call(_dist.new_group, [int(r) for r in ranks], None)
            g = ProcessGroup(gid, _call(_dist.group_ranks, gid))
            groups.append(g)
            if g.rank() >= 0:
                mine = g
        return mine, groups

    def get_process_group_ranks(self, group):
        return list(group._ranks)

    def get_global_rank(self, group, group_rank):
        if group is None or group._id == 0:
            return group_rank
        if not 0 <= group_rank < group.size():
            raise ValueError(f"Group rank {group_rank} is not part of group {group}")
        return group._ranks[group_rank]

    def get_group_rank(self, group, global_rank):
        if group is None or group._id == 0:
            return global_rank
        if global_rank not in group._ranks:
            raise ValueError(f"Global rank {global_rank} is not part of group {group}")
        return group._ranks.index(global_rank)

    class ReduceOp:
        """``torch.distributed.ReduceOp``: the ops are their names
        (``PREMUL_SUM`` takes a factor: ``_make_nccl_premul_sum``)."""

        SUM, PRODUCT, MAX, MIN, AVG = "sum", "prod", "max", "min", "avg"
        PREMUL_SUM = "premul_sum"

    def _make_nccl_premul_sum(self, factor):
        """PyTorch's premul_sum op: the sum of every rank's input times
        that rank's own ``factor`` (a number, or a one-element tensor)."""
        if hasattr(factor, "tolist"):
            values = factor.tolist()
            while isinstance(values, list):
                if len(values) != 1:
                    raise ValueError("_make_nccl_premul_sum: a tensor factor must hold one element")
                values = values[0]
            factor = values
        return "premul_sum:" + repr(float(factor))

    def _issue(self, group, call, tensors, op="sum", peer=0):
        """``call`` with ``async_op=True``: its ``Work`` (None on a rank
        outside the group, as PyTorch returns)."""
        if group is GroupMember.NON_GROUP_MEMBER:
            return None
        gid = 0 if group is None else group._id
        w = _call(_dist.group_call_async, gid, call, [t._t for t in tensors], _op(op), int(peer))
        return Work(w)

    def isend(self, tensor, dst, group=None):
        """``torch.distributed.isend``: a ``Work``; ``dst`` a world rank."""
        return self._issue(group, "send", [tensor], peer=dst)

    def irecv(self, tensor, src, group=None):
        """``torch.distributed.irecv``: a ``Work``; ``src`` a world rank."""
        return self._issue(group, "recv", [tensor], peer=src)

    def _on(self, group, call, tensors, op="sum", peer=0):
        """``call`` with ``group=``: False when the default group's own
        call should run; None at once on a rank outside the group."""
        if group is None:
            return False
        if group is GroupMember.NON_GROUP_MEMBER:
            return True
        _call(_dist.group_call, group._id, call, [t._t for t in tensors], _op(op), int(peer))
        return True

    def all_reduce(self, tensor, op="sum", group=None, async_op=False):
        if async_op:
            return self._issue(group, "all_reduce", [tensor], op)
        if not self._on(group, "all_reduce", [tensor], op):
            _call(_dist.all_reduce, tensor._t, _op(op))

    def broadcast(self, tensor, src, group=None, async_op=False):
        if async_op:
            return self._issue(group, "broadcast", [tensor], peer=src)
        if not self._on(group, "broadcast", [tensor], peer=src):
            _call(_dist.broadcast, tensor._t, src)

    def reduce(self, tensor, dst, op="sum", group=None, async_op=False):
        if async_op:
            return self._issue(group, "reduce", [tensor], op, dst)
        if not self._on(group, "reduce", [tensor], op, dst):
            _call(_dist.reduce, tensor._t, dst, _op(op))

    def all_gather_into_tensor(self, output_tensor, input_tensor, group=None, async_op=False):
        if async_op:
            return self._issue(group, "all_gather_into_tensor", [output_tensor, input_tensor])
        if not self._on(group, "all_gather_into_tensor", [output_tensor, input_tensor]):
            _call(_dist.all_gather_into_tensor, output_tensor._t, input_tensor._t)

    def all_gather(self, tensor_list, tensor, group=None, async_op=False):
        if async_op:
            return self._issue(group, "all_gather", [tensor] + list(tensor_list))
        if not self._on(group, "all_gather", [tensor] + list(tensor_list)):
            _call(_dist.all_gather, [t._t for t in tensor_list], tensor._t)

    def reduce_scatter_tensor(self, output, input, op="sum", group=None, async_op=False):
        if async_op:
            return self._issue(group, "reduce_scatter_tensor", [output, input], op)
        if not self._on(group, "reduce_scatter_tensor", [output, input], op):
            _call(_dist.reduce_scatter_tensor, output._t, input._t, _op(op))

    def reduce_scatter(self, output, input_list, op="sum", group=None, async_op=False):
        if async_op:
            return self._issue(group, "reduce_scatter", [output] + list(input_list), op)
        if not self._on(group, "reduce_scatter", [output] + list(input_list), op):
            _call(_dist.reduce_scatter, output._t, [t._t for t in input_list], _op(op))

    def all_to_all_single(self, output, input, output_split_sizes=None, input_split_sizes=None,
                          group=None, async_op=False):
        if output_split_sizes is not None or input_split_sizes is not None:
            raise NotImplementedError("all_to_all_single: only equal splits are supported")
        if async_op:
            return self._issue(group, "all_to_all_single", [output, input])
        if not self._on(group, "all_to_all_single", [output, input]):
            _call(_dist.all_to_all_single, output._t, input._t)

    def send(self, tensor, dst, group=None):
        if not self._on(group, "send", [tensor], peer=dst):
            _call(_dist.send, tensor._t, dst)

    def recv(self, tensor, src, group=None):
        if not self._on(group, "recv", [tensor], peer=src):
            _call(_dist.recv, tensor._t, src)

    def barrier(self, group=None, async_op=False):
        if async_op:
            return self._issue(group, "barrier", [])
        if not self._on(group, "barrier", []):
            _call(_dist.barrier)

    def shards_wanted(self, collective):
        """The shards per SIP a tensor must have for the algorithm that
        runs ``collective`` (its ccl.yaml validator), None: any placement."""
        return _call(_dist.shards_wanted, str(collective))

    def collective_out_of_place(self, collective, output, input, op="sum", root=0, group=None):
        """nccl-tests' out-of-place form of ``collective`` (a KernBench
        extension): ``output`` gets the result, ``input`` is kept.
        All-reduce, broadcast and reduce need an algorithm that runs them
        out of place (else NotImplementedError naming ones that do)."""
        if not self._on(group, "out_of_place:" + str(collective), [output, input], op, root):
            _call(_dist.collective_out_of_place, str(collective), output._t, input._t, _op(op),
                  root)

    def collective_in_place(self, collective, tensor, op="sum", root=0, group=None):
        """nccl-tests' in-place form of ``collective`` on the one buffer
        ``tensor`` (a KernBench extension): all-gather's input is this
        rank's block of it, reduce-scatter's output this rank's block,
        all-to-all sends from and receives into it."""
        if not self._on(group, "in_place:" + str(collective), [tensor], op, root):
            _call(_dist.collective_in_place, str(collective), tensor._t, _op(op), root)

    def init_device_mesh(self, device_type, mesh_shape, mesh_dim_names=None):
        """``torch.distributed.device_mesh.init_device_mesh``: the world's
        ranks as a row-major array of ``mesh_shape`` and a process group
        along each dimension (every rank makes every group, in PyTorch's
        order); ``mesh.get_group(dim)`` is this rank's."""
        shape = tuple(int(d) for d in mesh_shape)
        n = 1
        for d in shape:
            n *= d
        world = _call(_dist.get_world_size)
        if n != world:
            raise RuntimeError(f"init_device_mesh: mesh shape {shape} holds {n} ranks, the world {world}")
        if mesh_dim_names is not None and len(mesh_dim_names) != len(shape):
            raise RuntimeError("init_device_mesh: mesh_dim_names must name every dimension")
        mine = []
        for lists in _mesh_groups(shape):
            mine_here = None
            for ranks in lists:
                g = self.new_group(ranks)
                if g is not GroupMember.NON_GROUP_MEMBER:
                    mine_here = g
            mine.append(mine_here)
        return DeviceMesh(device_type, shape, mesh_dim_names, mine)


class _Multiprocessing:
    """``torch.multiprocessing``."""

    def __init__(self, module, argv):
        self._module, self._argv = module, argv

    def spawn(self, fn=None, args=(), nprocs=1, join=True):
        """Run the module's ``worker`` once per rank, concurrently; return
        when all have finished (the error names the failed ranks)."""
        worker = getattr(self._module, "worker", None)
        if fn is not None and fn is not worker:
            raise ValueError("mp.spawn runs the bench module's worker(rank, world_size, torch)")
        if args:
            raise ValueError("mp.spawn: pass data to workers through torch.argv, not args=")
        _call(_mp.spawn, int(nprocs), list(self._argv))


class _Ahbm:
    """``torch.ahbm``: SIP binding, device properties, simulated time."""

    def set_device(self, device):
        _call(_ahbm.set_device, int(device))

    def current_device(self):
        return _ahbm.current_device()

    def device_count(self):
        return _ahbm.device_count()

    def get_device_properties(self, device):
        return _call(_ahbm.get_device_properties, int(device))

    def now_ps(self):
        return _ahbm.now_ps()

    def gemm(self, m, n, k, dtype="bf16"):
        """An ``[m, k] x [k, n]`` GEMM of ``dtype`` charged to every matrix
        unit of the current device by the roofline (no data moves), after
        the rank's launches in flight; the simulated picoseconds it took.
        Collectives in flight go on meanwhile."""
        if dtype not in _DT:
            raise ValueError(f"dtype {dtype!r}: one of {', '.join(_DT)}")
        return _call(_ahbm.gemm, int(m), int(n), int(k), _DT[dtype])

    def busy(self, ns):
        """Keep every matrix unit of the current device busy for ``ns``
        nanoseconds (as ``gemm``); the picoseconds it took."""
        return _call(_ahbm.busy, int(ns))


class _Accelerator:
    """``torch.accelerator`` (the device-agnostic alias)."""

    def set_device_index(self, device):
        _call(_acc.set_device_index, int(device))

    def current_device_index(self):
        return _acc.current_device_index()


class _Report:
    """Rows of the host's nccl-tests-style table."""

    def record(self, collective, size_bytes, count, dtype, redop, time_ps, wrong):
        row = _report.ResultRow(size_bytes, count, _DT[dtype], redop, time_ps, wrong)
        _report.record_result(collective, row)

    def record_perf(self, collective, size_bytes, count, dtype, redop, out_of_place=None,
                    in_place=None, root=None, aggregation="max"):
        """A row in nccl-tests' layout. ``out_of_place`` and ``in_place`` are
        ``(time_ps, wrong)`` (``wrong`` None: not checked), or None when
        that variant was not run; ``root`` is broadcast's and reduce's;
        ``aggregation`` is how the host combines the ranks' times
        (nccl-tests' ``-a``): "rank0", "mean", "min" or "max"."""
        aggregations = {
            "rank0": _report.TimeAggregation.RANK0,
            "mean": _report.TimeAggregation.MEAN,
            "min": _report.TimeAggregation.MIN,
            "max": _report.TimeAggregation.MAX,
        }
        if aggregation not in aggregations:
            raise ValueError(f"aggregation must be one of {', '.join(aggregations)}, "
                             f"got {aggregation!r}")

        def block(b):
            if b is None:
                return None
            time_ps, wrong = b
            return _report.PerfBlock(int(time_ps), None if wrong is None else int(wrong))

        row = _report.PerfRow(int(size_bytes), int(count), _DT[dtype], str(redop),
                              None if root is None else int(root), block(out_of_place),
                              block(in_place), aggregations[aggregation])
        _report.record_perf(str(collective), row)

    def note(self, text):
        """A ``# text`` line in the report's header, printed once."""
        _report.note(str(text))

    def data_kept(self):
        """False in a ``--timing-only`` run: the host keeps no bytes, so
        filling inputs and checking outputs would be wasted work."""
        return _report.data_kept()

    def record_kernel(self, name, shape, dtype, pes, flops, time_ps, checked=0, wrong=0,
                      max_rel_err=0.0, tolerance=0.0):
        """A row of the compute table: the host adds the achieved FLOP/s,
        the peak of ``pes`` matrix units for ``dtype`` and the efficiency."""
        row = _report.KernelRow(str(name), str(shape), _DT[dtype], int(pes), int(flops),
                                int(time_ps), int(checked), int(wrong), float(max_rel_err),
                                float(tolerance))
        _report.record_kernel(row)


class Torch:
    """The ``torch`` a seed bench receives."""

    def __init__(self, module, argv):
        self.argv = list(argv)
        self.distributed = _Distributed()
        self.multiprocessing = _Multiprocessing(module, argv)
        self.ahbm = _Ahbm()
        self.accelerator = _Accelerator()
        self.report = _Report()

    @property
    def __version__(self):
        """``torch.__version__``: the host's release and the
        ``kernbench:sim`` version it implements, e.g.
        ``kernbench 0.1.0 (kernbench:sim@0.8.4)``."""
        return _torch.version()

    def launch(self, kernel, tensor, *args):
        """Run the kernel component ``kernel`` (an algorithm name or .wasm
        path) on every PE holding a shard of ``tensor``; the simulated
        picoseconds it took. ``tensor`` must be on the current device."""
        return _call(_torch.launch, kernel, tensor._t, [int(a) for a in args])

    def launch_async(self, kernel, tensor, *args):
        """``launch`` without waiting: it runs on the rank's compute stream
        (after its earlier launches) while the bench goes on; a handle with
        ``wait()`` (the picoseconds it took) and ``is_completed()``."""
        return Launched(_call(_torch.launch_async, kernel, tensor._t, [int(a) for a in args]))

    def zeros(self, shape, dtype="f16", dp=None, name=""):
        """A zero tensor on the current device, laid out by ``dp``."""
        if isinstance(shape, int):
            shape = (shape,)
        if dtype not in _DT:
            raise ValueError(f"dtype {dtype!r}: one of {', '.join(_DT)}")
        wit_dp = None
        if dp is not None:
            if not isinstance(dp, DPPolicy):
                raise TypeError("dp must be a kernbench.DPPolicy")
            wit_dp = _torch.DpPolicy(_MODE[dp.cube], _MODE[dp.pe], dp.num_cubes, dp.num_pes)
        return Tensor(_call(_torch.zeros, [int(d) for d in shape], _DT[dtype], wit_dp, name))


def _guest_frames(e):
    """The frames of ``e``'s traceback in the author's code, as the host
    prints a guest's traceback: the SDK's and the glue's frames (under
    componentize-py's ``/<k>/kernbench/`` search paths) left out, paths shown
    without componentize-py's ``/<k>/`` prefix."""
    lines = []
    for fr in _traceback.extract_tb(e.__traceback__):
        path = fr.filename
        parts = path.split("/", 2)
        if len(parts) == 3 and parts[0] == "" and parts[1].isdigit():
            path = parts[2]
        if path.startswith("kernbench/") or path.startswith("kernbench_app"):
            continue
        lines.append(f'  File "{path}", line {fr.lineno}, in {fr.name}')
        if fr.line:
            lines.append(f"      {fr.line.strip()}")
    return lines


def guest_error(e):
    """The message of an exception that ends a bench: its type, its text and
    where in the author's code it was raised."""
    text = f"{type(e).__name__}: {e}"
    header = "\n  Traceback (most recent call last), the guest's code:\n"
    # A spawn whose workers failed carries their tracebacks: the root
    # cause; where `run` called spawn would only add noise.
    frames = [] if header in text else _guest_frames(e)
    if frames:
        text += header + "\n".join(frames)
    return text


def export_bench(module):
    """The ``WitWorld`` class componentize-py exports for ``module``."""

    def guarded(f, *args):
        try:
            f(*args)
        except Err:
            raise
        except Exception as e:
            raise Err(guest_error(e)) from None

    class WitWorld:
        def run(self, args):
            guarded(module.run, Torch(module, args))

        def worker(self, rank, world_size, args):
            guarded(module.worker, rank, world_size, Torch(module, args))

    return WitWorld
