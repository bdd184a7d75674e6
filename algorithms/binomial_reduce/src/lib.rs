//! Binomial-tree reduce on the `full_mesh` table: in round `k` a rank
//! whose bit `k` (relative to the root) is set sends its partial result
//! to the rank `2^k` below and drops out; the others combine what they
//! receive ([`kernbench_guest::direct::binomial_reduce`]). `⌈log2 p⌉`
//! rounds. Every op (`avg` scales once at the root; refused for i32) and
//! dtype; the other ranks' tensors are left unchanged.
//!
//! Uncontended, with a message of `m` bytes taking `α + m/B` and a
//! combine `γ(m)`:
//!
//! `T ≈ L + ⌈log2 p⌉·(α + S/B + γ(S)) + St`.
//!
//! The rounds are not barriers: a rank acts as soon as its data is there,
//! so the time is the tree's depth `d = max popcount(v), v < p` (relative
//! ranks; `⌈log2 p⌉` for a power of two, less otherwise: 1 for p = 3)
//! times a message, where no two messages share a link:
//! `T = d·(α + S/B)` on the idealised machine (`tests/all/fidelity.rs`).
//!
//! Parameter `chunk_size` (elements per chunk). Absent: chunks of
//! [`kernbench_guest::ring::DEFAULT_PIECE`] elements (256 Ki: any size
//! and dtype fits the default 1 MiB slots).

use kernbench_guest::direct;
use kernbench_guest::prelude::*;

pub struct BinomialReduce;

impl Algorithm for BinomialReduce {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        direct::binomial_reduce(tl, &rooted(tl, t_ptr, args));
    }

    fn entry_defaults() -> EntryDefaults {
        direct::ENTRY_DEFAULTS
    }

    fn kernel_args(world_size: u32, n_elem: u64, _: u32, _: u32) -> Vec<i64> {
        seed_call_args(Collective::Reduce, world_size, n_elem, n_elem)
    }

    fn collectives() -> Vec<Collective> {
        vec![Collective::Reduce]
    }

    fn out_of_place() -> Vec<Collective> {
        vec![Collective::Reduce]
    }

    fn kernel_args_for(call: &Call, params: &Params) -> Result<Vec<i64>, String> {
        piece_args(call, params, Collective::Reduce)
    }
}

kernbench_guest::export_algorithm!(BinomialReduce);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{assert_collective, chunk_size};

    #[test]
    fn the_root_gets_the_reduction_for_every_root_op_and_dtype() {
        for dtype in Dtype::ALL {
            for op in RedOp::ALL {
                for ws in [1u32, 2, 3, 5, 8] {
                    for root in [0, ws / 2, ws - 1] {
                        let call = Call {
                            dtype,
                            op,
                            root,
                            ..Call::of(Collective::Reduce, 7, ws)
                        };
                        assert_collective::<BinomialReduce>(&call, &Params::new(vec![]));
                    }
                }
            }
        }
        let call = Call {
            root: 1,
            ..Call::of(Collective::Reduce, 17, 6)
        };
        assert_collective::<BinomialReduce>(&call, &chunk_size(5));
    }
}
