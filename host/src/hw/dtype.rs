//! Tensor element types and element-wise math on raw little-endian bytes
//! (host-side math with `ndarray`; f16/bf16 via `half`, computed in f32
//! and rounded once, which is exact rounding for add/sub/mul/max/min).

use half::{bf16, f16};
use ndarray::{Array1, Zip};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    F16,
    Bf16,
    F32,
    I32,
}

/// Element-wise binary operations of the MATH unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Max,
    Min,
}

impl BinOp {
    /// The name as the WIT spells it.
    pub const fn name(self) -> &'static str {
        match self {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "mul",
            BinOp::Max => "max",
            BinOp::Min => "min",
        }
    }
}

impl Dtype {
    pub const fn itemsize(self) -> u64 {
        match self {
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::F32 | Dtype::I32 => 4,
        }
    }

    /// Bytes of a tensor of `shape` in this dtype (checked: a count that
    /// does not fit in 64 bits is an error, never a wrapped number).
    pub fn nbytes(self, shape: &[u32]) -> Result<u64, crate::units::SizeOverflow> {
        crate::units::tensor_size(shape, self.itemsize()).map(|(_, b)| b)
    }

    pub const fn name(self) -> &'static str {
        match self {
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
            Dtype::F32 => "f32",
            Dtype::I32 => "i32",
        }
    }

    /// Decode to f64 (exact for every supported type).
    pub fn to_f64(self, bytes: &[u8]) -> Vec<f64> {
        let n = self.itemsize() as usize;
        bytes
            .chunks_exact(n)
            .map(|c| match self {
                Dtype::F16 => f16::from_le_bytes([c[0], c[1]]).to_f64(),
                Dtype::Bf16 => bf16::from_le_bytes([c[0], c[1]]).to_f64(),
                Dtype::F32 => f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
                Dtype::I32 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
            })
            .collect()
    }

    /// Encode from f64, rounding to nearest (saturating for i32).
    pub fn from_f64(self, values: &[f64]) -> Vec<u8> {
        let mut out = Vec::with_capacity(values.len() * self.itemsize() as usize);
        for &v in values {
            match self {
                Dtype::F16 => out.extend_from_slice(&f16::from_f64(v).to_le_bytes()),
                Dtype::Bf16 => out.extend_from_slice(&bf16::from_f64(v).to_le_bytes()),
                Dtype::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
                Dtype::I32 => out.extend_from_slice(&(v.round() as i32).to_le_bytes()),
            }
        }
        out
    }
}

fn apply_f32(op: BinOp, a: f32, b: f32) -> f32 {
    match op {
        BinOp::Add => a + b,
        BinOp::Sub => a - b,
        BinOp::Mul => a * b,
        BinOp::Max => a.max(b),
        BinOp::Min => a.min(b),
    }
}

fn to_f32(dtype: Dtype, bytes: &[u8]) -> Array1<f32> {
    bytes
        .chunks_exact(2)
        .map(|c| match dtype {
            Dtype::F16 => f16::from_le_bytes([c[0], c[1]]).to_f32(),
            _ => bf16::from_le_bytes([c[0], c[1]]).to_f32(),
        })
        .collect()
}

/// `a op b` element-wise on encoded bytes of equal length.
pub fn binary(op: BinOp, dtype: Dtype, a: &[u8], b: &[u8]) -> Vec<u8> {
    debug_assert_eq!(a.len(), b.len());
    match dtype {
        Dtype::F16 | Dtype::Bf16 => {
            let (x, y) = (to_f32(dtype, a), to_f32(dtype, b));
            let mut out = Vec::with_capacity(a.len());
            Zip::from(&x).and(&y).for_each(|&p, &q| {
                let r = apply_f32(op, p, q);
                let bytes = if dtype == Dtype::F16 {
                    f16::from_f32(r).to_le_bytes()
                } else {
                    bf16::from_f32(r).to_le_bytes()
                };
                out.extend_from_slice(&bytes);
            });
            out
        }
        Dtype::F32 => {
            let x: Array1<f32> = a
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            let y: Array1<f32> = b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            let mut out = Vec::with_capacity(a.len());
            Zip::from(&x)
                .and(&y)
                .for_each(|&p, &q| out.extend_from_slice(&apply_f32(op, p, q).to_le_bytes()));
            out
        }
        Dtype::I32 => {
            let x: Array1<i32> = a
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            let y: Array1<i32> = b
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            let mut out = Vec::with_capacity(a.len());
            Zip::from(&x).and(&y).for_each(|&p, &q| {
                let r = match op {
                    BinOp::Add => p.wrapping_add(q),
                    BinOp::Sub => p.wrapping_sub(q),
                    BinOp::Mul => p.wrapping_mul(q),
                    BinOp::Max => p.max(q),
                    BinOp::Min => p.min(q),
                };
                out.extend_from_slice(&r.to_le_bytes());
            });
            out
        }
    }
}

/// `a * factor` element-wise.
pub fn scale(dtype: Dtype, a: &[u8], factor: f64) -> Vec<u8> {
    let v: Vec<f64> = dtype.to_f64(a).into_iter().map(|x| x * factor).collect();
    dtype.from_f64(&v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_add_rounds_once() {
        let a = Dtype::F16.from_f64(&[1.0, 2048.0, -3.5]);
        let b = Dtype::F16.from_f64(&[2.0, 1.0, 0.25]);
        let r = Dtype::F16.to_f64(&binary(BinOp::Add, Dtype::F16, &a, &b));
        assert_eq!(r, vec![3.0, 2048.0, -3.25]); // 2049 rounds to even
    }

    #[test]
    fn i32_and_f32_ops() {
        let a = Dtype::I32.from_f64(&[5.0, -2.0]);
        let b = Dtype::I32.from_f64(&[3.0, 7.0]);
        assert_eq!(
            Dtype::I32.to_f64(&binary(BinOp::Max, Dtype::I32, &a, &b)),
            vec![5.0, 7.0]
        );
        let a = Dtype::F32.from_f64(&[1.5]);
        assert_eq!(
            Dtype::F32.to_f64(&binary(BinOp::Mul, Dtype::F32, &a, &a)),
            vec![2.25]
        );
    }
}
