"""How a seed-style algorithm module is called (seed ADR-0050 D2, seed 004
D4), shared by the component glue and the mock: which positional arguments
``kernel`` takes, and ``kernel_args`` called by keyword with the ccl.yaml
parameters."""

import inspect

from .topo import standard_kind

_ARGS_KEYS = ("world_size", "n_elem", "cube_w", "cube_h")


class ParameterError(ValueError):
    """A ccl.yaml parameter the algorithm does not take, or a bad result."""


def kernel_arity(kernel):
    """How many values ``kernel`` takes between ``t_ptr`` and ``tl`` (None:
    any, ``*args``)."""
    sig = inspect.signature(kernel)
    if any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values()):
        return None
    return sum(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in sig.parameters.values()
    ) - 2


def call_kernel(kernel, t_ptr, args, tl):
    """``kernel(t_ptr, *args, tl)``, passing as many of ``args`` as the
    function takes before ``tl`` (the seed's kernels take kernel_args'
    values and, when they want them, the four host-appended ones)."""
    sig = inspect.signature(kernel)
    params = [
        p
        for p in sig.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    takes_all = any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values())
    if takes_all:
        return kernel(t_ptr, *args, tl)
    wanted = len(params) - 2  # t_ptr and tl
    if wanted < 0:
        raise TypeError("kernel must take at least (t_ptr, tl)")
    if wanted > len(args):
        raise TypeError(
            f"kernel takes {wanted} arguments between t_ptr and tl, but kernel_args "
            f"and the host give {len(args)}: {list(args)}"
        )
    return kernel(t_ptr, *args[:wanted], tl)


def call_kernel_args(fn, world_size, n_elem, cube_w, cube_h, params):
    """``kernel_args`` by keyword (seed 004 D4): the four figures it names
    and the ccl.yaml ``params`` (a dict). A parameter it does not take is a
    :class:`ParameterError` naming it and those it takes."""
    sig = inspect.signature(fn)
    named = {
        n
        for n, p in sig.parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
    open_kw = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
    figures = dict(zip(_ARGS_KEYS, (world_size, n_elem, cube_w, cube_h)))
    kwargs = {k: v for k, v in figures.items() if k in named or open_kw}
    unknown = [k for k in params if k not in named and not open_kw]
    if unknown:
        takes = sorted(named - set(_ARGS_KEYS))
        raise ParameterError(
            f"unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
            f"(this algorithm takes {', '.join(takes) if takes else 'none'})"
        )
    kwargs.update(params)
    out = fn(**kwargs)
    try:
        values = [_as_int(v) for v in out]
    except TypeError as e:
        raise ParameterError(f"kernel_args must return integers: {e}") from None
    return values


def _as_int(v):
    if isinstance(v, int):  # bool included: True is 1
        return int(v)
    raise TypeError(f"{v!r} is a {type(v).__name__}")


def topo_kind(module, name):
    """``TOPO_NAME_TO_KIND[name]`` if the module has the dict, else the
    standard kinds (as the Rust SDK)."""
    table = getattr(module, "TOPO_NAME_TO_KIND", None)
    if table is None:
        return standard_kind(name)
    return table.get(name)


def neighbors_row(module, rank, world_size, links):
    """``neighbors(rank, world_size, neighbor_map)`` with the seed's dict
    ``{dir: peer}``. Returns None (keep the row) or ``[(dir, peer,
    peer_dir or None)]``; a dict value may be ``(peer, peer_dir)``."""
    fn = getattr(module, "neighbors", None)
    if fn is None:
        return None
    neighbor_map = {d: p for d, p, _ in links}
    out = fn(rank, world_size, neighbor_map)
    if out is None:
        return None
    row = []
    for d, v in out.items():
        peer, peer_dir = (v if isinstance(v, tuple) else (v, None))
        row.append((str(d), int(peer), peer_dir))
    return row
