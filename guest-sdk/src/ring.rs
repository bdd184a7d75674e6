//! The phases of the ring algorithms, shared by the ring all-reduce,
//! all-gather, reduce-scatter and broadcast components. Ranks sit on a
//! ring: a rank sends to `E` (rank + 1) and receives from `W` (rank − 1),
//! as the `ring_1d` table gives. Blocks of zero elements are skipped by
//! sender and receiver alike, so any size works at any world size.
//!
//! The two phases of the bandwidth-optimal ring are parametrised by `k`:
//! rank `r` ends owning block `(r + k) mod p`. The all-reduce uses `k = 1`
//! (the classic schedule), the reduce-scatter `k = 0` (rank `r` must end
//! with block `r`), the all-gather `k = 0` (rank `r` starts with block
//! `r`).

use crate::helpers::{ring_step, Chunk, Rooted};
use crate::{BinOp, Dtype, Tl};

/// Reduce-scatter phase over the `p` blocks `src` (this rank's input, one
/// block per rank): `p − 1` steps; at step `s` the rank sends its partial
/// result of block `(r + k − 1 − s) mod p` east and combines the block
/// `(r + k − 2 − s) mod p` received from the west into its own with
/// `combine`. Returns the full reduction of block `(r + k) mod p` (not yet
/// finished: an `avg` still has to be scaled), None if that block is
/// empty.
pub fn reduce_scatter<T: Tl>(
    tl: &T,
    src: &[Chunk],
    combine: BinOp,
    dt: Dtype,
    rank: u32,
    k: u32,
) -> Option<T::Tensor> {
    let p = src.len() as u32;
    let len = |b: u32| src[b as usize].n_elem as u32;
    let mut acc: Vec<Option<T::Tensor>> = src
        .iter()
        .map(|b| (b.n_elem > 0).then(|| tl.load(b.addr, &[b.n_elem as u32], dt)))
        .collect();
    // ring_step(q, s) = (q − s, q − s − 1): here q = r + k − 1.
    let q = rank + k + p - 1;
    for s in 0..p.saturating_sub(1) {
        let (send, recv) = ring_step(q, s, p);
        if let Some(t) = &acc[send as usize] {
            tl.send("E", t);
        }
        if len(recv) > 0 {
            let got = tl.recv(Some("W"), &[len(recv)], dt);
            let mine = acc[recv as usize].take().expect("a loaded block");
            acc[recv as usize] = Some(tl.binary(combine, &mine, &got));
        }
    }
    acc[((rank + k) % p) as usize].take()
}

/// All-gather phase over the `p` blocks `dst` (this rank's output): the
/// rank holds `mine`, block `(r + k) mod p` (already stored where it
/// belongs); at step `s` it sends block `(r + k − s) mod p` east (first
/// its own, then the one it just received) and stores the block
/// `(r + k − s − 1) mod p` received from the west, forwarding it next.
pub fn all_gather<T: Tl>(
    tl: &T,
    dst: &[Chunk],
    mine: Option<T::Tensor>,
    dt: Dtype,
    rank: u32,
    k: u32,
) {
    let p = dst.len() as u32;
    let mut current = mine;
    for s in 0..p.saturating_sub(1) {
        let (_, recv) = ring_step(rank + k, s, p);
        if let Some(t) = current.take() {
            tl.send("E", &t);
        }
        let n = dst[recv as usize].n_elem as u32;
        if n > 0 {
            let got = tl.recv(Some("W"), &[n], dt);
            tl.store(dst[recv as usize].addr, &got);
            current = Some(got);
        }
    }
}

/// Pipelined ring broadcast of `chunks` from rank `root` along the ring
/// root → root + 1 → … → root − 1: the root loads and sends each chunk
/// east; every other rank receives it from the west, stores it and (but
/// the last) forwards it east at once, so chunk `c` crosses hop `h` while
/// chunk `c + 1` crosses hop `h − 1`.
pub fn broadcast<T: Tl>(tl: &T, job: &Rooted) {
    let (chunks, dt, rank) = (&job.chunks, job.call.dtype, job.rank);
    let (root, p) = (job.call.root, job.call.world_size);
    if p < 2 {
        return;
    }
    let pos = (rank + p - root) % p; // hops from the root
    for c in chunks.iter().filter(|c| c.n_elem > 0) {
        let shape = [c.n_elem as u32];
        if pos == 0 {
            let t = tl.load(c.addr, &shape, dt);
            tl.send("E", &t);
        } else {
            let got = tl.recv(Some("W"), &shape, dt);
            if pos < p - 1 {
                tl.send("E", &got);
            }
            tl.store(c.addr, &got);
        }
    }
}

