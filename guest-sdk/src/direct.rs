//! The phases of the algorithms that talk to any rank directly, on the
//! `full_mesh` IPCQ table: direction `R{j}` leads to rank `j` (and a
//! message from rank `i` arrives under `R{i}`), one queue per pair of
//! ranks, routed over the machine's links like any DMA. Binomial trees,
//! recursive halving–doubling (Rabenseifner) and the direct all-to-all.
//!
//! Messages are per block: a rank never concatenates blocks, it sends the
//! blocks of a range one after another (each message pays the DMA setup;
//! the path latency of back-to-back messages to one peer overlaps, so a
//! range of `h` blocks costs about `λ + h·setup + bytes/B`, not `h·α`).
//! Received blocks that must travel on are copied out of their slot
//! (`recv_into`) and sent by the handle it returns, so a rank never holds
//! IPCQ slots while it sends, and every send waits for its copy to land.

use crate::helpers::{Chunk, Rooted};
use crate::{Dtype, Reduction, Tl};

/// The install keys of the `full_mesh` algorithms: `p(p − 1)` queues, so
/// their slots live in HBM (two of 1 MiB per pair), not in TCM.
pub const ENTRY_DEFAULTS: crate::EntryDefaults = crate::EntryDefaults {
    topology: Some("full_mesh"),
    mapper: Some("leader_only"),
    buffer_kind: Some("hbm"),
    n_slots: Some(2),
    slot_size: Some(1 << 20),
    validator: Some("single_shard_per_rank"),
};

/// The direction to rank `j` (and from rank `j`).
pub fn to(j: u32) -> String {
    format!("R{j}")
}

/// The smallest power of two ≥ `p`.
fn ceil_pow2(p: u32) -> u32 {
    p.max(1).next_power_of_two()
}

/// Binomial-tree broadcast of `chunks` from `root` (MPICH's schedule): in
/// round `k` every rank that has the data sends it to the rank `2^k`
/// further (relative to the root), so `⌈log2 p⌉` rounds reach every rank;
/// a rank sends to its children largest subtree first. Each chunk is
/// forwarded as soon as it arrives.
#[track_caller]
pub fn binomial_broadcast<T: Tl>(tl: &T, job: &Rooted) {
    let (dt, rank) = (job.call.dtype, job.rank);
    let (root, p) = (job.call.root, job.call.world_size);
    if p < 2 {
        return crate::ring::copy_out(tl, job);
    }
    let v = (rank + p - root) % p;
    let real = |u: u32| (u + root) % p;
    // The parent: v without its lowest set bit; children: v + m for the
    // powers of two m below that bit.
    let low = if v == 0 {
        ceil_pow2(p)
    } else {
        v & v.wrapping_neg()
    };
    let children: Vec<u32> = std::iter::successors(Some(low >> 1), |m| Some(m >> 1))
        .take_while(|&m| m > 0)
        .filter(|&m| v + m < p)
        .map(|m| real(v + m))
        .collect();
    for (c, o) in job.pairs().filter(|(c, _)| c.n_elem > 0) {
        let shape = [c.n_elem as u32];
        let t = if v == 0 {
            let t = tl.load(c.addr, &shape, dt);
            if o.addr != c.addr {
                // Out of place the root's output gets its input too.
                tl.store(o.addr, &t);
            }
            t
        } else {
            tl.recv_into(Some(&to(real(v - low))), &shape, dt, o.addr)
        };
        for &child in &children {
            tl.send(&to(child), &t);
        }
    }
}

