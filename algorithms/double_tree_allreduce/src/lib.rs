//! Double binary tree all-reduce (NCCL's tree algorithm) on the
//! `full_mesh` table ([`kernbench_guest::tree`]): the tile is split in two
//! halves, half `t` is reduced up tree `t` to its root and broadcast back
//! down, in pieces that pipeline along the tree, the two trees interleaved
//! piece by piece. Tree 1 mirrors (even `p`) or shifts (odd `p`) tree 0,
//! so a rank is an inner node of at most one tree and both trees' loads
//! spread over all ranks. Every op (`avg` scales once at each root;
//! refused for i32) and dtype.
//!
//! Uncontended, with `h` the trees' height (`⌈log2 p⌉`, one more for the
//! root's single child in a tree of `p > 2^⌊log2 p⌋` … see
//! [`kernbench_guest::tree::height`]), `k` pieces of `c` bytes per half
//! and a message of `m` bytes taking `α + m/B`, each phase is a pipeline
//! of `h` hops along which a node forwards each piece as soon as it has
//! it, the two trees' pieces alternating on a rank's links:
//!
//! `T ≈ 2·(h·α + (h + 2k − 2)·c/B)` (reduce, then broadcast)
//!
//! `2h` latencies against the ring's `2(p − 1)`: the choice at small and
//! medium sizes on many ranks. NCCL overlaps the reduce and the broadcast
//! (a link carries the up and the down traffic in its two directions at
//! once), which halves the bandwidth term for large messages; here the
//! broadcast starts when the reduction is done.
//!
//! Parameter `chunk_size` (elements per piece). Absent: pieces of 64 Ki
//! elements (128 KiB of f16), NCCL's order of tree chunk.

use kernbench_guest::prelude::*;
use kernbench_guest::tree;

pub struct DoubleTreeAllreduce;

/// Elements per piece when the entry gives no `chunk_size`.
const DEFAULT_CHUNK: u64 = 64 * 1024;

impl Algorithm for DoubleTreeAllreduce {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        let (call, piece, host) = call_round_kernel_args(args, t_ptr);
        let (p, dt) = (call.world_size, call.dtype);
        let tile = pe_tile_addr(tl, t_ptr, call.block, dt);
        let halves = chunked(tile, 2, call.block, dt);
        let pieces: Vec<Vec<Chunk>> = halves
            .iter()
            .map(|h| rounds(h.addr, h.n_elem, piece, dt))
            .collect();
        tree::all_reduce(
            tl,
            [&pieces[0], &pieces[1]],
            Reduction::of(&call, &host, p),
            dt,
            (host.sip_rank, p),
            (tile, pe_tile_addr(tl, host.out_ptr, call.block, dt)),
        );
    }

    fn entry_defaults() -> EntryDefaults {
        kernbench_guest::direct::ENTRY_DEFAULTS
    }

    fn out_of_place() -> Vec<Collective> {
        vec![Collective::AllReduce]
    }

    fn kernel_args(world_size: u32, n_elem: u64, _: u32, _: u32) -> Vec<i64> {
        seed_call_args(Collective::AllReduce, world_size, n_elem, DEFAULT_CHUNK)
    }

    fn kernel_args_for(call: &Call, params: &Params) -> Result<Vec<i64>, String> {
        call_round_args(
            call,
            params,
            Collective::AllReduce,
            call.block.div_ceil(2),
            DEFAULT_CHUNK,
        )
    }
}

kernbench_guest::export_algorithm!(DoubleTreeAllreduce);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{assert_all_reduce_everywhere, assert_collective, chunk_size};

    #[test]
    fn every_rank_gets_the_reduction_at_every_world_size_op_and_dtype() {
        assert_all_reduce_everywhere::<DoubleTreeAllreduce>();
        // several pieces per half, uneven
        assert_collective::<DoubleTreeAllreduce>(
            &Call::of(Collective::AllReduce, 37, 6),
            &chunk_size(4),
        );
    }
}
