//! Ring all-to-all (`all_to_all_single`, equal splits) on a ring of
//! neighbour queues: the block for rank `r + d` is relayed `d` hops east
//! ([`kernbench_guest::ring::all_to_all`]). At step `s = 1 .. p − 1` each
//! rank sends the `p − s` blocks still travelling and receives as many,
//! keeping the first (from rank `r − s`). Every rank sends `p(p − 1)/2`
//! messages of `S/p` bytes (`S` one rank's buffer): on a unidirectional
//! ring that is the link load any all-to-all must carry (each block
//! crosses as many links as its distance), so this is the bandwidth
//! bound of a ring network; a switched or fully connected network does
//! better with a direct all-to-all.
//!
//! Uncontended, with a message of `m` bytes between neighbours taking
//! `α + m/B`, messages of one step following each other on the link:
//!
//! `T ≈ L + Σ_{s=1}^{p−1} (p − s)·(α + (S/p)/B) = L + p(p − 1)/2·(α + (S/p)/B)`,
//!
//! `L` the load and store of the own block and the first load.
//!
//! Parameter `chunk_size` (elements per block and round, ccl.yaml): the
//! exchange in rounds, so a block fits an IPCQ slot. Absent: rounds of
//! [`kernbench_guest::ring::DEFAULT_PIECE`] elements per block.

use kernbench_guest::prelude::*;
use kernbench_guest::ring;

pub struct RingAlltoall;

impl Algorithm for RingAlltoall {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        all_to_all_rounds(tl, t_ptr, args, ring::all_to_all);
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

kernbench_guest::export_algorithm!(RingAlltoall);

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
                        collective: Collective::AllToAll,
                        dtype,
                        ..Call::all_reduce(block, ws)
                    };
                    assert_collective::<RingAlltoall>(&call, &Params::new(vec![]));
                }
            }
        }
    }

    #[test]
    fn rounds_of_any_size_deliver_every_element() {
        for (block, chunk) in [(16u64, 5i64), (17, 4), (7, 1)] {
            let p = chunk_size(chunk);
            let call = Call::of(Collective::AllToAll, block, 3);
            assert_collective::<RingAlltoall>(&call, &p);
        }
    }
}
