//! Test algorithm for `recv_async` / `wait` on two ranks of a ring. Rank 1
//! loads its tile and sends it east (to rank 0). Rank 0, by `kernel_mode`:
//!
//! - 0 (serial): `recv(W)`, then load its own tile, add, store;
//! - 1 (overlapped): `recv_async(W)`, load, `wait`, add, store — the load
//!   runs while the message comes, so rank 0 ends one load earlier;
//! - 2: `recv_async(W)` and never wait (the kernel must fail, naming it);
//! - 3: like 1, but rank 1 sends nothing (a deadlock in `wait`).
//!
//! The four modes also run under the mock.

use kernbench_guest::prelude::*;

pub struct OverlapProbe;

impl Algorithm for OverlapProbe {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        let (n, mode) = (args[0] as u32, args[1]);
        let rank = args[args.len() - 4];
        if rank == 1 {
            if mode != 3 {
                let t = tl.load(t_ptr, &[n], Dtype::F16);
                tl.send("E", &t);
            }
            return;
        }
        if rank != 0 {
            return;
        }
        let theirs = match mode {
            0 => {
                let r = tl.recv(Some("W"), &[n], Dtype::F16);
                let mine = tl.load(t_ptr, &[n], Dtype::F16);
                (r, mine)
            }
            2 => {
                let _never = tl.recv_async(Some("W"), &[n], Dtype::F16);
                return;
            }
            _ => {
                let f = tl.recv_async(Some("W"), &[n], Dtype::F16);
                let mine = tl.load(t_ptr, &[n], Dtype::F16);
                (tl.wait(f), mine)
            }
        };
        let (r, mine) = theirs;
        tl.store(t_ptr, &tl.add(&mine, &r));
    }

    fn kernel_args(_world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        vec![n_elem as i64, 0]
    }

    fn kernel_args_with(
        world_size: u32,
        n_elem: u64,
        cube_w: u32,
        cube_h: u32,
        params: &Params,
    ) -> Result<Vec<i64>, String> {
        let mut args = Self::kernel_args(world_size, n_elem, cube_w, cube_h);
        params.place_ints(&mut args, &[("kernel_mode", 1)])?;
        Ok(args)
    }
}

kernbench_guest::export_algorithm!(OverlapProbe);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{run_kernel_in_mock, MockConfig};

    #[test]
    fn serial_and_overlapped_give_rank_0_the_sum_in_the_mock() {
        for mode in [0, 1] {
            let cfg = MockConfig::ring(2, Dtype::F16, vec![4, mode]);
            let out = run_kernel_in_mock::<OverlapProbe>(&cfg, &[vec![1.0; 4], vec![2.0; 4]]);
            assert_eq!(out[0], vec![3.0; 4], "mode {mode}");
        }
    }

    #[test]
    #[should_panic(expected = "without waiting for 1 recv_async future")]
    fn the_mock_refuses_a_future_never_waited_for() {
        let cfg = MockConfig::ring(2, Dtype::F16, vec![4, 2]);
        run_kernel_in_mock::<OverlapProbe>(&cfg, &[vec![1.0; 4], vec![2.0; 4]]);
    }
}
