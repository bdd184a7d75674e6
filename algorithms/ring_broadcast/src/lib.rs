//! Pipelined (chunked) ring broadcast: the root cuts its tensor into `k`
//! chunks and sends them east one after another; every rank stores each
//! chunk from the west and forwards it east at once (but the last rank
//! on the ring, root − 1), so chunk `c` crosses hop `h` while chunk
//! `c + 1` crosses hop `h − 1` ([`kernbench_guest::ring::broadcast`]).
//!
//! Uncontended, on a ring where a message of `m` bytes between neighbours
//! takes `α + m/B`, with `k` chunks of `S/k` bytes:
//!
//! `T ≈ L(S/k) + (p − 1 + k − 1)·(α + (S/k)/B) + St(S/k)`,
//!
//! `L` the root's load of the first chunk, `St` the last rank's store of
//! the last one: the first chunk needs `p − 1` hops, each further chunk
//! one more step. It tends to `S/B` for large `S` (the bound of a
//! broadcast, whatever `p`), where a one-shot ring takes `(p − 1)·S/B`.
//! The best `k` balances the terms: `k* = sqrt((p − 2)·S / (α·B))`.
//!
//! Exactly, where `α` = the path latency `λ` (no DMA set-up, free SIP
//! internals: `tests/all/fidelity.rs`), with chunks of `c` bytes, the last
//! `c_l`: `T = (p − 1)·λ + (p − 2 + k − 1)·c/B + c_l/B`. A link carries
//! one chunk after another at its bandwidth and the latencies of
//! back-to-back chunks overlap (cut-through), so the `≈` form above,
//! which charges a whole `α` per step, is an upper estimate.
//!
//! Parameter `chunk_size` (elements per chunk, ccl.yaml). Absent: chunks
//! of 64 Ki elements (128 KiB of f16, NCCL's order of chunk size); a
//! tensor no larger goes in one piece.

use kernbench_guest::prelude::*;
use kernbench_guest::ring;

pub struct RingBroadcast;

/// Elements per chunk when ccl.yaml gives no `chunk_size`.
pub const DEFAULT_CHUNK: u64 = 64 * 1024;

impl Algorithm for RingBroadcast {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        ring::broadcast(tl, &rooted(tl, t_ptr, args));
    }

    fn kernel_args(world_size: u32, n_elem: u64, _: u32, _: u32) -> Vec<i64> {
        seed_call_args(Collective::Broadcast, world_size, n_elem, DEFAULT_CHUNK)
    }

    fn collectives() -> Vec<Collective> {
        vec![Collective::Broadcast]
    }

    fn out_of_place() -> Vec<Collective> {
        vec![Collective::Broadcast]
    }

    fn kernel_args_for(call: &Call, params: &Params) -> Result<Vec<i64>, String> {
        call_round_args(
            call,
            params,
            Collective::Broadcast,
            call.block,
            DEFAULT_CHUNK,
        )
    }
}

kernbench_guest::export_algorithm!(RingBroadcast);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{assert_collective, chunk_size};

    fn bcast(dtype: Dtype, block: u64, ws: u32, root: u32) -> Call {
        Call {
            collective: Collective::Broadcast,
            dtype,
            root,
            ..Call::all_reduce(block, ws)
        }
    }

    #[test]
    fn every_rank_gets_the_roots_tensor_from_every_root() {
        for dtype in [Dtype::F16, Dtype::I32] {
            for ws in [1u32, 2, 3, 5] {
                for root in 0..ws {
                    for block in [1u64, 7, 16] {
                        assert_collective::<RingBroadcast>(
                            &bcast(dtype, block, ws, root),
                            &Params::new(vec![]),
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn chunks_of_any_size_pipeline_every_element() {
        for (block, chunk) in [(16u64, 5i64), (17, 4), (7, 1), (9, 100)] {
            let p = chunk_size(chunk);
            assert_collective::<RingBroadcast>(&bcast(Dtype::Bf16, block, 4, 1), &p);
        }
    }
}
