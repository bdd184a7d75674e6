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
use crate::{Dtype, Reduction, Tl};

/// Elements of one block piece when an entry gives no `chunk_size`: 1 MiB
/// of a 4-byte dtype (512 KiB of f16), so the default entries' 1 MiB
/// slots carry any size and dtype, and a piece crosses a 100 GB/s link
/// in ≥ 5 µs, ten times its latency, which keeps the pipeline full.
pub const DEFAULT_PIECE: u64 = 256 * 1024;

/// Rounds a ring phase keeps in flight at once: a tile of more rounds goes
/// in waves of this many, one after another, so that the partial results
/// a rank holds in TCM between two steps (one piece per round in flight)
/// stay bounded whatever the size (4 pieces of 1 MiB beside the default
/// IPCQ slots fit the default 16 MiB TCM). Four pieces keep a link busy
/// across a step once a piece takes longer than a third of the link's
/// latency to cross it.
pub const WAVE: usize = 4;

/// Pieces a rank lets the west owe it before it waits for the oldest
/// (see [`reduce_scatter`]): 2 keeps the ring free of deadlock with any
/// number of IPCQ slots (a send blocks only when the east holds more
/// unreceived pieces than it has slots, and no rank owes more than one
/// before it sends) and fills the link once a piece takes longer to
/// cross it than the link's latency.
pub const PIPELINE_WINDOW: usize = 2;

/// Reduce-scatter phase over `rounds`, each the `p` blocks of one round
/// of this rank's input (one block per rank): `p − 1` steps; at step `s`
/// the rank sends its partial result of block `(r + k − 1 − s) mod p`
/// east and combines the block `(r + k − 2 − s) mod p` received from the
/// west into its own with `red`'s combine (every own block loaded is
/// prepared: premul_sum's factor). Returns, per round, the full
/// reduction of block `(r + k) mod p` (not yet finished: an `avg` still
/// has to be scaled, [`Reduction::finished`]), None if that block is
/// empty.
///
/// The rounds pipeline across the steps (NCCL's chunking): within a step
/// the rounds' pieces are sent one after another, and a piece owed by
/// the west is received (in order) only when its round must send it on
/// or more than [`PIPELINE_WINDOW`] − 1 are owed, so a step's pieces
/// follow each other on the link and a piece leaves for the next step as
/// soon as it has arrived and been combined, instead of every piece
/// paying the latency. A block is loaded when its piece becomes owed
/// (the load overlaps the wait) and dropped once sent.
#[track_caller]
pub fn reduce_scatter<T: Tl>(
    tl: &T,
    rounds: &[Vec<Chunk>],
    red: Reduction,
    dt: Dtype,
    rank: u32,
    k: u32,
) -> Vec<Option<T::Tensor>> {
    let p = rounds.first().map_or(0, |b| b.len()) as u32;
    // Every block loaded is the rank's own contribution.
    let load = |b: &Chunk| red.load(tl, b.addr, b.n_elem, dt);
    let none = || std::iter::repeat_with(|| None).take(p as usize).collect();
    let mut acc: Vec<Vec<Option<T::Tensor>>> = rounds.iter().map(|_| none()).collect();
    let mut owed = Owed::default();
    // Receive the oldest piece owed and combine it into its block.
    let land = |acc: &mut Vec<Vec<Option<T::Tensor>>>, (j, b, n): (usize, u32, u32)| {
        let got = tl.recv(Some("W"), &[n], dt);
        let mine = acc[j][b as usize]
            .take()
            .expect("loaded when the piece became owed");
        acc[j][b as usize] = Some(red.combine(tl, &mine, &got));
    };
    // ring_step(q, s) = (q − s, q − s − 1): here q = r + k − 1.
    let q = rank + k + p.max(1) - 1;
    for s in 0..p.saturating_sub(1) {
        // What step s sends is what step s − 1 received.
        let (send, recv) = ring_step(q, s, p);
        for (j, blocks) in rounds.iter().enumerate() {
            while let Some(piece) = owed.next_before_send(j) {
                land(&mut acc, piece);
            }
            let (out, into) = (&blocks[send as usize], &blocks[recv as usize]);
            if out.n_elem > 0 {
                let t = acc[j][send as usize].take().unwrap_or_else(|| load(out));
                tl.send("E", &t);
            }
            if into.n_elem > 0 {
                if acc[j][recv as usize].is_none() {
                    acc[j][recv as usize] = Some(load(into));
                }
                owed.push(j, recv, into.n_elem as u32);
            }
        }
    }
    while let Some(piece) = owed.oldest() {
        land(&mut acc, piece);
    }
    let own = ((rank + k) % p.max(1)) as usize;
    rounds
        .iter()
        .zip(&mut acc)
        .map(|(blocks, acc)| match acc[own].take() {
            Some(t) => Some(t),
            // p = 1: nothing was exchanged, the block is the result
            None => (blocks[own].n_elem > 0).then(|| load(&blocks[own])),
        })
        .collect()
}