/// Pipelined ring reduce of `chunks` to rank `root` along the chain
/// root + 1 → root + 2 → … → root: the first rank sends each chunk east;
/// every further rank combines the chunk from the west into its own and
/// sends the result on; the root combines the last one, scales it by
/// `finish` (an `avg`) and stores it. The other ranks' tensors are left
/// as they were.
pub fn reduce<T: Tl>(tl: &T, job: &Rooted) {
    let (chunks, dt, rank) = (&job.chunks, job.call.dtype, job.rank);
    let (root, p) = (job.call.root, job.call.world_size);
    let (combine, finish) = (job.call.op.combine(), job.call.op.finish_factor(p));
    if p < 2 {
        return;
    }
    let pos = (rank + 2 * p - root - 1) % p; // 0: first of the chain, p − 1: the root
    for c in chunks.iter().filter(|c| c.n_elem > 0) {
        let shape = [c.n_elem as u32];
        let mine = tl.load(c.addr, &shape, dt);
        if pos == 0 {
            tl.send("E", &mine);
            continue;
        }
        let got = tl.recv(Some("W"), &shape, dt);
        let mut acc = tl.binary(combine, &mine, &got);
        if pos < p - 1 {
            tl.send("E", &acc);
        } else {
            if let Some(f) = finish {
                acc = tl.scale(&acc, f);
            }
            tl.store(c.addr, &acc);
        }
    }
}

/// Ring all-to-all (relay): `src[j]` goes to rank `j` and `dst[i]`
/// receives rank `i`'s block for this rank. The own block is copied;
/// then at step `s = 1 .. p − 1` the rank sends east the `p − s` blocks
/// still travelling (at step 1 its own for ranks r + 1 … r + p − 1, later
/// those it received), each followed by the receive of one from the west:
/// the first block received at step `s` (from rank r − s) is its own, the
/// others travel on. Every block of `S/p` bytes crosses as many links as
/// its distance: `p(p − 1)/2` messages per rank.
///
/// A received block is copied out of its IPCQ slot at once (`recv_into`),
/// so no rank holds slots while it sends: the travelling blocks wait in
/// the output blocks not yet filled (at step `s`, those of ranks
/// r − s − 1 … r + 1: exactly the `p − s − 1` travelling ones) and are
/// sent from there by the handle `recv_into` returned, so each send waits
/// for its copy to land; the next receive into the same place comes after
/// the send's read (one DMA engine runs them in order).
pub fn all_to_all<T: Tl>(tl: &T, src: &[Chunk], dst: &[Chunk], dt: Dtype, rank: u32) {
    let p = src.len() as i64;
    let n = src[0].n_elem as u32;
    if n == 0 {
        return;
    }
    let shape = [n];
    let r = rank as i64;
    let at = |i: i64| dst[i.rem_euclid(p) as usize].addr;
    let own = tl.load(src[rank as usize].addr, &shape, dt);
    tl.store(at(r), &own);
    let mut travelling: Vec<T::Tensor> = Vec::new();
    for s in 1..p {
        let mut received = Vec::with_capacity((p - s) as usize);
        for k in 0..p - s {
            if s == 1 {
                let t = tl.load(src[(r + 1 + k).rem_euclid(p) as usize].addr, &shape, dt);
                tl.send("E", &t);
            } else {
                // Travelling block k, parked at step s − 1 in the output
                // block of rank r − s − k.
                tl.send("E", &travelling[k as usize]);
            }
            // k = 0: this rank's block from rank r − s, in its place;
            // k ≥ 1: travelling on, parked in an unfilled output block.
            received.push(tl.recv_into(Some("W"), &shape, dt, at(r - s - k)));
        }
        travelling = received.split_off(1);
    }
}
