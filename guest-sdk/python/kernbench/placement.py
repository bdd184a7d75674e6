"""``DPPolicy``: the layout of a tensor inside one SIP (seed ADR-0026)."""

_MODES = ("replicate", "row_wise", "column_wise", "tiled")


class DPPolicy:
    """How the cubes of a SIP, then the PEs of each cube, share a tensor.

    ``cube`` / ``pe``: ``"replicate"``, ``"row_wise"``, ``"column_wise"`` or
    ``"tiled"``. There is no SIP axis: the device is the one
    ``torch.ahbm.set_device`` chose (``sip=`` / ``num_sips=`` are a
    TypeError, as in the seed).
    """

    __slots__ = ("cube", "pe", "num_cubes", "num_pes")

    def __init__(self, cube="replicate", pe="replicate", num_cubes=1, num_pes=1, **kw):
        for bad in ("sip", "num_sips"):
            if bad in kw:
                raise TypeError(
                    f"DPPolicy() got an unexpected keyword argument '{bad}': placement "
                    "across SIPs comes only from torch.ahbm.set_device (ADR-0026)"
                )
        if kw:
            raise TypeError(f"DPPolicy() got unexpected keyword arguments {sorted(kw)}")
        for level, mode in (("cube", cube), ("pe", pe)):
            if mode not in _MODES:
                raise ValueError(f"DPPolicy {level}={mode!r}: one of {', '.join(_MODES)}")
        self.cube, self.pe = cube, pe
        self.num_cubes, self.num_pes = int(num_cubes), int(num_pes)

    def __repr__(self):
        return (
            f"DPPolicy(cube={self.cube!r}, pe={self.pe!r}, "
            f"num_cubes={self.num_cubes}, num_pes={self.num_pes})"
        )
