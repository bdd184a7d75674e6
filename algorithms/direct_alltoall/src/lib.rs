//! Direct all-to-all (`all_to_all_single`, equal splits) on the
//! `full_mesh` table: rank `r` copies its own block, then in step
//! `k = 1 .. p − 1` sends block `r + k` straight from its input to rank
//! `r + k` and receives rank `r − k`'s block into its output
//! ([`kernbench_guest::direct::all_to_all`]). `p − 1` messages of `S/p`
//! bytes per rank (`S` one rank's buffer), each over its routed path.
//!
//! Uncontended (a network where every rank's messages leave by one port
//! of bandwidth `B` and no two share a link), with DMA setup `σ` and path
//! latency `λ`:
//!
//! `T ≈ L + λ + (p − 1)·(σ + (S/p)/B)`,
//!
//! `L` the load and store of the own block: the messages follow each
//! other out of the rank's port, their latencies overlap. On a ring or a
//! torus the routes share links and the time grows with the link load
//! (see `ring_alltoall` for the ring's bound); the link model shares
//! them (every link carries at most its bandwidth).
//!
//! Parameter `chunk_size` (elements per block and round). Absent: rounds
//! of [`kernbench_guest::ring::DEFAULT_PIECE`] elements per block.

use kernbench_guest::direct;
use kernbench_guest::prelude::*;

pub struct DirectAlltoall;

impl Algorithm for DirectAlltoall {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        all_to_all_rounds(tl, t_ptr, args, direct::all_to_all);
    }

    fn entry_defaults() -> EntryDefaults {
        direct::ENTRY_DEFAULTS
    }

    fn kernel_args(world_size: u32, n_elem: u64, _: u32, _: u32) -> Vec<i64> {
        seed_call_args(Collective::AllToAll, world_size, n_elem, n_elem)
    }

    fn collectives() -> Vec<Collective> {
        vec![Collective::AllToAll]
    }

    fn kernel_args_for(call: &Call, params: &Params) -> Result<Vec<i64>, String> {
        piece_args(call, params, Collective::AllToAll)
    }
}

kernbench_guest::export_algorithm!(DirectAlltoall);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{assert_collective, chunk_size};

    #[test]
    fn every_block_reaches_its_rank() {
        for dtype in Dtype::ALL {
            for ws in [1u32, 2, 3, 4, 5, 8] {
                for block in [1u64, 3, 8] {
                    let call = Call {
                        dtype,
                        ..Call::of(Collective::AllToAll, block, ws)
                    };
                    assert_collective::<DirectAlltoall>(&call, &Params::new(vec![]));
                }
            }
        }
        for (block, chunk) in [(16u64, 5i64), (7, 1)] {
            let call = Call::of(Collective::AllToAll, block, 5);
            assert_collective::<DirectAlltoall>(&call, &chunk_size(chunk));
        }
    }
}
