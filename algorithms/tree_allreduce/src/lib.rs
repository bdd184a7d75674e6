//! Binary-tree all-reduce over the `tree_binary` IPCQ table (seed 003 §3):
//! rank r's parent is (r−1)/2, its children 2r+1 (`C0`) and 2r+2 (`C1`).
//! Reduce up: each rank adds what its children send and sends the partial
//! sum to its parent (`P`); the root then holds the total. Broadcast down:
//! each rank receives the total from its parent and forwards it to its
//! children. Every rank's tile (`pe_tile_addr`) ends holding the sum.
//!
//! Uncontended time, for a tree of depth d = ⌊log2 p⌋: the slowest path is
//! 2d messages (d up, d down) plus the adds on the way up; the exact form
//! for 3 ranks is checked in `tests/all/timing.rs`.

use kernbench_guest::prelude::*;

pub struct TreeAllreduce;

impl Algorithm for TreeAllreduce {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        // The call, then the host's values: the tree position is the rank
        // the host appends (the flat participant index in the seed's rank
        // = PE mode as well).
        let call = Call::from_args(args);
        let host = HostArgs::after(args, CALL_ARGS, t_ptr);
        let rank = host.sip_rank;
        let (n_elem, world_size, dt) = (call.block as u32, call.world_size, call.dtype);
        let addr = pe_tile_addr(tl, t_ptr, n_elem as u64, dt);
        // Out of place the result goes to the output's tile.
        let out = pe_tile_addr(tl, host.out_ptr, n_elem as u64, dt);
        let children: Vec<&str> = [(2 * rank + 1, "C0"), (2 * rank + 2, "C1")]
            .into_iter()
            .filter(|&(c, _)| c < world_size)
            .map(|(_, d)| d)
            .collect();

        let red = Reduction::of(&call, &host, world_size);
        let mut acc = red.load(tl, addr, n_elem as u64, dt);
        for &d in &children {
            let part = tl.recv(Some(d), &[n_elem], dt);
            acc = red.combine(tl, &acc, &part);
        }
        if rank > 0 {
            tl.send("P", &acc);
            acc = tl.recv(Some("P"), &[n_elem], dt);
        } else {
            // avg: the root scales the total once; every rank gets its bytes.
            acc = red.finished(tl, acc);
        }
        for &d in &children {
            tl.send(d, &acc);
        }
        tl.store(out, &acc);
    }

    fn out_of_place() -> Vec<Collective> {
        vec![Collective::AllReduce]
    }

    /// The binary tree's table, for an entry that names none.
    fn entry_defaults() -> EntryDefaults {
        EntryDefaults {
            topology: Some("tree_binary"),
            ..EntryDefaults::default()
        }
    }

    fn kernel_args(world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        Call::all_reduce(n_elem, world_size).to_args()
    }

    fn kernel_args_for(call: &Call, params: &Params) -> Result<Vec<i64>, String> {
        // The tile goes in one message: no parameter.
        call_args(call, params, Collective::AllReduce)
    }
}

kernbench_guest::export_algorithm!(TreeAllreduce);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{assert_all_reduce_everywhere, assert_allreduce_sums, MockConfig};

    #[test]
    fn every_rank_gets_the_sum_in_the_mock() {
        for ws in [1u32, 2, 3, 5, 7, 8] {
            let args = TreeAllreduce::kernel_args(ws, 16, 4, 4);
            let cfg = MockConfig::new("tree_binary", ws, Dtype::F16, args);
            assert_allreduce_sums::<TreeAllreduce>(&cfg, 16);
        }
    }

    #[test]
    fn every_op_and_dtype_reduces_exactly() {
        assert_all_reduce_everywhere::<TreeAllreduce>();
    }

    #[test]
    fn it_takes_no_parameter() {
        let p = kernbench_guest::mock::chunk_size(8);
        let e = TreeAllreduce::kernel_args_for(&Call::all_reduce(4, 2), &p).unwrap_err();
        assert!(e.contains("chunk_size"), "{e}");
    }
}
