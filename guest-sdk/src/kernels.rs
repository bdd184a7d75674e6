//! Contracts of the built-in compute kernels a bench launches with
//! `torch::launch`, shared by the kernel and the benches so both sides
//! agree on the argument layout, and the reference the benches check
//! them against.
//!
//! ## The `gemm` kernel
//!
//! `C = A × B (+ bias)` split by **rows** over the PEs it runs on (the
//! launch tensor's shards, index `j = cube · num_pes + pe`): PE `j`
//! computes rows `j·m .. (j+1)·m` of `C`, that is `A_j [m, k] × B [k, n]`,
//! where
//! * `A_j` is at `a_ptr + j · m·k·itemsize` (A placed row-wise, one block
//!   per PE, or one PE's whole A when it runs on one PE);
//! * `B` is at `b_ptr + j · b_stride` (`b_stride` = the bytes of B when B
//!   is replicated on every PE, 0 when every PE reads one copy);
//! * the bias row `[n]`, if any, at `bias_ptr + j · bias_stride`;
//! * `C_j [m, n]` goes to `c_ptr + j · m·n·out_itemsize`.
//!
//! On a PE, B (and the bias) is loaded once and the rows go through the
//! matrix unit in blocks of `tile_m` (software-pipelined: the next block's
//! load is issued before this block's store, so DMA and GEMM overlap). A
//! bias uses one `gemm-bias` composite per block.

use crate::{BinOp, Dtype, Tl, UnaryOp};

/// The arguments of the `gemm` kernel (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GemmArgs {
    /// Rows per PE, columns, inner size.
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub a_ptr: u64,
    pub b_ptr: u64,
    pub b_stride: u64,
    /// The bias row and its per-PE stride (`None`: no bias).
    pub bias: Option<(u64, u64)>,
    pub c_ptr: u64,
    pub dtype: Dtype,
    pub out_dtype: Dtype,
    /// PEs per cube in the launch tensor's placement (for `j`).
    pub num_pes: u32,
    /// Rows per matrix-unit command.
    pub tile_m: u32,
}

impl GemmArgs {
    /// The kernel arguments, in order: m, n, k, a_ptr, b_ptr, b_stride,
    /// has_bias (0 or 1), bias_ptr, bias_stride, c_ptr, dtype code, out
    /// dtype code, num_pes, tile_m (addresses as the bits of an i64).
    pub fn to_args(&self) -> Vec<i64> {
        let (has_bias, bias_ptr, bias_stride) = self
            .bias
            .map_or((0, 0, 0), |(p, s)| (1, p as i64, s as i64));
        vec![
            i64::from(self.m),
            i64::from(self.n),
            i64::from(self.k),
            self.a_ptr as i64,
            self.b_ptr as i64,
            self.b_stride as i64,
            has_bias,
            bias_ptr,
            bias_stride,
            self.c_ptr as i64,
            self.dtype.code(),
            self.out_dtype.code(),
            i64::from(self.num_pes),
            i64::from(self.tile_m),
        ]
    }

    /// Read them back (the launch appends its own four; extra is ignored).
    pub fn from_args(a: &[i64]) -> Result<GemmArgs, String> {
        if a.len() < 14 {
            return Err(format!("gemm takes 14 arguments, got {}", a.len()));
        }
        let u32_of = |i: usize, what: &str| {
            u32::try_from(a[i])
                .ok()
                .filter(|&v| v > 0)
                .ok_or_else(|| format!("gemm: {what} = {} is not a positive 32-bit size", a[i]))
        };
        let dtype_of = |i: usize| {
            Dtype::from_code(a[i]).ok_or_else(|| format!("gemm: dtype code {} is unknown", a[i]))
        };
        Ok(GemmArgs {
            m: u32_of(0, "m")?,
            n: u32_of(1, "n")?,
            k: u32_of(2, "k")?,
            a_ptr: a[3] as u64,
            b_ptr: a[4] as u64,
            b_stride: a[5] as u64,
            bias: (a[6] != 0).then_some((a[7] as u64, a[8] as u64)),
            c_ptr: a[9] as u64,
            dtype: dtype_of(10)?,
            out_dtype: dtype_of(11)?,
            num_pes: u32_of(12, "num_pes")?,
            tile_m: u32_of(13, "tile_m")?,
        })
    }

    /// Operations of the whole launch on `pes` PEs (2·m·n·k each).
    pub fn flops(&self, pes: u32) -> u64 {
        2 * u64::from(self.m) * u64::from(self.n) * u64::from(self.k) * u64::from(pes)
    }
}

/// The body of the `va_probe` kernel (see that crate): shard `j` of the
/// launch tensor, reached at `t_ptr + j · shard_bytes`, is copied to
/// `out_ptr + j · shard_bytes`, doubled in place, and signed with the
/// (cube, PE) of the PE that did it at `who_ptr + 2j` elements. `args` =
/// `rows, cols, dtype code, num_pes, out_ptr, who_ptr`; `j` is given the
/// args so that a probe with another numbering can be built from it.
#[track_caller]
pub fn va_probe<T: Tl>(tl: &T, t_ptr: u64, args: &[i64], j: impl Fn(&T, u64) -> u64) {
    let (rows, cols) = (args[0] as u32, args[1] as u32);
    let dtype = Dtype::from_code(args[2]).expect("va_probe: a dtype code 0..=3");
    let (num_pes, out_ptr, who_ptr) = (args[3] as u64, args[4] as u64, args[5] as u64);
    let j = j(tl, num_pes);
    let shard_bytes = u64::from(rows) * u64::from(cols) * dtype.itemsize() as u64;
    let mine = tl.load(t_ptr + j * shard_bytes, &[rows, cols], dtype);
    // The kernel language has no constants: 1 = exp(x - x), then scaled.
    // (Loaded before the store below: issued after it, the load could read
    // the shard before or after that store lands, a race --verify-data
    // reports.)
    let first = tl.load(t_ptr + j * shard_bytes, &[1], dtype);
    tl.store(out_ptr + j * shard_bytes, &mine);
    tl.store(t_ptr + j * shard_bytes, &tl.scale(&mine, 2.0));
    let one = tl.unary(UnaryOp::Exp, &tl.binary(BinOp::Sub, &first, &first));
    let item = dtype.itemsize() as u64;
    for (k, id) in [tl.program_id(1), tl.program_id(0)].into_iter().enumerate() {
        tl.store(
            who_ptr + (2 * j + k as u64) * item,
            &tl.scale(&one, id as f64),
        );
    }
}

