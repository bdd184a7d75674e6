//! Ring all-reduce, exactly the seed's semantics (seed 003 §2): for
//! `world_size - 1` steps every PE sends its current tile east and
//! combines the tile received from the west into its own; the tile
//! received is what it forwards next (`current = recv`), so every rank's
//! data travels the ring exactly once. The result is stored back once.
//!
//! Every op and dtype: `sum`, `prod`, `max`, `min` combine on the MATH
//! unit as the tiles arrive; `avg` sums, then each rank scales its sum by
//! `1/p` once (every rank holds the same sum: the reference's bytes).
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
        // kernel_args = the call, the round (call_round_args), then the
        // host's values.
        let (call, round, host) = call_round_kernel_args(args, t_ptr);
        let (dt, p) = (call.dtype, call.world_size);
        let pe_addr = pe_tile_addr(tl, t_ptr, call.block, dt);
        // Out of place the tile is read from the input and the result
        // stored in the output: the same traffic as in place.
        let out = pe_tile_addr(tl, host.out_ptr, call.block, dt);
        let red = Reduction::of(&call, &host, p);
        for c in rounds(pe_addr, call.block, round, dt) {
            let shape = [c.n_elem as u32];
            let acc = red.load(tl, c.addr, c.n_elem, dt);
            let acc = ring_allreduce(tl, acc, p, ("E", "W"), (&shape, dt), red.combine);
            tl.store(out + (c.addr - pe_addr), &red.finished(tl, acc));
        }
    }

    fn kernel_args(world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        seed_call_args(Collective::AllReduce, world_size, n_elem, n_elem)
    }

    fn out_of_place() -> Vec<Collective> {
        vec![Collective::AllReduce]
    }

    fn kernel_args_for(call: &Call, params: &Params) -> Result<Vec<i64>, String> {
        call_round_args(call, params, Collective::AllReduce, call.block, call.block)
    }
}

kernbench_guest::export_algorithm!(RingAllreduce);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{
        assert_all_reduce, assert_all_reduce_everywhere, assert_allreduce_sums, chunk_size,
        MockConfig,
    };

    #[test]
    fn chunks_of_any_size_sum_every_element() {
        for (n, chunk) in [(16u64, 5i64), (16, 16), (7, 1), (9, 100)] {
            let args = RingAllreduce::kernel_args_for(&Call::all_reduce(n, 3), &chunk_size(chunk));
            let cfg = MockConfig::ring(3, Dtype::F16, args.unwrap());
            assert_allreduce_sums::<RingAllreduce>(&cfg, n);
            let call = Call {
                op: RedOp::Max,
                dtype: Dtype::F32,
                ..Call::all_reduce(n, 4)
            };
            assert_all_reduce::<RingAllreduce>(&call, &chunk_size(chunk));
        }
        assert_eq!(
            RingAllreduce::kernel_args_for(&Call::all_reduce(8, 3), &chunk_size(0)),
            Err("chunk_size must be >= 1 element, got 0".into())
        );
    }

    #[test]
    fn every_op_and_dtype_reduces_exactly() {
        assert_all_reduce_everywhere::<RingAllreduce>();
    }

    #[test]
    fn every_rank_gets_the_sum_in_the_mock() {
        for ws in [1u32, 2, 3, 4, 8] {
            let cfg = MockConfig::ring(ws, Dtype::F16, RingAllreduce::kernel_args(ws, 16, 4, 4));
            assert_allreduce_sums::<RingAllreduce>(&cfg, 16);
        }
    }
}
