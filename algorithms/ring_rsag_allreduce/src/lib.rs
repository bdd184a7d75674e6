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
//! Parameter `chunk_size` (elements, ccl.yaml): all-reduce the tile in
//! rounds of at most that many elements (a block must fit an IPCQ slot).
//! Absent: one round.

use kernbench_guest::helpers::{chunked, ring_step, Chunk};
use kernbench_guest::prelude::*;

pub struct RingRsagAllreduce;

const DT: Dtype = Dtype::F16;

/// One round: the reduce-scatter and the all-gather of `round`'s blocks.
fn all_reduce_round<T: Tl>(tl: &T, round: Chunk, p: u32, rank: u32) {
    if p < 2 {
        return; // one rank: the tile is the sum
    }
    let blocks = chunked(round.addr, p as u64, round.n_elem, DT);
    let len = |b: u32| blocks[b as usize].n_elem as u32;
    let mut acc: Vec<Option<T::Tensor>> = blocks
        .iter()
        .map(|b| (b.n_elem > 0).then(|| tl.load(b.addr, &[b.n_elem as u32], DT)))
        .collect();
    for s in 0..p - 1 {
        let (send, recv) = ring_step(rank, s, p);
        if let Some(t) = &acc[send as usize] {
            tl.send("E", t);
        }
        if len(recv) > 0 {
            let got = tl.recv(Some("W"), &[len(recv)], DT);
            let mine = acc[recv as usize].take().expect("a loaded block");
            acc[recv as usize] = Some(tl.add(&mine, &got));
        }
    }
    let own = (rank + 1) % p;
    let mut current = acc[own as usize].take();
    if let Some(t) = &current {
        tl.store(blocks[own as usize].addr, t);
    }
    for s in 0..p - 1 {
        let (_, recv) = ring_step(rank + 1, s, p);
        if let Some(t) = current.take() {
            tl.send("E", &t);
        }
        if len(recv) > 0 {
            let got = tl.recv(Some("W"), &[len(recv)], DT);
            tl.store(blocks[recv as usize].addr, &got);
            current = Some(got);
        }
    }
}

impl Algorithm for RingRsagAllreduce {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        // kernel_args = round_args (n_elem, world_size, round), then the
        // four host-appended (sip_rank, sip_topo_kind, sip_topo_w, sip_topo_h).
        let (n_elem, p, round) = (args[0] as u64, args[1] as u32, args[2] as u64);
        let rank = args[3] as u32;
        let pe_addr = pe_tile_addr(tl, t_ptr, n_elem, DT);
        for r in rounds(pe_addr, n_elem, round, DT) {
            all_reduce_round(tl, r, p, rank);
        }
    }

    fn kernel_args(world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        vec![n_elem as i64, world_size as i64, n_elem as i64]
    }

    fn kernel_args_with(
        world_size: u32,
        n_elem: u64,
        _cube_w: u32,
        _cube_h: u32,
        params: &Params,
    ) -> Result<Vec<i64>, String> {
        round_args(world_size, n_elem, params)
    }
}

kernbench_guest::export_algorithm!(RingRsagAllreduce);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{assert_allreduce_sums, MockConfig};

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
    fn rounds_of_any_size_sum_every_element() {
        for (n, chunk) in [(16u64, 5i64), (17, 4), (7, 1)] {
            let p = Params::new(vec![(
                "chunk_size".into(),
                kernbench_guest::ParamValue::Int(chunk),
            )]);
            let args = RingRsagAllreduce::kernel_args_with(3, n, 1, 1, &p).unwrap();
            let cfg = MockConfig::ring(3, Dtype::F16, args);
            assert_allreduce_sums::<RingRsagAllreduce>(&cfg, n);
        }
    }
}
