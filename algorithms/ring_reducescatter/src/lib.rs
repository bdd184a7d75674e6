//! Ring reduce-scatter (`reduce_scatter_tensor`): the first phase of the
//! bandwidth-optimal ring all-reduce with rank `r` ending on block `r`
//! ([`kernbench_guest::ring::reduce_scatter`] with `k = 0`). For `p − 1`
//! steps a rank sends its partial result of one block east and combines
//! the block arriving from the west into its own; every rank sends
//! `p − 1` messages of `S/p` bytes (`S` one rank's input), the traffic
//! lower bound of a reduce-scatter. Every op (`avg`: the owned block is
//! scaled by `1/p` once; refused for i32) and dtype.
//!
//! Uncontended, on a ring where a message of `m` bytes takes `α + m/B`
//! and combining `m` bytes takes `γ(m)` (MATH overhead + elements /
//! throughput):
//!
//! `T ≈ L(S) + (p − 1)·(α + (S/p)/B + γ(S/p)) + St(S/p)`,
//!
//! `L` the load of the input into TCM, `St` the store of the result; a
//! message waits for the combine that produced it, so the combines are on
//! the critical path. The standard model's `(p − 1)(α + (S/p)/B)` is this
//! with loads, combines and stores free.
//!
//! Parameter `chunk_size` (elements of one block, ccl.yaml): rounds of at
//! most that many elements per block (a block must fit an IPCQ slot);
//! the rounds pipeline across the steps ([`kernbench_guest::ring`]).
//! Absent: pieces of [`kernbench_guest::ring::DEFAULT_PIECE`] elements
//! (256 Ki: any size and dtype fits the default 1 MiB slots).

use kernbench_guest::prelude::*;
use kernbench_guest::ring;

pub struct RingReducescatter;

impl Algorithm for RingReducescatter {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        let (call, round, host) = call_round_kernel_args(args, t_ptr);
        let (p, dt, b) = (call.world_size, call.dtype, call.block);
        let inp = pe_tile_addr(tl, t_ptr, b * p as u64, dt);
        let out = pe_tile_addr(tl, host.out_ptr, b, dt);
        for wave in rounds(out, b, round, dt).chunks(ring::WAVE) {
            let src: Vec<Vec<Chunk>> = wave
                .iter()
                .map(|&r| rank_blocks(inp, p as u64, b, r, out, dt))
                .collect();
            let red = Reduction::of(&call, &host, p);
            let reduced = ring::reduce_scatter(tl, &src, red, dt, host.sip_rank, 0);
            for (r, mine) in wave.iter().zip(reduced) {
                if let Some(t) = mine {
                    tl.store(r.addr, &red.finished(tl, t));
                }
            }
        }
    }

    fn kernel_args(world_size: u32, n_elem: u64, _: u32, _: u32) -> Vec<i64> {
        seed_call_args(Collective::ReduceScatter, world_size, n_elem, n_elem)
    }

    fn collectives() -> Vec<Collective> {
        vec![Collective::ReduceScatter]
    }

    fn kernel_args_for(call: &Call, params: &Params) -> Result<Vec<i64>, String> {
        piece_args(call, params, Collective::ReduceScatter)
    }
}

kernbench_guest::export_algorithm!(RingReducescatter);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{assert_collective, chunk_size};

    #[test]
    fn every_rank_gets_its_reduced_block_for_every_op_and_dtype() {
        for dtype in Dtype::ALL {
            for op in RedOp::ALL {
                for (ws, block) in [(1u32, 3u64), (2, 1), (3, 7), (4, 16), (5, 3)] {
                    let call = Call {
                        collective: Collective::ReduceScatter,
                        dtype,
                        op,
                        ..Call::all_reduce(block, ws)
                    };
                    assert_collective::<RingReducescatter>(&call, &Params::new(vec![]));
                }
            }
        }
    }

    #[test]
    fn rounds_of_any_size_reduce_every_element() {
        for (block, chunk) in [(16u64, 5i64), (17, 4), (7, 1)] {
            let p = chunk_size(chunk);
            let call = Call::of(Collective::ReduceScatter, block, 4);
            assert_collective::<RingReducescatter>(&call, &p);
        }
    }
}
