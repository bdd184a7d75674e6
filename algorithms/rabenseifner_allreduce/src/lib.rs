//! Recursive halving–doubling all-reduce (Rabenseifner), with the
//! non-power-of-two fix-up, on the `full_mesh` table
//! ([`kernbench_guest::direct::halving_doubling_all_reduce`]): with `p'`
//! the largest power of two ≤ `p` and `e = p − p'`, the first `2e` ranks
//! pair up (the even one hands its tile to the odd one and sits out),
//! the `p'` others reduce-scatter by recursive halving (`log2 p'` steps,
//! at distance `p'/2 … 1`, exchanging half of the range held) and
//! all-gather by recursive doubling (`log2 p'` steps), and the odd ranks
//! hand the result back. The tile is cut into `p'` blocks (any size; the
//! first `n mod p'` one element longer, empty blocks skipped). Every op
//! (`avg` scales the owned block by `1/p` once; refused for i32) and
//! dtype.
//!
//! Uncontended, with DMA setup `σ`, path latency `λ`, bandwidth `B`,
//! combine `γ(m)`: each step sends its range block by block (one
//! message per block: back-to-back messages overlap their latency), so a
//! step moving `b` blocks of `S/p'` costs `λ + b·σ + b·(S/p')/B`, and
//!
//! `T ≈ L + 2·log2(p')·λ + 2(p' − 1)·(σ + (S/p')/B) + (p' − 1)·γ(S/p') + St`
//!
//! plus, when `p` is not a power of two, `2·(λ + p'·σ + S/B) + γ(S)` for
//! the fix-up. Against the ring's `2(p − 1)` latencies it pays
//! `2 log2 p'`: the choice for small and medium messages.
//!
//! Parameter `chunk_size` (elements per round). Absent: rounds whose
//! blocks have [`kernbench_guest::ring::DEFAULT_PIECE`] elements (256 Ki:
//! any size and dtype fits the default 1 MiB slots).

use kernbench_guest::direct;
use kernbench_guest::prelude::*;

pub struct RabenseifnerAllreduce;

/// The largest power of two ≤ `p`.
fn floor_pow2(p: u32) -> u32 {
    1 << (31 - p.max(1).leading_zeros())
}

impl Algorithm for RabenseifnerAllreduce {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        let (call, round, host) = call_round_kernel_args(args, t_ptr);
        let (p, dt) = (call.world_size, call.dtype);
        let tile = pe_tile_addr(tl, t_ptr, call.block, dt);
        let out = pe_tile_addr(tl, host.out_ptr, call.block, dt);
        for r in rounds(tile, call.block, round, dt) {
            let blocks = chunked(r.addr, floor_pow2(p) as u64, r.n_elem, dt);
            let outs = chunked(out + (r.addr - tile), floor_pow2(p) as u64, r.n_elem, dt);
            direct::halving_doubling_all_reduce(
                tl,
                (&blocks, &outs),
                Reduction::of(&call, &host, p),
                dt,
                host.sip_rank,
                p,
            );
        }
    }

    fn entry_defaults() -> EntryDefaults {
        direct::ENTRY_DEFAULTS
    }

    fn out_of_place() -> Vec<Collective> {
        vec![Collective::AllReduce]
    }

    fn kernel_args(world_size: u32, n_elem: u64, _: u32, _: u32) -> Vec<i64> {
        seed_call_args(Collective::AllReduce, world_size, n_elem, n_elem)
    }

    fn kernel_args_for(call: &Call, params: &Params) -> Result<Vec<i64>, String> {
        // Default rounds: blocks (one message each) of DEFAULT_PIECE.
        let round = DEFAULT_PIECE * floor_pow2(call.world_size) as u64;
        call_round_args(call, params, Collective::AllReduce, call.block, round)
    }
}

kernbench_guest::export_algorithm!(RabenseifnerAllreduce);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{assert_all_reduce_everywhere, assert_collective, chunk_size};

    #[test]
    fn every_rank_gets_the_reduction_at_every_world_size_op_and_dtype() {
        assert_all_reduce_everywhere::<RabenseifnerAllreduce>();
        assert_collective::<RabenseifnerAllreduce>(
            &Call::of(Collective::AllReduce, 17, 6),
            &chunk_size(4),
        );
        assert_eq!((floor_pow2(1), floor_pow2(7), floor_pow2(8)), (1, 4, 8));
    }
}
