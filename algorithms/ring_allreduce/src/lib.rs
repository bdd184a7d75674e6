//! Ring all-reduce, exactly the seed's semantics (seed 003 §2): for
//! `world_size - 1` steps every PE sends its current tile east and
//! accumulates the tile received from the west; the tile received is what
//! it forwards next (`current = recv`), so every rank's data travels the
//! ring exactly once. The final sum is stored back once.
//!
//! Parameter `chunk_size` (elements, ccl.yaml): split the tile into chunks
//! of at most that many elements and all-reduce them one after another, so
//! a message fits a slot smaller than the tile. Absent: one chunk (the
//! seed's ring).

use kernbench_guest::helpers::ring_allreduce;
use kernbench_guest::prelude::*;

pub struct RingAllreduce;

impl Algorithm for RingAllreduce {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        // kernel_args = round_args (n_elem, world_size, round), then the
        // four host-appended (sip_rank, sip_topo_kind, sip_topo_w, sip_topo_h).
        let (n_elem, world_size, round) = (args[0] as u64, args[1] as u32, args[2] as u64);
        let pe_addr = pe_tile_addr(tl, t_ptr, n_elem, Dtype::F16);
        for c in rounds(pe_addr, n_elem, round, Dtype::F16) {
            let shape = [c.n_elem as u32];
            let acc = tl.load(c.addr, &shape, Dtype::F16);
            let acc = ring_allreduce(tl, acc, world_size, ("E", "W"), (&shape, Dtype::F16));
            tl.store(c.addr, &acc);
        }
    }

    fn kernel_args(world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        vec![n_elem as i64, world_size as i64, n_elem as i64]
    }

    fn kernel_args_with(
        world_size: u32,
        n_elem: u64,
        _cube_w: u32,
        _cube_h: u32,
        params: &Params,
    ) -> Result<Vec<i64>, String> {
        round_args(world_size, n_elem, params)
    }
}

kernbench_guest::export_algorithm!(RingAllreduce);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{assert_allreduce_sums, MockConfig};

    #[test]
    fn chunks_of_any_size_sum_every_element() {
        for (n, chunk) in [(16u64, 5i64), (16, 16), (7, 1), (9, 100)] {
            let p = Params::new(vec![(
                "chunk_size".into(),
                kernbench_guest::ParamValue::Int(chunk),
            )]);
            let args = RingAllreduce::kernel_args_with(3, n, 1, 1, &p).unwrap();
            assert_allreduce_sums::<RingAllreduce>(&MockConfig::ring(3, Dtype::F16, args), n);
        }
        let p = Params::new(vec![(
            "chunk_size".into(),
            kernbench_guest::ParamValue::Int(0),
        )]);
        assert_eq!(
            RingAllreduce::kernel_args_with(3, 8, 1, 1, &p),
            Err("chunk_size must be >= 1 element, got 0".into())
        );
    }

    #[test]
    fn every_rank_gets_the_sum_in_the_mock() {
        for ws in [1u32, 2, 3, 4, 8] {
            let cfg = MockConfig::ring(ws, Dtype::F16, RingAllreduce::kernel_args(ws, 16, 4, 4));
            assert_allreduce_sums::<RingAllreduce>(&cfg, 16);
        }
    }
}
