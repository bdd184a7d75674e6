//! `gemm`: a compute kernel benches launch with `torch::launch` (not a
//! collective): `C = A × B (+ bias)` split by rows over the PEs it runs
//! on; the argument layout is `kernbench_guest::kernels::GemmArgs`.
//!
//! On each PE: load B (and the bias) once, then for each block of
//! `tile_m` rows: load the A block, one matrix-unit command (a
//! `gemm-bias` composite with a bias), store the C block. The next
//! block's load is issued before this block's store, so the DMA engine
//! fetches block i+1 while the matrix unit computes block i.
//!
//! Time on one PE with `r` = ⌈m / tile_m⌉ blocks (uncontended):
//! `L_B + L_A + r·G + S_C` when the matrix unit is the bottleneck
//! (`G ≥ L_A + S_C`), with `G = gemm overhead + 2·tile_m·n·k / rate`.

use kernbench_guest::kernels::GemmArgs;
use kernbench_guest::prelude::*;

pub struct Gemm;

impl Algorithm for Gemm {
    fn kernel<T: Tl>(tl: &T, _t_ptr: u64, args: &[i64]) {
        let g = match GemmArgs::from_args(args) {
            Ok(g) => g,
            Err(e) => panic!("{e}"),
        };
        let j = (tl.program_id(1) as u64) * u64::from(g.num_pes) + tl.program_id(0) as u64;
        let (m, n, k) = (u64::from(g.m), u64::from(g.n), u64::from(g.k));
        let (item, out_item) = (g.dtype.itemsize() as u64, g.out_dtype.itemsize() as u64);
        let a_base = g.a_ptr + j * m * k * item;
        let c_base = g.c_ptr + j * m * n * out_item;
        let b = tl.load(g.b_ptr + j * g.b_stride, &[g.k, g.n], g.dtype);
        let bias = g
            .bias
            .map(|(ptr, stride)| tl.load(ptr + j * stride, &[g.n], g.dtype));
        let tile = g.tile_m.min(g.m);
        let rows_at = |i: u32| tile.min(g.m - i);
        let load_a = |i: u32| {
            tl.load(
                a_base + u64::from(i) * k * item,
                &[rows_at(i), g.k],
                g.dtype,
            )
        };
        let mut next = Some(load_a(0));
        let mut i = 0;
        while let Some(a) = next.take() {
            let after = i + rows_at(i);
            if after < g.m {
                next = Some(load_a(after));
            }
            let c = match &bias {
                Some(bias) => tl.composite(CompositeOp::GemmBias, &a, &b, Some(bias), g.out_dtype),
                None => tl.gemm(&a, &b, g.out_dtype),
            };
            tl.store(c_base + u64::from(i) * n * out_item, &c);
            i = after;
        }
    }

    /// Not a collective: `torch::launch` passes `GemmArgs` itself.
    fn kernel_args(_world_size: u32, _n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        Vec::new()
    }
}

kernbench_guest::export_algorithm!(Gemm);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::kernels::{matmul_ref, test_value};
    use kernbench_guest::mock::{run_kernel_in_mock, MockConfig};

    /// One PE: A [5, 3] x B [3, 4] + bias in tiles of 2 rows (the last
    /// block short), all in one mock memory tile laid out A, B, bias, C.
    /// Where the mock places rank 0's tile.
    const BASE: u64 = kernbench_guest::mock::MOCK_T_PTR;

    #[test]
    fn tiles_and_the_bias_give_the_reference_in_the_mock() {
        let (m, n, k) = (5u32, 4u32, 3u32);
        let a: Vec<f64> = (0..15).map(|i| test_value(1, i)).collect();
        let b: Vec<f64> = (0..12).map(|i| test_value(2, i)).collect();
        let bias: Vec<f64> = (0..4).map(|i| test_value(3, i)).collect();
        let mut mem = a.clone();
        mem.extend(&b);
        mem.extend(&bias);
        mem.extend(vec![0.0; 20]);
        let g = GemmArgs {
            m,
            n,
            k,
            a_ptr: BASE,
            b_ptr: BASE + 15 * 4,
            b_stride: 0,
            bias: Some((BASE + 27 * 4, 0)),
            c_ptr: BASE + 31 * 4,
            dtype: Dtype::F32,
            out_dtype: Dtype::F32,
            num_pes: 1,
            tile_m: 2,
        };
        let cfg = MockConfig::ring(1, Dtype::F32, g.to_args());
        let out = run_kernel_in_mock::<Gemm>(&cfg, &[mem]);
        let (want, _) = matmul_ref(&a, &b, Some(&bias), (5, 4, 3));
        let got = &out[0][31..];
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= w.abs() * 1e-6, "{got:?} vs {want:?}");
        }
    }
}
