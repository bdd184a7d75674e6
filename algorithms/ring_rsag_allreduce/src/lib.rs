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
//! Parameter `chunk_size` (elements, ccl.yaml): all-reduce the tile in
//! rounds of at most that many elements (a block must fit an IPCQ slot).
//! Absent: one round.

use kernbench_guest::helpers::{chunked, ring_step, Chunk};
use kernbench_guest::prelude::*;

pub struct RingRsagAllreduce;

/// Kernel args: the call ([`Call::to_args`]), then the round size.
const OWN_ARGS: usize = kernbench_guest::CALL_ARGS + 1;

/// One round: the reduce-scatter and the all-gather of `round`'s blocks.
fn all_reduce_round<T: Tl>(tl: &T, round: Chunk, call: &Call, rank: u32) {
    let (p, dt) = (call.world_size, call.dtype);
    if p < 2 {
        return; // one rank: the tile is the result (avg of one = itself)
    }
    let blocks = chunked(round.addr, p as u64, round.n_elem, dt);
    let len = |b: u32| blocks[b as usize].n_elem as u32;
    let mut acc: Vec<Option<T::Tensor>> = blocks
        .iter()
        .map(|b| (b.n_elem > 0).then(|| tl.load(b.addr, &[b.n_elem as u32], dt)))
        .collect();
    for s in 0..p - 1 {
        let (send, recv) = ring_step(rank, s, p);
        if let Some(t) = &acc[send as usize] {
            tl.send("E", t);
        }
        if len(recv) > 0 {
            let got = tl.recv(Some("W"), &[len(recv)], dt);
            let mine = acc[recv as usize].take().expect("a loaded block");
            acc[recv as usize] = Some(tl.binary(call.op.combine(), &mine, &got));
        }
    }
    let own = (rank + 1) % p;
    let mut current = acc[own as usize].take();
    if let (Some(t), Some(f)) = (&current, call.op.finish_factor(p)) {
        current = Some(tl.scale(t, f));
    }
    if let Some(t) = &current {
        tl.store(blocks[own as usize].addr, t);
    }
    for s in 0..p - 1 {
        let (_, recv) = ring_step(rank + 1, s, p);
        if let Some(t) = current.take() {
            tl.send("E", &t);
        }
        if len(recv) > 0 {
            let got = tl.recv(Some("W"), &[len(recv)], dt);
            tl.store(blocks[recv as usize].addr, &got);
            current = Some(got);
        }
    }
}

impl Algorithm for RingRsagAllreduce {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        let call = Call::from_args(args);
        let round = args[kernbench_guest::CALL_ARGS] as u64;
        let rank = HostArgs::after(args, OWN_ARGS, t_ptr).sip_rank;
        let pe_addr = pe_tile_addr(tl, t_ptr, call.block, call.dtype);
        for r in rounds(pe_addr, call.block, round, call.dtype) {
            all_reduce_round(tl, r, &call, rank);
        }
    }

    fn kernel_args(world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        let mut args = Call::all_reduce(n_elem, world_size).to_args();
        args.push(n_elem as i64);
        args
    }

    fn kernel_args_for(call: &Call, params: &Params) -> Result<Vec<i64>, String> {
        if call.collective != Collective::AllReduce {
            return Err(format!(
                "implements all_reduce only, not {}",
                call.collective.name()
            ));
        }
        if call.op == RedOp::Avg && call.dtype == Dtype::I32 {
            return Err(
                "avg of i32 is not offered (integer division rounds differently between \
                 libraries): all-reduce with sum and divide"
                    .into(),
            );
        }
        let mut args = call.to_args();
        args.push(round_param(call.block, params)?);
        Ok(args)
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
        for dtype in [Dtype::F16, Dtype::Bf16, Dtype::F32, Dtype::I32] {
            for op in RedOp::ALL {
                if op == RedOp::Avg && dtype == Dtype::I32 {
                    continue;
                }
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
        let call = Call {
            dtype: Dtype::I32,
            op: RedOp::Avg,
            ..Call::all_reduce(4, 2)
        };
        let e = RingRsagAllreduce::kernel_args_for(&call, &Params::new(vec![])).unwrap_err();
        assert!(e.contains("avg of i32"), "{e}");
    }

    #[test]
    fn rounds_of_any_size_sum_every_element() {
        for (n, chunk) in [(16u64, 5i64), (17, 4), (7, 1)] {
            let p = Params::new(vec![(
                "chunk_size".into(),
                kernbench_guest::ParamValue::Int(chunk),
            )]);
            let call = Call::all_reduce(n, 3);
            let args = RingRsagAllreduce::kernel_args_for(&call, &p).unwrap();
            let cfg = MockConfig::ring(3, Dtype::F16, args);
            assert_allreduce_sums::<RingRsagAllreduce>(&cfg, n);
        }
    }
}
