//! Bandwidth-optimal ring all-reduce: reduce-scatter, then all-gather (the
//! ring NCCL and MPI use for large messages). Each round of the tile is cut
//! into `p` blocks (`p` = world size; the first `n mod p` blocks one
//! element longer, so any size and any world size work, empty blocks are
//! skipped by sender and receiver alike):
//!
//! - reduce-scatter, steps `s = 0 .. p−2`: rank `r` sends its partial sum
//!   of block `(r − s) mod p` east and adds the block `(r − s − 1) mod p`
//!   received from the west into its own; after `p − 1` steps it holds the
//!   full sum of block `(r + 1) mod p` and stores it;
//! - all-gather, steps `s = 0 .. p−2`: it sends block `(r + 1 − s) mod p`
//!   (first its own, then the one just received) east, and stores the
//!   block `(r − s) mod p` received from the west, forwarding it next.
//!
//! Every rank sends `2(p − 1)` messages of `S/p` bytes (`S` the tile), the
//! lower bound on traffic for an all-reduce, against `p − 1` messages of
//! `S` for the seed's ring. Uncontended, on a ring where a message of `m`
//! bytes between neighbours takes `α + m/B` and an add of `m` bytes takes
//! `γ(m)` (MATH overhead + elements / throughput):
//!
//! `T ≈ L(S) + 2(p − 1)·(α + (S/p)/B) + (p − 1)·γ(S/p) + St(S/p)`,
//!
//! `L` the load of the tile into TCM and `St` the last store; a message
//! waits for the add that produced it, so the adds are on the critical
//! path of the reduce-scatter. The standard model's `2(p − 1)(α + (S/p)/B)`
//! is this with loads, adds and stores free.
//!
//! Every op (`sum`, `prod`, `max`, `min` combine partial results on the
//! MATH unit; `avg` sums, then scales the owned block by `1/p` once) and
//! every dtype (`avg` of i32 is refused).
//!
//! Parameter `chunk_size` (elements of one block piece, ccl.yaml): the
//! tile goes in rounds whose blocks have at most that many elements (a
//! piece must fit an IPCQ slot). The rounds pipeline across the ring
//! steps ([`kernbench_guest::ring`]): a step's pieces follow each other
//! on the link and each moves on as soon as it has arrived and been
//! combined, so with pieces that take longer than `α` to cross a link,
//! `T` approaches `2(p − 1)·(S/p)/B` plus a few `α`: on the idealised
//! ring (`configs/ideal_ring.yaml`), 16 MiB on 4 ranks in pieces of
//! 32 Ki elements takes 252.7 µs, against 254.7 µs in one message per
//! step (the form above) and 443.7 µs when the rounds ran one after
//! another. Absent: pieces of [`kernbench_guest::ring::DEFAULT_PIECE`]
//! elements (256 Ki: any size and dtype fits the default 1 MiB slots).

use kernbench_guest::prelude::*;
use kernbench_guest::ring;

pub struct RingRsagAllreduce;

/// The reduce-scatter, then the all-gather, of every round's blocks, in
/// waves of [`ring::WAVE`] rounds, the rounds of a wave interleaved within
/// each step (they pipeline).
/// Blocks are read from `rounds` and the results written to `outs` (the
/// same chunks in place).
fn all_reduce<T: Tl>(tl: &T, (rounds, outs): (&[Chunk], &[Chunk]), call: &Call, host: &HostArgs) {
    let (p, dt, rank) = (call.world_size, call.dtype, host.sip_rank);
    let red = Reduction::of(call, host, p);
    if p < 2 {
        // One rank: the tile is the result (avg of one = itself;
        // premul_sum: times its factor).
        for (r, o) in rounds
            .iter()
            .zip(outs)
            .filter(|(r, o)| r.addr != o.addr || red.alone_computes())
        {
            let t = red.load(tl, r.addr, r.n_elem, dt);
            tl.store(o.addr, &t);
        }
        return;
    }
    let own = ((rank + 1) % p) as usize;
    let cut = |w: &[Chunk]| -> Vec<Vec<Chunk>> {
        w.iter()
            .map(|r| chunked(r.addr, p as u64, r.n_elem, dt))
            .collect()
    };
    for (wave, out_wave) in rounds.chunks(ring::WAVE).zip(outs.chunks(ring::WAVE)) {
        let (blocks, out_blocks) = (cut(wave), cut(out_wave));
        let reduced = ring::reduce_scatter(tl, &blocks, red, dt, rank, 1);
        let mine = reduced
            .into_iter()
            .zip(&out_blocks)
            .map(|(t, b)| {
                let t = t.map(|t| red.finished(tl, t));
                if let Some(t) = &t {
                    tl.store(b[own].addr, t);
                }
                t
            })
            .collect();
        ring::all_gather(tl, &out_blocks, mine, dt, rank, 1);
    }
}

impl Algorithm for RingRsagAllreduce {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        let (call, round, host) = call_round_kernel_args(args, t_ptr);
        let pe_addr = pe_tile_addr(tl, t_ptr, call.block, call.dtype);
        let out = pe_tile_addr(tl, host.out_ptr, call.block, call.dtype);
        // `round` elements per block: rounds of `p` such blocks.
        let tile_round = round.saturating_mul(call.world_size.max(1) as u64);
        all_reduce(
            tl,
            (
                &rounds(pe_addr, call.block, tile_round, call.dtype),
                &rounds(out, call.block, tile_round, call.dtype),
            ),
            &call,
            &host,
        );
    }

    fn out_of_place() -> Vec<Collective> {
        vec![Collective::AllReduce]
    }

    fn kernel_args(world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        seed_call_args(Collective::AllReduce, world_size, n_elem, n_elem)
    }

    fn kernel_args_for(call: &Call, params: &Params) -> Result<Vec<i64>, String> {
        let piece_of = call.block.div_ceil(call.world_size.max(1) as u64);
        call_round_args(call, params, Collective::AllReduce, piece_of, DEFAULT_PIECE)
    }
}

kernbench_guest::export_algorithm!(RingRsagAllreduce);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{assert_all_reduce, assert_allreduce_sums, MockConfig};

    #[test]
    fn every_rank_gets_the_sum_for_any_size_and_world_size() {
        for ws in [1u32, 2, 3, 4, 5, 8] {
            for n in [1u64, 3, 7, 16, 33] {
                let args = RingRsagAllreduce::kernel_args(ws, n, 1, 1);
                let cfg = MockConfig::ring(ws, Dtype::F16, args);
                assert_allreduce_sums::<RingRsagAllreduce>(&cfg, n);
            }
        }
    }

    #[test]
    fn every_op_and_dtype_reduces_exactly() {
        for dtype in Dtype::ALL {
            for op in RedOp::ALL {
                for (ws, n) in [(3u32, 7u64), (4, 16), (5, 3)] {
                    let call = Call {
                        dtype,
                        op,
                        ..Call::all_reduce(n, ws)
                    };
                    assert_all_reduce::<RingRsagAllreduce>(&call, &Params::new(vec![]));
                }
            }
        }
    }

    #[test]
    fn rounds_of_any_size_sum_every_element() {
        for (n, chunk) in [(16u64, 5i64), (17, 4), (7, 1)] {
            let p = kernbench_guest::mock::chunk_size(chunk);
            let call = Call::all_reduce(n, 3);
            let args = RingRsagAllreduce::kernel_args_for(&call, &p).unwrap();
            let cfg = MockConfig::ring(3, Dtype::F16, args);
            assert_allreduce_sums::<RingRsagAllreduce>(&cfg, n);
        }
    }
}