/// The pieces the west owes a rank, oldest first: (round, block, elements).
#[derive(Default)]
struct Owed(std::collections::VecDeque<(usize, u32, u32)>);

impl Owed {
    fn push(&mut self, round: usize, block: u32, n: u32) {
        self.0.push_back((round, block, n));
    }

    fn oldest(&mut self) -> Option<(usize, u32, u32)> {
        self.0.pop_front()
    }

    /// The next piece to receive before round `j` sends: while `j`'s own
    /// piece is still owed (it must arrive before it moves on), or the
    /// window is full.
    fn next_before_send(&mut self, j: usize) -> Option<(usize, u32, u32)> {
        let must = self.0.iter().any(|o| o.0 == j) || self.0.len() >= PIPELINE_WINDOW;
        if must {
            self.oldest()
        } else {
            None
        }
    }
}

/// All-gather phase over `rounds`, each the `p` blocks of one round of
/// this rank's output: the rank holds `mine[j]`, block `(r + k) mod p`
/// of round `j` (already stored where it belongs); at step `s` it sends
/// block `(r + k − s) mod p` east (first its own, then the one it just
/// received) and stores the block `(r + k − s − 1) mod p` received from
/// the west, forwarding it next. The rounds pipeline across the steps as
/// in [`reduce_scatter`].
#[track_caller]
pub fn all_gather<T: Tl>(
    tl: &T,
    rounds: &[Vec<Chunk>],
    mine: Vec<Option<T::Tensor>>,
    dt: Dtype,
    rank: u32,
    k: u32,
) {
    let p = rounds.first().map_or(0, |b| b.len()) as u32;
    let mut held = mine;
    let mut owed = Owed::default();
    // Receive a piece owed into its place. The piece about to be sent
    // (round `now`) is stored and forwarded from its slot at once, in
    // parallel; one received ahead of its turn is copied out of its slot
    // first, so that no rank holds a slot per round in flight (a ring of
    // full slots deadlocks).
    let land = |held: &mut Vec<Option<T::Tensor>>, (j, b, n): (usize, u32, u32), now: usize| {
        let place = rounds[j][b as usize].addr;
        held[j] = Some(if j == now {
            let got = tl.recv(Some("W"), &[n], dt);
            tl.store(place, &got);
            got
        } else {
            tl.recv_into(Some("W"), &[n], dt, place)
        });
    };
    for s in 0..p.saturating_sub(1) {
        let (_, recv) = ring_step(rank + k, s, p);
        for (j, blocks) in rounds.iter().enumerate() {
            while let Some(piece) = owed.next_before_send(j) {
                land(&mut held, piece, j);
            }
            if let Some(t) = held[j].take() {
                tl.send("E", &t);
            }
            let into = &blocks[recv as usize];
            if into.n_elem > 0 {
                owed.push(j, recv, into.n_elem as u32);
            }
        }
    }
    while let Some(piece) = owed.oldest() {
        land(&mut held, piece, piece.0);
    }
}

