//! Ring all-gather (`all_gather_into_tensor`): rank `r` copies its input
//! into block `r` of its output, then for `p − 1` steps sends east the
//! block it got last (first its own) and stores the block arriving from
//! the west ([`kernbench_guest::ring::all_gather`] with `k = 0`). Every
//! rank sends `p − 1` messages of `S/p` bytes (`S` the output, `S/p` one
//! rank's input): the traffic lower bound of an all-gather.
//!
//! Uncontended, on a ring where a message of `m` bytes between neighbours
//! takes `α + m/B`:
//!
//! `T ≈ L(S/p) + (p − 1)·(α + (S/p)/B) + St(S/p)`,
//!
//! `L` / `St` the load of the input into TCM and the last store; the
//! stores of received blocks overlap the next step. The standard model's
//! `(p − 1)(α + (S/p)/B)` is this with loads and stores free.
//!
//! Parameter `chunk_size` (elements of one rank's input, ccl.yaml): run
//! the gather in rounds of at most that many elements per block (a block
//! must fit an IPCQ slot); the rounds pipeline across the steps
//! ([`kernbench_guest::ring`]). Absent: pieces of
//! [`kernbench_guest::ring::DEFAULT_PIECE`] elements (256 Ki: any size
//! and dtype fits the default 1 MiB slots).

use kernbench_guest::prelude::*;
use kernbench_guest::ring;

pub struct RingAllgather;

impl Algorithm for RingAllgather {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        let (call, round, host) = call_round_kernel_args(args, t_ptr);
        let (p, dt, b) = (call.world_size, call.dtype, call.block);
        let inp = pe_tile_addr(tl, t_ptr, b, dt);
        let out = pe_tile_addr(tl, host.out_ptr, b * p as u64, dt);
        let rank = host.sip_rank;
        for wave in rounds(inp, b, round, dt).chunks(ring::WAVE) {
            let dst: Vec<Vec<Chunk>> = wave
                .iter()
                .map(|&r| rank_blocks(out, p as u64, b, r, inp, dt))
                .collect();
            let mine = wave
                .iter()
                .zip(&dst)
                .map(|(r, d)| {
                    let t = (r.n_elem > 0).then(|| tl.load(r.addr, &[r.n_elem as u32], dt));
                    if let Some(t) = &t {
                        tl.store(d[rank as usize].addr, t);
                    }
                    t
                })
                .collect();
            ring::all_gather(tl, &dst, mine, dt, rank, 0);
        }
    }

    fn kernel_args(world_size: u32, n_elem: u64, _: u32, _: u32) -> Vec<i64> {
        seed_call_args(Collective::AllGather, world_size, n_elem, n_elem)
    }

    fn collectives() -> Vec<Collective> {
        vec![Collective::AllGather]
    }

    fn kernel_args_for(call: &Call, params: &Params) -> Result<Vec<i64>, String> {
        piece_args(call, params, Collective::AllGather)
    }
}

kernbench_guest::export_algorithm!(RingAllgather);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{assert_collective, chunk_size};

    fn gather(dtype: Dtype, block: u64, ws: u32) -> Call {
        Call {
            collective: Collective::AllGather,
            dtype,
            ..Call::all_reduce(block, ws)
        }
    }

    #[test]
    fn every_rank_gets_every_block_in_rank_order() {
        for dtype in Dtype::ALL {
            for ws in [1u32, 2, 3, 4, 5, 8] {
                for block in [1u64, 3, 16] {
                    assert_collective::<RingAllgather>(
                        &gather(dtype, block, ws),
                        &Params::new(vec![]),
                    );
                }
            }
        }
    }

    #[test]
    fn rounds_of_any_size_gather_every_element() {
        for (block, chunk) in [(16u64, 5i64), (17, 4), (7, 1)] {
            let p = chunk_size(chunk);
            assert_collective::<RingAllgather>(&gather(Dtype::F16, block, 3), &p);
        }
        let e = RingAllgather::kernel_args_for(&Call::all_reduce(4, 2), &Params::new(vec![]))
            .unwrap_err();
        assert!(e.contains("implements all_gather only"), "{e}");
    }
}
