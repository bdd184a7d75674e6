//! The PE matrix unit's operations on encoded little-endian bytes: the
//! shape rules of one GEMM command, the product, and the GEMM + MATH
//! composites (`tl.composite`, the seed's `composite_gemm`). Products are
//! summed in f64 in k order; the epilogue runs on that sum and the result
//! is rounded once to the output dtype.

use super::dtype::Dtype;

/// A GEMM and its fused epilogue (`c` is the composite's third operand).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CompositeOp {
    /// `a x b` (the same as `tl.gemm`).
    Gemm,
    /// `c + a x b`, `c` of shape `[m, n]`: accumulate over k tiles.
    GemmAcc,
    /// `a x b + c`, `c` a bias row of shape `[n]` (or `[1, n]`) added to
    /// every row.
    GemmBias,
    /// `relu(a x b)`.
    GemmRelu,
    /// `relu(a x b + c)`, `c` a bias row.
    GemmBiasRelu,
}

impl CompositeOp {
    /// Every CompositeOp, in declaration order (an element's index is its
    /// discriminant: the recorded command list stores it as a byte).
    pub const ALL: [CompositeOp; 5] = [
        CompositeOp::Gemm,
        CompositeOp::GemmAcc,
        CompositeOp::GemmBias,
        CompositeOp::GemmRelu,
        CompositeOp::GemmBiasRelu,
    ];

    /// The name as the WIT spells it.
    pub const fn name(self) -> &'static str {
        match self {
            CompositeOp::Gemm => "gemm",
            CompositeOp::GemmAcc => "gemm-acc",
            CompositeOp::GemmBias => "gemm-bias",
            CompositeOp::GemmRelu => "gemm-relu",
            CompositeOp::GemmBiasRelu => "gemm-bias-relu",
        }
    }

    /// Element operations the epilogue does per output element (each one
    /// element of MATH work).
    pub const fn epilogue_ops(self) -> u64 {
        match self {
            CompositeOp::Gemm => 0,
            CompositeOp::GemmAcc | CompositeOp::GemmBias | CompositeOp::GemmRelu => 1,
            CompositeOp::GemmBiasRelu => 2,
        }
    }

    /// The shape its `c` operand must have for an `[m, n]` result (`None`:
    /// it takes no `c`).
    fn c_shape(self, (m, n): (u32, u32)) -> Option<Vec<u32>> {
        match self {
            CompositeOp::Gemm | CompositeOp::GemmRelu => None,
            CompositeOp::GemmAcc => Some(vec![m, n]),
            CompositeOp::GemmBias | CompositeOp::GemmBiasRelu => Some(vec![n]),
        }
    }
}

/// Check the composite's `c` operand (its shape, or its absence) for an
/// `[m, n]` result. A bias row may also be given as `[1, n]`.
fn check_composite_operand(
    op: CompositeOp,
    (m, n): (u32, u32),
    c: Option<&[u32]>,
) -> Result<(), String> {
    let name = op.name();
    match (op.c_shape((m, n)), c) {
        (None, None) => Ok(()),
        (None, Some(c)) => Err(format!(
            "composite {name} takes no c operand, got one of shape {c:?}"
        )),
        (Some(want), None) => Err(format!(
            "composite {name} needs a c operand of shape {want:?}"
        )),
        (Some(want), Some(c)) => {
            let bias_as_row = want.len() == 1 && c == [1, n];
            if c == want.as_slice() || bias_as_row {
                Ok(())
            } else {
                Err(format!(
                    "composite {name} of an [{m}, {n}] result needs c of shape {want:?}, got {c:?}"
                ))
            }
        }
    }
}

/// `(m, n, k)` of the composite `op` of `a`, `b` and `c`, every operand
/// checked (the GEMM's shapes and the unit's limits, then `c`).
pub fn composite_shape(
    op: CompositeOp,
    a: (&[u32], Dtype),
    b: (&[u32], Dtype),
    c: Option<&[u32]>,
    max: (u32, u32, u32),
) -> Result<(u32, u32, u32), String> {
    let (m, n, k) = gemm_shape(a, b, max)?;
    check_composite_operand(op, (m, n), c)?;
    Ok((m, n, k))
}

