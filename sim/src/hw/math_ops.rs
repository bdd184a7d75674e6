//! The MATH unit's unary element-wise ops, casts and reductions over an
//! axis, on encoded little-endian bytes (the binary ops are in
//! [`super::dtype`]). Values are computed in f64 and rounded once to the
//! output dtype: correctly rounded for f16, bf16 and f32 results of the
//! exactly-computed ops (neg, abs, relu, casts; sqrt and reciprocal within
//! f64's own rounding), to nearest and saturating for the integers
//! (i64 / u64 past 2^53 are rounded to f64 on the way).

use super::dtype::Dtype;

/// Element-wise unary operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum UnaryOp {
    Neg,
    Abs,
    Exp,
    Log,
    Sqrt,
    Relu,
    /// `1 / x`.
    Recip,
}

impl UnaryOp {
    /// Every UnaryOp, in declaration order (an element's index is its
    /// discriminant: the recorded command list stores it as a byte).
    pub const ALL: [UnaryOp; 7] = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Relu,
        UnaryOp::Recip,
    ];

    /// The name as the WIT spells it.
    pub const fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Relu => "relu",
            UnaryOp::Recip => "recip",
        }
    }

    fn apply(self, x: f64) -> f64 {
        match self {
            UnaryOp::Neg => -x,
            UnaryOp::Abs => x.abs(),
            UnaryOp::Exp => x.exp(),
            UnaryOp::Log => x.ln(),
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Relu => x.max(0.0),
            UnaryOp::Recip => 1.0 / x,
        }
    }
}

/// Reductions over one axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
}

impl ReduceOp {
    /// Every ReduceOp, in declaration order (an element's index is its
    /// discriminant: the recorded command list stores it as a byte).
    pub const ALL: [ReduceOp; 3] = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min];

    pub const fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
        }
    }
}

/// `out = op(a)` element-wise.
pub fn unary_into(op: UnaryOp, dtype: Dtype, a: &[u8], out: &mut [u8]) {
    let v: Vec<f64> = dtype.to_f64(a).into_iter().map(|x| op.apply(x)).collect();
    out.copy_from_slice(&dtype.from_f64(&v));
}

/// `out = a` converted from `from` to `to`.
pub fn cast_into(from: Dtype, to: Dtype, a: &[u8], out: &mut [u8]) {
    out.copy_from_slice(&to.from_f64(&from.to_f64(a)));
}

/// The shape of a reduction of `shape` over `axis`: the axis removed (a
/// 1-D input gives one element). An axis past the last is an error.
pub fn reduced_shape(shape: &[u32], axis: u32) -> Result<Vec<u32>, String> {
    let axis = axis as usize;
    if axis >= shape.len() {
        return Err(format!(
            "axis {axis} of a {}-D tensor {shape:?} (axes 0..{})",
            shape.len(),
            shape.len()
        ));
    }
    if shape[axis] == 0 {
        return Err(format!(
            "axis {axis} of {shape:?} is empty: nothing to reduce"
        ));
    }
    let mut out: Vec<u32> = shape.to_vec();
    out.remove(axis);
    if out.is_empty() {
        out.push(1);
    }
    Ok(out)
}

