"""The SIP network kinds passed to kernels as ``sip_topo_kind`` (ADR-0050 D1)."""

SIP_TOPO_RING = 0
SIP_TOPO_TORUS = 1
SIP_TOPO_MESH = 2

_STANDARD = {
    "ring_1d": SIP_TOPO_RING,
    "torus_2d": SIP_TOPO_TORUS,
    "mesh_2d_no_wrap": SIP_TOPO_MESH,
}


def standard_kind(name):
    """The kind of ``system.sips.topology`` ``name``, or None."""
    return _STANDARD.get(name)
