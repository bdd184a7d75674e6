//! Test algorithm for the receive and send forms besides the plain ones,
//! each an all-reduce the bench can check (`kernel_mode`):
//!
//! - 0, on 3 ranks: send the tile east and west, receive twice with no
//!   direction (round-robin) and add both: own + left + right is the sum;
//! - 1, on 2 ranks: `recv_into` the peer's tile over the own tile in
//!   memory (after loading it) and add the tensor it returns;
//! - 2, on 2 ranks: `send_addr` straight from memory (no load), receive,
//!   load the own tile, add;
//! - 3: send `[n]` f16, receive the same bytes as `[n/2]` f32 (refused
//!   only under `strict_validation`; the tile is left as it was).

use kernbench_guest::prelude::*;

pub struct RecvProbe;

impl Algorithm for RecvProbe {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        let (n, mode) = (args[0] as u32, args[1]);
        match mode {
            0 => {
                let mine = tl.load(t_ptr, &[n], Dtype::F16);
                tl.send("E", &mine);
                tl.send("W", &mine);
                let a = tl.recv(None, &[n], Dtype::F16);
                let b = tl.recv(None, &[n], Dtype::F16);
                tl.store(t_ptr, &tl.add(&tl.add(&mine, &a), &b));
            }
            1 => {
                let mine = tl.load(t_ptr, &[n], Dtype::F16);
                tl.send("E", &mine);
                // The add reads the copy through the tensor recv_into
                // returns, so it waits for the copy to land. (Dropping it
                // and loading t_ptr back would race with the copy: the load
                // may read before the copy lands; --verify-data says so.)
                let theirs = tl.recv_into(Some("W"), &[n], Dtype::F16, t_ptr);
                tl.store(t_ptr, &tl.add(&mine, &theirs));
            }
            3 => {
                let mine = tl.load(t_ptr, &[n], Dtype::F16);
                tl.send("E", &mine);
                let _same_bytes = tl.recv(Some("W"), &[n / 2], Dtype::F32);
            }
            _ => {
                tl.send_addr("E", t_ptr, &[n], Dtype::F16);
                let theirs = tl.recv(Some("W"), &[n], Dtype::F16);
                let mine = tl.load(t_ptr, &[n], Dtype::F16);
                tl.store(t_ptr, &tl.add(&mine, &theirs));
            }
        }
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

kernbench_guest::export_algorithm!(RecvProbe);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{assert_allreduce_sums, MockConfig};

    #[test]
    fn every_mode_sums_in_the_mock() {
        for (mode, ws) in [(0, 3u32), (1, 2), (2, 2)] {
            let cfg = MockConfig::ring(ws, Dtype::F16, vec![8, mode]);
            assert_allreduce_sums::<RecvProbe>(&cfg, 8);
        }
    }
}
