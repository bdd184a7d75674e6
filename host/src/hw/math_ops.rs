//! The MATH unit's unary element-wise ops, casts and reductions over an
//! axis, on encoded little-endian bytes (the binary ops are in
//! [`super::dtype`]). Values are computed in f64 and rounded once to the
//! output dtype: correctly rounded for f16, bf16 and f32 results of the
//! exactly-computed ops (neg, abs, relu, casts; sqrt and reciprocal within
//! f64's own rounding), to nearest and saturating for i32.

use super::dtype::Dtype;

/// Element-wise unary operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
}

impl ReduceOp {
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

/// `(m, n, k)` of `a [m, k] x b [k, n]`, checked against the unit's
/// largest command `(max_m, max_n, max_k)`.
pub fn gemm_shape(
    a: (&[u32], Dtype),
    b: (&[u32], Dtype),
    (max_m, max_n, max_k): (u32, u32, u32),
) -> Result<(u32, u32, u32), String> {
    let (&[m, k], &[k2, n]) = (a.0, b.0) else {
        return Err(format!(
            "gemm takes two 2-D tensors [m, k] and [k, n], got {:?} and {:?}",
            a.0, b.0
        ));
    };
    if k != k2 {
        return Err(format!(
            "gemm of [{m}, {k}] and [{k2}, {n}]: the inner sizes differ"
        ));
    }
    if a.1 != b.1 {
        return Err(format!(
            "gemm of {} and {}: the inputs' dtypes differ",
            a.1.name(),
            b.1.name()
        ));
    }
    if m > max_m || n > max_n || k > max_k {
        return Err(format!(
            "gemm of m={m}, n={n}, k={k} is larger than the unit's largest command \
             (pe.gemm max_m={max_m}, max_n={max_n}, max_k={max_k}): tile it"
        ));
    }
    Ok((m, n, k))
}

/// `out = a x b` (`a` is `[m, k]`, `b` `[k, n]`, row-major), summed in f64
/// in k order and rounded once to `out_dtype`.
pub fn gemm_into(
    dtype: Dtype,
    out_dtype: Dtype,
    (m, n, k): (u32, u32, u32),
    a: &[u8],
    b: &[u8],
    out: &mut [u8],
) {
    let (x, y) = (dtype.to_f64(a), dtype.to_f64(b));
    let (m, n, k) = (m as usize, n as usize, k as usize);
    let mut r = vec![0f64; m * n];
    for i in 0..m {
        for p in 0..k {
            let xv = x[i * k + p];
            for j in 0..n {
                r[i * n + j] += xv * y[p * n + j];
            }
        }
    }
    out.copy_from_slice(&out_dtype.from_f64(&r));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(d: Dtype, v: &[f64]) -> Vec<u8> {
        d.from_f64(v)
    }

    #[test]
    fn unary_ops_round_once_in_every_dtype() {
        for d in [Dtype::F16, Dtype::Bf16, Dtype::F32, Dtype::I32] {
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
    fn gemm_multiplies_and_checks_its_shapes() {
        // [[1, 2], [3, 4]] x [[5, 6], [7, 8]] = [[19, 22], [43, 50]]
        let a = enc(Dtype::F16, &[1.0, 2.0, 3.0, 4.0]);
        let b = enc(Dtype::F16, &[5.0, 6.0, 7.0, 8.0]);
        let mut o = vec![0u8; 16];
        gemm_into(Dtype::F16, Dtype::F32, (2, 2, 2), &a, &b, &mut o);
        assert_eq!(Dtype::F32.to_f64(&o), [19.0, 22.0, 43.0, 50.0]);
        let lim = (8, 8, 8);
        assert_eq!(
            gemm_shape((&[2, 3], Dtype::F16), (&[3, 5], Dtype::F16), lim),
            Ok((2, 5, 3))
        );
        assert!(
            gemm_shape((&[2, 3], Dtype::F16), (&[4, 5], Dtype::F16), lim)
                .unwrap_err()
                .contains("inner sizes differ")
        );
        assert!(
            gemm_shape((&[2, 9], Dtype::F16), (&[9, 5], Dtype::F16), lim)
                .unwrap_err()
                .contains("max_k=8): tile it")
        );
        assert!(gemm_shape((&[6], Dtype::F16), (&[6, 1], Dtype::F16), lim)
            .unwrap_err()
            .contains("two 2-D tensors"));
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
