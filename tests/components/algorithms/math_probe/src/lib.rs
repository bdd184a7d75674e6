//! Test algorithm for the MATH unit's casts, unary ops and reductions, as
//! a ring all-reduce that must still give the right sums (`kernel_mode`):
//!
//! - 0: accumulate in f32: the tile is cast to f32, every received f16
//!   tile cast and added in f32, the sum cast back to f16 and stored;
//! - 1: the tile loaded as `[1, n]`, reduced (max) over axis 0 to `[n]`,
//!   negated twice, then the seed's f16 ring;
//! - 2: a reduction over an axis the tensor does not have (must fail,
//!   naming the call);
//! - 3: the tile (d·d elements) as a `[d, d]` matrix squared on the matrix
//!   unit (f32), cast back to f16 and stored (not a sum: for its time);
//! - 4: the tile as `[d, d]`, `x + x·x` in one `tl.composite` (gemm-acc,
//!   f16 out) and stored;
//! - 5: a gemm-bias composite given a `[d, d]` bias (must fail, naming the
//!   call);
//! - 6: a tour of the kernel language as a ring all-reduce (the sums must
//!   be right): the tile loaded as `[1, n]`, reduced (max) over axis 0,
//!   divided by `exp(x − x) · fill(1)` = 1, accumulated in f32; the first step sends
//!   the tile straight from memory (`send_addr`), every receive is a
//!   `recv_async` waited for after the send. Ported to C, JavaScript and
//!   Python (`tests/components/{c,js,python}/math_probe`), with modes 3–5,
//!   to show every SDK gives the same bytes and picoseconds.

use kernbench_guest::helpers::ring_allreduce;
use kernbench_guest::prelude::*;

pub struct MathProbe;

impl Algorithm for MathProbe {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        let (n, ws, mode) = (args[0] as u32, args[1] as u32, args[2]);
        let tile = (&[n][..], Dtype::F16);
        match mode {
            0 => {
                let mine = tl.load(t_ptr, &[n], Dtype::F16);
                let mut acc = tl.cast(&mine, Dtype::F32);
                let mut current = mine;
                for _ in 1..ws {
                    tl.send("E", &current);
                    let recv = tl.recv(Some("W"), &[n], Dtype::F16);
                    acc = tl.add(&acc, &tl.cast(&recv, Dtype::F32));
                    current = recv;
                }
                drop(current);
                tl.store(t_ptr, &tl.cast(&acc, Dtype::F16));
            }
            1 => {
                let x = tl.load(t_ptr, &[1, n], Dtype::F16);
                let row = tl.reduce(ReduceOp::Max, &x, 0);
                let y = tl.unary(UnaryOp::Neg, &tl.unary(UnaryOp::Neg, &row));
                let sum = ring_allreduce(tl, y, ws, ("E", "W"), tile, BinOp::Add);
                tl.store(t_ptr, &sum);
            }
            2 => {
                let x = tl.load(t_ptr, &[n], Dtype::F16);
                let _ = tl.reduce(ReduceOp::Sum, &x, 3);
            }
            3 => {
                let d = (n as f64).sqrt() as u32;
                let x = tl.load(t_ptr, &[d, d], Dtype::F16);
                let sq = tl.gemm(&x, &x, Dtype::F32);
                tl.store(t_ptr, &tl.cast(&sq, Dtype::F16));
            }
            6 => {
                let x = tl.load(t_ptr, &[1, n], Dtype::F16);
                let row = tl.reduce(ReduceOp::Max, &x, 0);
                let e = tl.unary(UnaryOp::Exp, &tl.binary(BinOp::Sub, &row, &row));
                let one = tl.binary(BinOp::Mul, &e, &tl.fill(&[n], Dtype::F16, 1.0));
                let mine = tl.binary(BinOp::Div, &row, &one);
                let mut acc = tl.cast(&mine, Dtype::F32);
                if ws > 1 {
                    let f = tl.recv_async(Some("W"), &[n], Dtype::F16);
                    tl.send_addr("E", t_ptr, &[n], Dtype::F16);
                    let mut current = tl.wait(f);
                    acc = tl.add(&acc, &tl.cast(&current, Dtype::F32));
                    for _ in 2..ws {
                        let f = tl.recv_async(Some("W"), &[n], Dtype::F16);
                        tl.send("E", &current);
                        let next = tl.wait(f);
                        acc = tl.add(&acc, &tl.cast(&next, Dtype::F32));
                        current = next;
                    }
                }
                tl.store(t_ptr, &tl.cast(&acc, Dtype::F16));
            }
            _ => {
                let d = (n as f64).sqrt() as u32;
                let x = tl.load(t_ptr, &[d, d], Dtype::F16);
                let op = if mode == 4 {
                    CompositeOp::GemmAcc
                } else {
                    CompositeOp::GemmBias
                };
                let y = tl.composite(op, &x, &x, Some(&x), Dtype::F16);
                tl.store(t_ptr, &y);
            }
        }
    }

    fn kernel_args(world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        vec![n_elem as i64, world_size as i64, 0]
    }

    fn kernel_args_with(
        world_size: u32,
        n_elem: u64,
        cube_w: u32,
        cube_h: u32,
        params: &Params,
    ) -> Result<Vec<i64>, String> {
        let mut args = Self::kernel_args(world_size, n_elem, cube_w, cube_h);
        params.place_ints(&mut args, &[("kernel_mode", 2)])?;
        Ok(args)
    }
}

kernbench_guest::export_algorithm!(MathProbe);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{assert_allreduce_sums, MockConfig};

    #[test]
    fn mode_3_squares_the_tile_in_the_mock() {
        let cfg = kernbench_guest::mock::MockConfig::ring(1, Dtype::F16, vec![4, 1, 3]);
        let out = kernbench_guest::mock::run_kernel_in_mock::<MathProbe>(
            &cfg,
            &[vec![1.0, 2.0, 3.0, 4.0]],
        );
        assert_eq!(out[0], vec![7.0, 10.0, 15.0, 22.0]);
    }

    #[test]
    fn mode_4_adds_the_tile_to_its_square_in_the_mock() {
        let cfg = kernbench_guest::mock::MockConfig::ring(1, Dtype::F16, vec![4, 1, 4]);
        let out = kernbench_guest::mock::run_kernel_in_mock::<MathProbe>(
            &cfg,
            &[vec![1.0, 2.0, 3.0, 4.0]],
        );
        assert_eq!(out[0], vec![8.0, 12.0, 18.0, 26.0]);
    }

    #[test]
    fn both_modes_sum_every_element_in_the_mock() {
        for mode in [0, 1, 6] {
            for ws in [1u32, 3, 4] {
                let cfg = MockConfig::ring(ws, Dtype::F16, vec![8, ws as i64, mode]);
                assert_allreduce_sums::<MathProbe>(&cfg, 8);
            }
        }
    }
}
