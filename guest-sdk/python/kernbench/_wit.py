"""Dtype names to and from the WIT enum (inside a component only)."""

from wit_world.imports import types as _types

DTYPE = {
    "f16": _types.Dtype.F16,
    "bf16": _types.Dtype.BF16,
    "f32": _types.Dtype.F32,
    "i32": _types.Dtype.I32,
    "i8": _types.Dtype.I8,
    "u8": _types.Dtype.U8,
    "u32": _types.Dtype.U32,
    "i64": _types.Dtype.I64,
    "u64": _types.Dtype.U64,
    "f64": _types.Dtype.F64,
}
DTYPE_NAME = {v: k for k, v in DTYPE.items()}
