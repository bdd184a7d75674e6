//! The MATH unit's element-wise binary ops as the mock computes them: the
//! host's results, bit for bit (floats computed in f64 and rounded once;
//! integers exact and wrapping).

use crate::{BinOp, Dtype};

pub(super) fn elementwise(op: BinOp, dtype: Dtype, a: &[u8], b: &[u8]) -> Vec<u8> {
    if dtype.is_integer() {
        return integer_elementwise(op, dtype, a, b);
    }
    let (x, y) = (dtype.decode(a), dtype.decode(b));
    let r: Vec<f64> = x
        .iter()
        .zip(&y)
        .map(|(&p, &q)| match op {
            BinOp::Add => p + q,
            BinOp::Sub => p - q,
            BinOp::Mul => p * q,
            BinOp::Max => p.max(q),
            BinOp::Min => p.min(q),
            BinOp::Div => p / q,
        })
        .collect();
    dtype.encode(&r)
}

/// [`elementwise`] of an integer dtype as the host's MATH unit does it:
/// exact, add / sub / mul wrapping at the dtype's width (two's
/// complement), div truncating toward zero and 0 for a zero divisor.
fn integer_elementwise(op: BinOp, dtype: Dtype, a: &[u8], b: &[u8]) -> Vec<u8> {
    let width = dtype.itemsize();
    let signed = matches!(dtype, Dtype::I8 | Dtype::I32 | Dtype::I64);
    // An element as i128 (sign- or zero-extended from its bytes).
    let read = |c: &[u8]| -> i128 {
        let mut buf = [0u8; 16];
        buf[..width].copy_from_slice(c);
        if signed && c[width - 1] & 0x80 != 0 {
            buf[width..].fill(0xff);
        }
        i128::from_le_bytes(buf)
    };
    let mut out = Vec::with_capacity(a.len());
    for (p, q) in a.chunks_exact(width).zip(b.chunks_exact(width)) {
        let (p, q) = (read(p), read(q));
        let r = match op {
            BinOp::Add => p.wrapping_add(q),
            BinOp::Sub => p.wrapping_sub(q),
            BinOp::Mul => p.wrapping_mul(q),
            BinOp::Max => p.max(q),
            BinOp::Min => p.min(q),
            BinOp::Div if q == 0 => 0,
            // In range but for MIN / -1, which wraps to MIN (as `wrapping_div`).
            BinOp::Div => p / q,
        };
        // The low `width` bytes: the result wrapped to the dtype.
        out.extend_from_slice(&r.to_le_bytes()[..width]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_math_wraps_and_is_exact_as_the_host_s() {
        let op = |op, dt: Dtype, x: &[u8], y: &[u8]| integer_elementwise(op, dt, x, y);
        let i8s = |v: &[i8]| v.iter().map(|&x| x as u8).collect::<Vec<u8>>();
        assert_eq!(
            op(BinOp::Add, Dtype::I8, &i8s(&[100]), &i8s(&[100])),
            i8s(&[-56])
        );
        assert_eq!(
            op(BinOp::Div, Dtype::I8, &i8s(&[-128, 7]), &i8s(&[-1, 0])),
            i8s(&[-128, 0])
        );
        assert_eq!(op(BinOp::Add, Dtype::U8, &[200], &[100]), [44]);
        assert_eq!(op(BinOp::Max, Dtype::U8, &[200], &[100]), [200]);
        let big = ((1i64 << 60) + 1).to_le_bytes();
        let r = op(BinOp::Sub, Dtype::I64, &big, &1i64.to_le_bytes());
        assert_eq!(r, (1i64 << 60).to_le_bytes());
        let r = op(
            BinOp::Max,
            Dtype::U64,
            &u64::MAX.to_le_bytes(),
            &1u64.to_le_bytes(),
        );
        assert_eq!(r, u64::MAX.to_le_bytes());
        let r = op(
            BinOp::Mul,
            Dtype::U32,
            &u32::MAX.to_le_bytes(),
            &2u32.to_le_bytes(),
        );
        assert_eq!(r, (u32::MAX - 1).to_le_bytes());
    }
}