/// `a x b` in f64, row-major `[m, n]`.
fn product(dtype: Dtype, (m, n, k): (u32, u32, u32), a: &[u8], b: &[u8]) -> Vec<f64> {
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
    r
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
    let r = product(dtype, (m, n, k), a, b);
    out.copy_from_slice(&out_dtype.from_f64(&r));
}

/// The composite `op` of `x = [a, b]` or `[a, b, c]` (`dtypes` = the
/// inputs', `c`'s and the output's), rounded once to the output dtype.
pub fn composite_into(
    op: CompositeOp,
    (dtype, c_dtype, out_dtype): (Dtype, Dtype, Dtype),
    (m, n, k): (u32, u32, u32),
    x: &[&[u8]],
    out: &mut [u8],
) {
    let mut r = product(dtype, (m, n, k), x[0], x[1]);
    let c = x.get(2).map(|c| c_dtype.to_f64(c));
    match (op, c) {
        (CompositeOp::GemmAcc, Some(c)) => r.iter_mut().zip(&c).for_each(|(r, c)| *r += c),
        (CompositeOp::GemmBias | CompositeOp::GemmBiasRelu, Some(bias)) => {
            for row in r.chunks_mut(n as usize) {
                row.iter_mut().zip(&bias).for_each(|(r, b)| *r += b);
            }
        }
        _ => {}
    }
    if matches!(op, CompositeOp::GemmRelu | CompositeOp::GemmBiasRelu) {
        r.iter_mut().for_each(|r| *r = r.max(0.0));
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
    fn composites_apply_their_epilogue_once() {
        // [[1, -2], [3, 4]] x [[5, 6], [7, 8]] = [[-9, -10], [43, 50]]
        let a = enc(Dtype::F16, &[1.0, -2.0, 3.0, 4.0]);
        let b = enc(Dtype::F16, &[5.0, 6.0, 7.0, 8.0]);
        let run = |op, c: Option<(Dtype, Vec<f64>)>| {
            let cb = c.as_ref().map(|(d, v)| enc(*d, v));
            let mut x: Vec<&[u8]> = vec![&a, &b];
            if let Some(cb) = &cb {
                x.push(cb);
            }
            let cd = c.map_or(Dtype::F16, |c| c.0);
            let mut o = vec![0u8; 16];
            composite_into(op, (Dtype::F16, cd, Dtype::F32), (2, 2, 2), &x, &mut o);
            Dtype::F32.to_f64(&o)
        };
        let acc = Some((Dtype::F32, vec![0.5, 1.0, 1.5, 2.0]));
        assert_eq!(run(CompositeOp::GemmAcc, acc), [-8.5, -9.0, 44.5, 52.0]);
        let bias = Some((Dtype::F16, vec![10.0, -60.0]));
        assert_eq!(
            run(CompositeOp::GemmBias, bias.clone()),
            [1.0, -70.0, 53.0, -10.0]
        );
        assert_eq!(run(CompositeOp::GemmBiasRelu, bias), [1.0, 0.0, 53.0, 0.0]);
        assert_eq!(run(CompositeOp::GemmRelu, None), [0.0, 0.0, 43.0, 50.0]);
        assert_eq!(run(CompositeOp::Gemm, None), [-9.0, -10.0, 43.0, 50.0]);
    }

    #[test]
    fn composite_operands_are_checked() {
        let ok = |op, c: Option<&[u32]>| check_composite_operand(op, (4, 8), c);
        assert!(ok(CompositeOp::GemmAcc, Some(&[4, 8])).is_ok());
        assert!(ok(CompositeOp::GemmBias, Some(&[8])).is_ok());
        assert!(ok(CompositeOp::GemmBias, Some(&[1, 8])).is_ok());
        assert!(ok(CompositeOp::GemmRelu, None).is_ok());
        let e = ok(CompositeOp::GemmBias, Some(&[4, 8])).unwrap_err();
        assert!(e.contains("gemm-bias") && e.contains("[8]"), "{e}");
        assert!(ok(CompositeOp::GemmAcc, None)
            .unwrap_err()
            .contains("needs a c operand"));
        assert!(ok(CompositeOp::Gemm, Some(&[8]))
            .unwrap_err()
            .contains("takes no c operand"));
    }
}
