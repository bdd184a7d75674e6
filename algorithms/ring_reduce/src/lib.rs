//! Pipelined (chunked) ring reduce to `dst`: the chain root + 1 → … →
//! root on the ring; the first rank sends each chunk east, every further
//! rank combines the chunk from the west into its own and sends it on,
//! the root combines the last and stores the result
//! ([`kernbench_guest::ring::reduce`]). Every op (`avg` scales once at
//! the root; refused for i32) and dtype. The other ranks' tensors are
//! left unchanged (PyTorch leaves them unspecified).
//!
//! Uncontended, on a ring where a message of `m` bytes takes `α + m/B`
//! and combining `m` bytes takes `γ(m)`, with `k` chunks of `S/k` bytes:
//!
//! `T ≈ L(S/k) + (p − 1 + k − 1)·(α + (S/k)/B + γ(S/k)) + St(S/k)`,
//!
//! the first chunk crossing `p − 1` hops and each further chunk one more
//! step (the step of a chunk is its message and the combine that must
//! finish before it moves on). For large `S` it tends to `S/B + S·γ`.
//!
//! Exactly, where `α` = the path latency `λ` (no DMA set-up, free SIP
//! internals and combines: `tests/all/fidelity.rs`), with chunks of `c` bytes, the last
//! `c_l`: `T = (p − 1)·λ + (p − 2 + k − 1)·c/B + c_l/B`. A link carries
//! one chunk after another at its bandwidth and the latencies of
//! back-to-back chunks overlap (cut-through), so the `≈` form above,
//! which charges a whole `α` per step, is an upper estimate.
//!
//! Parameter `chunk_size` (elements per chunk, ccl.yaml). Absent: chunks
//! of 64 Ki elements.

use kernbench_guest::prelude::*;
use kernbench_guest::ring;

pub struct RingReduce;

/// Elements per chunk when ccl.yaml gives no `chunk_size`.
pub const DEFAULT_CHUNK: u64 = 64 * 1024;

impl Algorithm for RingReduce {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        ring::reduce(tl, &rooted(tl, t_ptr, args));
    }

    fn kernel_args(world_size: u32, n_elem: u64, _: u32, _: u32) -> Vec<i64> {
        seed_call_args(Collective::Reduce, world_size, n_elem, DEFAULT_CHUNK)
    }

    fn collectives() -> Vec<Collective> {
        vec![Collective::Reduce]
    }

    fn out_of_place() -> Vec<Collective> {
        vec![Collective::Reduce]
    }

    fn kernel_args_for(call: &Call, params: &Params) -> Result<Vec<i64>, String> {
        call_round_args(call, params, Collective::Reduce, call.block, DEFAULT_CHUNK)
    }
}

kernbench_guest::export_algorithm!(RingReduce);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{assert_collective, chunk_size};

    #[test]
    fn the_root_gets_the_reduction_for_every_root_op_and_dtype() {
        for dtype in Dtype::ALL {
            for op in RedOp::ALL {
                for ws in [1u32, 2, 3, 5] {
                    for root in 0..ws {
                        let call = Call {
                            collective: Collective::Reduce,
                            dtype,
                            op,
                            root,
                            ..Call::all_reduce(7, ws)
                        };
                        assert_collective::<RingReduce>(&call, &Params::new(vec![]));
                    }
                }
            }
        }
    }

    #[test]
    fn chunks_of_any_size_reduce_every_element() {
        for (block, chunk) in [(16u64, 5i64), (17, 4), (7, 1)] {
            let p = chunk_size(chunk);
            let call = Call {
                collective: Collective::Reduce,
                root: 3,
                ..Call::all_reduce(block, 4)
            };
            assert_collective::<RingReduce>(&call, &p);
        }
    }
}