/// `a [m, k] × b [k, n] (+ bias)` in f64, row-major, and beside it the sum
/// of the absolute values of each element's terms (`|a| × |b| + |bias|`):
/// the scale a floating-point dot product's error is measured against.
pub fn matmul_ref(
    a: &[f64],
    b: &[f64],
    bias: Option<&[f64]>,
    (m, n, k): (usize, usize, usize),
) -> (Vec<f64>, Vec<f64>) {
    let (mut r, mut s) = (vec![0f64; m * n], vec![0f64; m * n]);
    for i in 0..m {
        for p in 0..k {
            let x = a[i * k + p];
            let row = &b[p * n..(p + 1) * n];
            for j in 0..n {
                r[i * n + j] += x * row[j];
                s[i * n + j] += (x * row[j]).abs();
            }
        }
        if let Some(bias) = bias {
            for j in 0..n {
                r[i * n + j] += bias[j];
                s[i * n + j] += bias[j].abs();
            }
        }
    }
    (r, s)
}

/// How a result compares with its reference: elements checked, those whose
/// error exceeds `tolerance`, and the largest error, each error measured
/// as `|got − want| / scale` (`scale` the sum of the absolute values of
/// the element's terms, so it is bounded by the roundings made).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Check {
    pub checked: u64,
    pub wrong: u64,
    pub max_rel_err: f64,
}

impl Check {
    /// Compare `got` with `want` (`scale` per element, see [`Check`]).
    pub fn of(got: &[f64], want: &[f64], scale: &[f64], tolerance: f64) -> Check {
        let mut c = Check::default();
        for ((&g, &w), &s) in got.iter().zip(want).zip(scale) {
            let err = if g == w {
                0.0
            } else if s > 0.0 {
                (g - w).abs() / s
            } else {
                f64::INFINITY
            };
            c.checked += 1;
            // NaN (a NaN result) counts as wrong.
            c.wrong += u64::from(err.is_nan() || err > tolerance);
            c.max_rel_err = c.max_rel_err.max(err);
        }
        if got.len() != want.len() {
            c.wrong += got.len().abs_diff(want.len()) as u64;
        }
        c
    }

    /// Both checks together.
    pub fn merge(self, o: Check) -> Check {
        Check {
            checked: self.checked + o.checked,
            wrong: self.wrong + o.wrong,
            max_rel_err: self.max_rel_err.max(o.max_rel_err),
        }
    }
}

/// A deterministic test value in `[-1, 1)` with few mantissa bits (exact in
/// every float dtype), for element `i` of tensor number `seed`.
pub fn test_value(seed: u64, i: u64) -> f64 {
    // SplitMix64, reduced to a multiple of 1/64.
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(i.wrapping_mul(0xBF58_476D_1CE4_E5B9));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    ((z % 128) as f64 - 64.0) / 64.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemm_args_round_trip_and_refuse_nonsense() {
        let g = GemmArgs {
            m: 4,
            n: 8,
            k: 16,
            a_ptr: 1 << 40,
            b_ptr: 77,
            b_stride: 256,
            bias: Some((99, 16)),
            c_ptr: 5,
            dtype: Dtype::Bf16,
            out_dtype: Dtype::F32,
            num_pes: 4,
            tile_m: 2,
        };
        let mut a = g.to_args();
        a.extend([0, 0, 0, 0]);
        assert_eq!(GemmArgs::from_args(&a), Ok(g));
        assert_eq!(g.flops(2), 2 * 4 * 8 * 16 * 2);
        a[0] = 0;
        assert!(GemmArgs::from_args(&a).unwrap_err().contains("m = 0"));
        assert!(GemmArgs::from_args(&a[..5])
            .unwrap_err()
            .contains("14 arguments"));
        let none = GemmArgs {
            bias: None,
            a_ptr: u64::MAX,
            ..g
        };
        assert_eq!(GemmArgs::from_args(&none.to_args()), Ok(none));
    }

    #[test]
    fn the_reference_and_its_check() {
        // [[1, 2], [3, -4]] x [[1, 0], [0, 1]] + [10, 0]
        let (r, s) = matmul_ref(
            &[1.0, 2.0, 3.0, -4.0],
            &[1.0, 0.0, 0.0, 1.0],
            Some(&[10.0, 0.0]),
            (2, 2, 2),
        );
        assert_eq!(r, [11.0, 2.0, 13.0, -4.0]);
        assert_eq!(s, [11.0, 2.0, 13.0, 4.0]);
        let c = Check::of(&[11.0, 2.0, 13.0, -4.5], &r, &s, 0.1);
        assert_eq!((c.checked, c.wrong), (4, 1));
        assert_eq!(c.max_rel_err, 0.125);
        assert!((0..1000).all(|i| (-1.0..1.0).contains(&test_value(3, i))));
    }
}