/// Binomial-tree reduce of `chunks` to `root`: in round `k` a rank whose
/// bit `k` (relative to the root) is set sends its partial result to the
/// rank `2^k` below and drops out; the others combine what they receive.
/// `⌈log2 p⌉` rounds; the root scales (an `avg`) and stores.
/// The other ranks' tensors are left as they were.
#[track_caller]
pub fn binomial_reduce<T: Tl>(tl: &T, job: &Rooted) {
    let (dt, rank) = (job.call.dtype, job.rank);
    let (root, p) = (job.call.root, job.call.world_size);
    let red = job.reduction();
    if p < 2 {
        return crate::ring::reduce_alone(tl, job, &red);
    }
    let v = (rank + p - root) % p;
    let real = |u: u32| (u + root) % p;
    for (c, o) in job.pairs().filter(|(c, _)| c.n_elem > 0) {
        let shape = [c.n_elem as u32];
        let mut acc = red.load(tl, c.addr, c.n_elem, dt);
        let mut mask = 1;
        while mask < p {
            if v & mask != 0 {
                tl.send(&to(real(v - mask)), &acc);
                break;
            }
            if v + mask < p {
                let got = tl.recv(Some(&to(real(v + mask))), &shape, dt);
                acc = red.combine(tl, &acc, &got);
            }
            mask <<= 1;
        }
        if v == 0 {
            acc = red.finished(tl, acc);
            tl.store(o.addr, &acc);
        }
    }
}

/// Direct all-to-all: the own block is copied, then for `k = 1 .. p − 1`
/// the rank sends block `r + k` straight from its input to rank `r + k`
/// and receives rank `r − k`'s block into its output (the shifted order
/// spreads the traffic: in step `k` every rank sends to a different one).
/// `p − 1` messages of `S/p` per rank, each over its routed path.
#[track_caller]
pub fn all_to_all<T: Tl>(tl: &T, src: &[Chunk], dst: &[Chunk], dt: Dtype, rank: u32) {
    let p = src.len() as u32;
    let n = src[0].n_elem as u32;
    if n == 0 {
        return;
    }
    let shape = [n];
    let own = tl.load(src[rank as usize].addr, &shape, dt);
    tl.store(dst[rank as usize].addr, &own);
    // In place (output = input), a block may arrive before this rank has
    // sent the one it lands on: load every block first, send the copies.
    let in_place = src[0].addr == dst[0].addr;
    let mut loaded: Vec<T::Tensor> = if in_place {
        (1..p)
            .map(|k| tl.load(src[((rank + k) % p) as usize].addr, &shape, dt))
            .collect()
    } else {
        Vec::new()
    };
    loaded.reverse();
    for k in 1..p {
        let (peer, from) = ((rank + k) % p, (rank + p - k) % p);
        match loaded.pop() {
            Some(t) => tl.send(&to(peer), &t),
            // Out of place the input is never written: sent straight
            // from memory.
            None => tl.send_addr(&to(peer), src[peer as usize].addr, &shape, dt),
        }
        tl.recv_into(Some(&to(from)), &shape, dt, dst[from as usize].addr);
    }
}

