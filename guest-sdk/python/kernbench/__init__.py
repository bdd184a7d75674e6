"""KernBench guest SDK for Python.

Algorithms read like the seed's (seed 003 §1-§2): a module with
``kernel(t_ptr, n_elem, world_size, tl)``, ``kernel_args(world_size, n_elem,
cube_w, cube_h)`` and optionally ``TOPO_NAME_TO_KIND``, ``ENTRY_DEFAULTS`` and
``neighbors(rank, world_size, neighbor_map)``. Benches read like the seed's
``run(torch)`` / ``worker(rank, world_size, torch)``.

Build a module into a component with ``kernbench-host build MODULE.py -o
MODULE.wasm``; run a
kernel natively in milliseconds with :func:`kernbench.mock.run_kernel_in_mock`.
"""

from .tl import Tensor, Tl, DTYPES, ITEMSIZE
from .topo import SIP_TOPO_RING, SIP_TOPO_TORUS, SIP_TOPO_MESH, standard_kind
from .placement import DPPolicy

__all__ = [
    "Tensor",
    "Tl",
    "DTYPES",
    "ITEMSIZE",
    "SIP_TOPO_RING",
    "SIP_TOPO_TORUS",
    "SIP_TOPO_MESH",
    "standard_kind",
    "DPPolicy",
]
