//! Binomial-tree broadcast on the `full_mesh` table (MPICH's schedule):
//! in round `k` every rank holding the data sends it to the rank `2^k`
//! further from the root, so `⌈log2 p⌉` rounds reach all `p` ranks
//! ([`kernbench_guest::direct::binomial_broadcast`]). The latency-optimal
//! broadcast for small messages; for large ones the pipelined ring
//! (`ring_broadcast`) wins.
//!
//! Uncontended, with a message of `m` bytes taking `α + m/B`:
//!
//! `T ≈ L + ⌈log2 p⌉·(α + S/B) + St`,
//!
//! `L` the root's load and `St` the last store.
//!
//! The rounds are not barriers: a rank acts as soon as its data is there,
//! so the time is the tree's depth `d = max popcount(v), v < p` (relative
//! ranks; `⌈log2 p⌉` for a power of two, less otherwise: 1 for p = 3)
//! times a message, where no two messages share a link:
//! `T = d·(α + S/B)` on the idealised machine (`tests/all/fidelity.rs`).
//!
//! With `chunk_size` the tensor goes in chunks, each forwarded as it
//! arrives (a rank sends each chunk to all its children before the next).
//!
//! Parameter `chunk_size` (elements per chunk). Absent: chunks of
//! [`kernbench_guest::ring::DEFAULT_PIECE`] elements (256 Ki: any size
//! and dtype fits the default 1 MiB slots).

use kernbench_guest::direct;
use kernbench_guest::prelude::*;

pub struct BinomialBroadcast;

impl Algorithm for BinomialBroadcast {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        direct::binomial_broadcast(tl, &rooted(tl, t_ptr, args));
    }

    fn entry_defaults() -> EntryDefaults {
        direct::ENTRY_DEFAULTS
    }

    fn kernel_args(world_size: u32, n_elem: u64, _: u32, _: u32) -> Vec<i64> {
        seed_call_args(Collective::Broadcast, world_size, n_elem, n_elem)
    }

    fn collectives() -> Vec<Collective> {
        vec![Collective::Broadcast]
    }

    fn out_of_place() -> Vec<Collective> {
        vec![Collective::Broadcast]
    }

    fn kernel_args_for(call: &Call, params: &Params) -> Result<Vec<i64>, String> {
        piece_args(call, params, Collective::Broadcast)
    }
}

kernbench_guest::export_algorithm!(BinomialBroadcast);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{assert_collective, chunk_size};

    #[test]
    fn every_rank_gets_the_roots_tensor_from_every_root() {
        for dtype in [Dtype::F16, Dtype::I32] {
            for ws in [1u32, 2, 3, 5, 6, 8] {
                for root in 0..ws {
                    let call = Call {
                        dtype,
                        root,
                        ..Call::of(Collective::Broadcast, 7, ws)
                    };
                    assert_collective::<BinomialBroadcast>(&call, &Params::new(vec![]));
                }
            }
        }
        let call = Call {
            root: 2,
            ..Call::of(Collective::Broadcast, 17, 7)
        };
        assert_collective::<BinomialBroadcast>(&call, &chunk_size(4));
    }
}
