//! Binary-tree all-reduce over the `tree_binary` IPCQ table (seed 003 §3):
//! rank r's parent is (r−1)/2, its children 2r+1 (`C0`) and 2r+2 (`C1`).
//! Reduce up: each rank adds what its children send and sends the partial
//! sum to its parent (`P`); the root then holds the total. Broadcast down:
//! each rank receives the total from its parent and forwards it to its
//! children. Every rank's tile (`pe_tile_addr`) ends holding the sum.
//!
//! Uncontended time, for a tree of depth d = ⌊log2 p⌋: the slowest path is
//! 2d messages (d up, d down) plus the adds on the way up; the exact form
//! for 3 ranks is checked in `tests/timing.rs`.

use kernbench_guest::prelude::*;

pub struct TreeAllreduce;

/// The tree position of this kernel: the rank the host appends (the flat
/// participant index in the seed's rank = PE mode as well).
fn tree_rank(args: &[i64]) -> u32 {
    args[args.len() - 4] as u32
}

impl Algorithm for TreeAllreduce {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        let (n_elem, world_size) = (args[0] as u32, args[1] as u32);
        let rank = tree_rank(args);
        let addr = pe_tile_addr(tl, t_ptr, n_elem as u64, Dtype::F16);
        let children: Vec<&str> = [(2 * rank + 1, "C0"), (2 * rank + 2, "C1")]
            .into_iter()
            .filter(|&(c, _)| c < world_size)
            .map(|(_, d)| d)
            .collect();

        let mut acc = tl.load(addr, &[n_elem], Dtype::F16);
        for &d in &children {
            let part = tl.recv(Some(d), &[n_elem], Dtype::F16);
            acc = tl.add(&acc, &part);
        }
        if rank > 0 {
            tl.send("P", &acc);
            acc = tl.recv(Some("P"), &[n_elem], Dtype::F16);
        }
        for &d in &children {
            tl.send(d, &acc);
        }
        tl.store(addr, &acc);
    }

    fn kernel_args(world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        vec![n_elem as i64, world_size as i64]
    }
}

kernbench_guest::export_algorithm!(TreeAllreduce);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{assert_allreduce_sums, MockConfig};

    #[test]
    fn every_rank_gets_the_sum_in_the_mock() {
        for ws in [1u32, 2, 3, 5, 7, 8] {
            let args = TreeAllreduce::kernel_args(ws, 16, 4, 4);
            let cfg = MockConfig::new("tree_binary", ws, Dtype::F16, args);
            assert_allreduce_sums::<TreeAllreduce>(&cfg, 16);
        }
    }
}