/// `out = op over axis of a` (row-major `shape`, checked by
/// [`reduced_shape`]); elements are combined in index order.
pub fn reduce_into(op: ReduceOp, dtype: Dtype, shape: &[u32], axis: u32, a: &[u8], out: &mut [u8]) {
    let v = dtype.to_f64(a);
    let axis = axis as usize;
    let len = shape[axis] as usize;
    let inner: usize = shape[axis + 1..].iter().map(|&d| d as usize).product();
    let outer: usize = shape[..axis].iter().map(|&d| d as usize).product();
    let mut r = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| v[(o * len + k) * inner + i];
            let mut acc = at(0);
            for k in 1..len {
                let x = at(k);
                acc = match op {
                    ReduceOp::Sum => acc + x,
                    ReduceOp::Max => acc.max(x),
                    ReduceOp::Min => acc.min(x),
                };
            }
            r.push(acc);
        }
    }
    out.copy_from_slice(&dtype.from_f64(&r));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(d: Dtype, v: &[f64]) -> Vec<u8> {
        d.from_f64(v)
    }

    #[test]
    fn unary_ops_round_once_in_every_dtype() {
        // exp(0) = 1 in every dtype (how an SDK kernel makes constants).
        for d in Dtype::ALL {
            let mut o = vec![0u8; d.itemsize() as usize];
            unary_into(UnaryOp::Exp, d, &enc(d, &[0.0]), &mut o);
            assert_eq!(d.to_f64(&o), [1.0], "{d:?}");
        }
        let signed = [
            Dtype::F16,
            Dtype::Bf16,
            Dtype::F32,
            Dtype::F64,
            Dtype::I8,
            Dtype::I32,
            Dtype::I64,
        ];
        for d in signed {
            let a = enc(d, &[-4.0, 0.0, 9.0]);
            let mut o = vec![0u8; a.len()];
            let run = |op, o: &mut Vec<u8>| {
                unary_into(op, d, &a, o);
                d.to_f64(o)
            };
            assert_eq!(run(UnaryOp::Neg, &mut o), [4.0, 0.0, -9.0], "{d:?}");
            assert_eq!(run(UnaryOp::Abs, &mut o), [4.0, 0.0, 9.0], "{d:?}");
            assert_eq!(run(UnaryOp::Relu, &mut o), [0.0, 0.0, 9.0], "{d:?}");
            assert_eq!(run(UnaryOp::Sqrt, &mut o)[2], 3.0, "{d:?}");
        }
        // exp(1) in f16 is e rounded to 11 bits: 2.71875.
        let mut o = vec![0u8; 2];
        unary_into(UnaryOp::Exp, Dtype::F16, &enc(Dtype::F16, &[1.0]), &mut o);
        assert_eq!(Dtype::F16.to_f64(&o), [2.71875]);
    }

    #[test]
    fn casts_round_to_nearest_and_saturate_to_i32() {
        let a = enc(Dtype::F32, &[1.0 + 1.0 / 4096.0, 3.5e9, -2.5]);
        let mut h = vec![0u8; 6];
        cast_into(Dtype::F32, Dtype::F16, &a, &mut h);
        assert_eq!(Dtype::F16.to_f64(&h)[0], 1.0, "below half an f16 ulp");
        let mut i = vec![0u8; 12];
        cast_into(Dtype::F32, Dtype::I32, &a, &mut i);
        assert_eq!(Dtype::I32.to_f64(&i), [1.0, i32::MAX as f64, -3.0]);
    }

    #[test]
    fn reductions_drop_their_axis() {
        // [[1, 2, 3], [4, 5, 6]]
        let a = enc(Dtype::F32, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let check = |op, axis, want: &[f64]| {
            let shape = reduced_shape(&[2, 3], axis).unwrap();
            let n: u32 = shape.iter().product();
            let mut o = vec![0u8; n as usize * 4];
            reduce_into(op, Dtype::F32, &[2, 3], axis, &a, &mut o);
            assert_eq!(Dtype::F32.to_f64(&o), want, "{op:?} axis {axis}");
        };
        check(ReduceOp::Sum, 0, &[5.0, 7.0, 9.0]);
        check(ReduceOp::Sum, 1, &[6.0, 15.0]);
        check(ReduceOp::Max, 1, &[3.0, 6.0]);
        check(ReduceOp::Min, 0, &[1.0, 2.0, 3.0]);
        assert_eq!(reduced_shape(&[8], 0).unwrap(), [1]);
        assert_eq!(
            reduced_shape(&[2, 3], 2).unwrap_err(),
            "axis 2 of a 2-D tensor [2, 3] (axes 0..2)"
        );
    }
}