/// Recursive halving–doubling all-reduce (Rabenseifner) of the blocks
/// `blocks` (the tile cut into `p'` blocks, `p'` the largest power of two
/// ≤ `p`):
///
/// 1. fix-up (`p` not a power of two, `e = p − p'` extra ranks): each even
///    rank `r < 2e` sends its tile to `r + 1`, which combines it, and sits
///    out; the remaining `p'` ranks renumber `0 .. p'`;
/// 2. reduce-scatter by recursive halving: `log2 p'` steps; at distance
///    `p'/2, p'/4, …, 1` a rank exchanges half of its current range with
///    its partner and combines the half it keeps; it ends owning block
///    `v` (its new number), fully reduced (then finished by `red`; every
///    rank's own blocks are prepared as they are read);
/// 3. all-gather by recursive doubling: distances `1, 2, …, p'/2`, each
///    step exchanging the whole range held;
/// 4. fix-up: each rank `r + 1` sends the result to its even partner.
///
/// Blocks are read from `blocks` and the results written to `outs` (the
/// same chunks in place; the output's out of place).
#[track_caller]
pub fn halving_doubling_all_reduce<T: Tl>(
    tl: &T,
    (blocks, outs): (&[Chunk], &[Chunk]),
    red: Reduction,
    dt: Dtype,
    rank: u32,
    p: u32,
) {
    let pp = blocks.len() as u32; // p'
    let extra = p - pp;
    let shape = |b: usize| [blocks[b].n_elem as u32];
    let live = |b: &usize| blocks[*b].n_elem > 0;
    let all: Vec<usize> = (0..pp as usize).filter(live).collect();
    // 1. Fix-up in.
    if rank < 2 * extra && rank.is_multiple_of(2) {
        for &b in &all {
            if red.prepare.is_some() {
                // premul_sum: its contribution times its factor.
                let t = red.load(tl, blocks[b].addr, blocks[b].n_elem, dt);
                tl.send(&to(rank + 1), &t);
            } else {
                tl.send_addr(&to(rank + 1), blocks[b].addr, &shape(b), dt);
            }
        }
        for &b in &all {
            tl.recv_into(Some(&to(rank + 1)), &shape(b), dt, outs[b].addr);
        }
        return;
    }
    let v = if rank < 2 * extra {
        rank / 2
    } else {
        rank - extra
    };
    let real = |u: u32| if u < extra { 2 * u + 1 } else { u + extra };
    let mut acc: Vec<Option<T::Tensor>> = (0..pp as usize)
        .map(|b| live(&b).then(|| red.load(tl, blocks[b].addr, blocks[b].n_elem, dt)))
        .collect();
    if rank < 2 * extra {
        for &b in &all {
            let got = tl.recv(Some(&to(rank - 1)), &shape(b), dt);
            let mine = acc[b].take().expect("a live block");
            acc[b] = Some(red.combine(tl, &mine, &got));
        }
    }
    // 2. Reduce-scatter by recursive halving.
    let (mut lo, mut hi) = (0usize, pp as usize);
    let mut mask = pp / 2;
    while mask >= 1 {
        let partner = to(real(v ^ mask));
        let mid = lo + (hi - lo) / 2;
        let (give, keep) = if v & mask == 0 {
            (mid..hi, lo..mid)
        } else {
            (lo..mid, mid..hi)
        };
        for (g, k) in give.zip(keep.clone()) {
            if let Some(t) = acc[g].take() {
                tl.send(&partner, &t);
            }
            if live(&k) {
                let got = tl.recv(Some(&partner), &shape(k), dt);
                let mine = acc[k].take().expect("a live block");
                acc[k] = Some(red.combine(tl, &mine, &got));
            }
        }
        (lo, hi) = (keep.start, keep.end);
        mask /= 2;
    }
    // Block v is fully reduced: finish and store it.
    let own = v as usize;
    if let Some(t) = acc[own].take() {
        let t = red.finished(tl, t);
        tl.store(outs[own].addr, &t);
        acc[own] = Some(t);
    }
    // 3. All-gather by recursive doubling: the held range doubles.
    let mut mask = 1;
    while mask < pp {
        let partner = to(real(v ^ mask));
        let base = (v & !(2 * mask - 1)) as usize;
        let (mine, theirs) = if v & mask == 0 {
            (
                base..base + mask as usize,
                base + mask as usize..base + 2 * mask as usize,
            )
        } else {
            (
                base + mask as usize..base + 2 * mask as usize,
                base..base + mask as usize,
            )
        };
        for (m, t) in mine.zip(theirs) {
            if let Some(x) = &acc[m] {
                tl.send(&partner, x);
            }
            if live(&t) {
                acc[t] = Some(tl.recv_into(Some(&partner), &shape(t), dt, outs[t].addr));
            }
        }
        mask *= 2;
    }
    // 4. Fix-up out.
    if rank < 2 * extra {
        for &b in &all {
            tl.send(&to(rank - 1), acc[b].as_ref().expect("every block held"));
        }
    }
}