/// Pipelined ring broadcast of `chunks` from rank `root` along the ring
/// root → root + 1 → … → root − 1: the root loads and sends each chunk
/// east; every other rank receives it from the west, stores it and (but
/// the last) forwards it east at once, so chunk `c` crosses hop `h` while
/// chunk `c + 1` crosses hop `h − 1`.
#[track_caller]
pub fn broadcast<T: Tl>(tl: &T, job: &Rooted) {
    let (dt, rank) = (job.call.dtype, job.rank);
    let (root, p) = (job.call.root, job.call.world_size);
    if p < 2 {
        return copy_out(tl, job);
    }
    let pos = (rank + p - root) % p; // hops from the root
    for (c, o) in job.pairs().filter(|(c, _)| c.n_elem > 0) {
        let shape = [c.n_elem as u32];
        if pos == 0 {
            let t = tl.load(c.addr, &shape, dt);
            tl.send("E", &t);
            if o.addr != c.addr {
                // Out of place the root's output gets its input too.
                tl.store(o.addr, &t);
            }
        } else {
            let got = tl.recv(Some("W"), &shape, dt);
            if pos < p - 1 {
                tl.send("E", &got);
            }
            tl.store(o.addr, &got);
        }
    }
}

/// Pipelined ring reduce of `chunks` to rank `root` along the chain
/// root + 1 → root + 2 → … → root: the first rank sends each chunk east;
/// every further rank combines the chunk from the west into its own and
/// sends the result on; the root combines the last one, scales it by
/// `finish` (an `avg`) and stores it. The other ranks' tensors are left
/// as they were.
#[track_caller]
pub fn reduce<T: Tl>(tl: &T, job: &Rooted) {
    let (dt, rank) = (job.call.dtype, job.rank);
    let (root, p) = (job.call.root, job.call.world_size);
    let red = job.reduction();
    if p < 2 {
        return reduce_alone(tl, job, &red);
    }
    let pos = (rank + 2 * p - root - 1) % p; // 0: first of the chain, p − 1: the root
    for (c, o) in job.pairs().filter(|(c, _)| c.n_elem > 0) {
        let shape = [c.n_elem as u32];
        let mine = red.load(tl, c.addr, c.n_elem, dt);
        if pos == 0 {
            tl.send("E", &mine);
            continue;
        }
        let got = tl.recv(Some("W"), &shape, dt);
        let acc = red.combine(tl, &mine, &got);
        if pos < p - 1 {
            tl.send("E", &acc);
        } else {
            tl.store(o.addr, &red.finished(tl, acc));
        }
    }
}

/// A reduce of one rank: its output is its input (nothing to do in
/// place), or with premul_sum its input times its factor.
pub(crate) fn reduce_alone<T: Tl>(tl: &T, job: &Rooted, red: &Reduction) {
    if !red.alone_computes() {
        return copy_out(tl, job);
    }
    for (c, o) in job.pairs().filter(|(c, _)| c.n_elem > 0) {
        let t = red.load(tl, c.addr, c.n_elem, job.call.dtype);
        tl.store(o.addr, &t);
    }
}

/// A rooted collective of one rank out of place: its output is its
/// input (nothing to do in place).
pub(crate) fn copy_out<T: Tl>(tl: &T, job: &Rooted) {
    for (c, o) in job
        .pairs()
        .filter(|(c, o)| c.n_elem > 0 && c.addr != o.addr)
    {
        let t = tl.load(c.addr, &[c.n_elem as u32], job.call.dtype);
        tl.store(o.addr, &t);
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
#[track_caller]
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
    let input = |k: i64| tl.load(src[(r + 1 + k).rem_euclid(p) as usize].addr, &shape, dt);
    // In place (output = input), the first step's receives would land on
    // blocks not sent yet: load them all before any arrives.
    let in_place = src[0].addr == dst[0].addr;
    let mut loaded: Vec<T::Tensor> = if in_place {
        (0..p - 1).map(input).collect()
    } else {
        Vec::new()
    };
    loaded.reverse();
    let mut travelling: Vec<T::Tensor> = Vec::new();
    for s in 1..p {
        let mut received = Vec::with_capacity((p - s) as usize);
        for k in 0..p - s {
            if s == 1 {
                let t = loaded.pop().unwrap_or_else(|| input(k));
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
