//! Ring all-reduce, exactly the seed's semantics (seed 003 §2): for
//! `world_size - 1` steps every PE sends its current tile east and
//! accumulates the tile received from the west; the tile received is what
//! it forwards next (`current = recv`), so every rank's data travels the
//! ring exactly once. The final sum is stored back once.

use kernbench_guest::helpers::ring_allreduce;
use kernbench_guest::prelude::*;

pub struct RingAllreduce;

impl Algorithm for RingAllreduce {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        // kernel_args = (n_elem, world_size), then the four host-appended
        // (sip_rank, sip_topo_kind, sip_topo_w, sip_topo_h).
        let (n_elem, world_size) = (args[0] as u32, args[1] as u32);
        let pe_addr = pe_tile_addr(tl, t_ptr, n_elem as u64, Dtype::F16);

        let acc = tl.load(pe_addr, &[n_elem], Dtype::F16);
        let acc = ring_allreduce(tl, acc, world_size, ("E", "W"), (&[n_elem], Dtype::F16));
        tl.store(pe_addr, &acc);
    }

    fn kernel_args(world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        vec![n_elem as i64, world_size as i64]
    }
}

kernbench_guest::export_algorithm!(RingAllreduce);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{assert_allreduce_sums, MockConfig};

    #[test]
    fn every_rank_gets_the_sum_in_the_mock() {
        for ws in [1u32, 2, 3, 4, 8] {
            let cfg = MockConfig::ring(ws, Dtype::F16, RingAllreduce::kernel_args(ws, 16, 4, 4));
            assert_allreduce_sums::<RingAllreduce>(&cfg, 16);
        }
    }
}
