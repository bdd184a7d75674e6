//! The data executor: replays an op log from an empty memory image, each
//! op reading at its start and writing at its end, in an order that keeps
//! every edge of the log but otherwise runs each point as late as it can,
//! the opposite of the first pass wherever the log leaves the order free,
//! then compares every byte the first pass wrote. A race-free log gives
//! the same bytes in any such order.

use crate::address::Space;
use crate::budget::{BudgetExceeded, MemoryBudget};
use crate::hw::compute_op::Region;
use crate::hw::memory::{MemoryStore, Staged};
use crate::hw::oplog::{OpLog, OpParams, OpRecord};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// Bytes that differ between the passes, and the last op that wrote them
/// in each (found for the first [`super::LISTED`] mismatches).
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    pub region: Region,
    pub first_writer: Option<u64>,
    pub replay_writer: Option<u64>,
}

impl Mismatch {
    /// What the kernel would have needed.
    pub fn advice(&self) -> String {
        match (self.first_writer, self.replay_writer) {
            (Some(a), Some(b)) if a != b => format!(
                "#{a} and #{b} both write these bytes and the passes ran them in opposite \
                 orders: nothing in the kernel orders them. Make the one that must land last \
                 wait for the other (take its result as an input, or issue it after a recv / \
                 wait that follows it)"
            ),
            _ => "the same op wrote these bytes last in both passes, so what it read differed: \
                  look for a race on its inputs above; with none, the data executor and the \
                  timed machine disagree (a simulator bug: please report it with --oplog)"
                .to_string(),
        }
    }
}

/// What a replay found.
#[derive(Debug)]
pub struct Replay {
    /// Ops with a memory effect replayed.
    pub ops: usize,
    /// Bytes written by the first pass, all compared.
    pub bytes: u64,
    pub mismatches: Vec<Mismatch>,
}

/// Differing bytes closer than this merge into one mismatch.
const MERGE_GAP: u64 = 64;

/// Replay `log` and compare with `first_pass` (which reads the first
/// pass's memory at the end of the run).
pub fn replay(
    log: &OpLog,
    first_pass: impl Fn(Space, u64, u64) -> Vec<u8>,
    budget: Arc<MemoryBudget>,
) -> Result<Replay, BudgetExceeded> {
    let recs = log.records();
    let order = dependency_order(recs);
    let mut mem = MemoryStore::new(budget);
    let mut in_flight: FxHashMap<u64, Read> = FxHashMap::default();
    let mut ops = 0;
    for &point in &order {
        let r = &recs[(point / 2) as usize];
        if point % 2 == 0 {
            if let Some(read) = read(&mem, r) {
                in_flight.insert(r.id, read);
            }
            continue;
        }
        if !r.is_sync() {
            ops += 1;
        }
        write(&mut mem, r, in_flight.remove(&r.id))?;
    }
    let mut mismatches = Vec::new();
    let mut bytes = 0;
    for (space, ranges) in written(recs) {
        for (start, end) in ranges {
            bytes += end - start;
            let a = first_pass(space, start, end - start);
            let b = mem.read(space, start, end - start);
            for (s, e) in differing(&a, &b) {
                mismatches.push(Mismatch {
                    region: (space, start + s, e - s),
                    first_writer: None,
                    replay_writer: None,
                });
            }
        }
    }
    // Where each op wrote in the replay: the position of its end point.
    let position: FxHashMap<u64, usize> = order
        .iter()
        .enumerate()
        .filter(|(_, &pt)| pt % 2 == 1)
        .map(|(p, &pt)| (pt / 2, p))
        .collect();
    for m in mismatches.iter_mut().take(super::LISTED) {
        let writers: Vec<&OpRecord> = recs
            .iter()
            .filter(|r| r.params.writes().is_some_and(|w| overlaps(w, m.region)))
            .collect();
        m.first_writer = writers.iter().map(|r| r.id).max();
        m.replay_writer = writers.iter().map(|r| r.id).max_by_key(|id| position[id]);
    }
    Ok(Replay {
        ops,
        bytes,
        mismatches,
    })
}

/// The points of the ops (`2·id`: its start, where it reads; `2·id + 1`:
/// its end, where it writes) in an order that keeps every edge of the log
/// (deps and reuse: end → start; DMA queue order: start → start) and puts
/// each point as late as the others let it, the earliest-completed op's
/// first placed last: built from the back, each time taking, of the points
/// whose successors are all placed, the smallest. Two writes nothing orders
/// thus land in the opposite order to the first pass's wherever they can.
fn dependency_order(recs: &[OpRecord]) -> Vec<u64> {
    let n = recs.len();
    let mut successors = vec![0u32; 2 * n];
    for r in recs {
        successors[2 * r.id as usize] += 1; // its own end
        for p in predecessors(r) {
            successors[p as usize] += 1;
        }
    }
    let mut free: BinaryHeap<Reverse<u64>> = (0..2 * n as u64)
        .filter(|&p| successors[p as usize] == 0)
        .map(Reverse)
        .collect();
    let mut order = Vec::with_capacity(2 * n);
    while let Some(Reverse(p)) = free.pop() {
        order.push(p);
        let r = &recs[(p / 2) as usize];
        let preds: Vec<u64> = if p % 2 == 1 {
            vec![p - 1]
        } else {
            predecessors(r).collect()
        };
        for q in preds {
            successors[q as usize] -= 1;
            if successors[q as usize] == 0 {
                free.push(Reverse(q));
            }
        }
    }
    // A run that completed has no cycle (a DMA waits for its inputs
    // holding its engine's turn, so no command before it on that engine
    // can depend on it).
    debug_assert_eq!(order.len(), 2 * n, "the op log's edges have a cycle");
    order.reverse();
    order
}

/// The points with an edge to `r`'s start: its deps' and reused bytes'
/// users' ends, the start of the DMA before it on its engine.
fn predecessors(r: &OpRecord) -> impl Iterator<Item = u64> + '_ {
    r.deps
        .iter()
        .chain(&r.reuse)
        .map(|&d| 2 * d + 1)
        .chain(r.queue_prev.map(|q| 2 * q))
}

/// What an op read at its start.
enum Read {
    Staged(Staged),
    Inputs(Vec<Vec<u8>>),
}

/// Read what `r` reads (at its start).
fn read(mem: &MemoryStore, r: &OpRecord) -> Option<Read> {
    match &r.params {
        OpParams::Copy { src, .. } => Some(Read::Staged(mem.stage(src.0, src.1, src.2))),
        OpParams::Compute { inputs, .. } => Some(Read::Inputs(
            inputs.iter().map(|i| mem.read(i.0, i.1, i.2)).collect(),
        )),
        _ => None,
    }
}

/// Write what `r` writes (at its end), from what it read.
fn write(mem: &mut MemoryStore, r: &OpRecord, read: Option<Read>) -> Result<(), BudgetExceeded> {
    match (&r.params, read) {
        (OpParams::Copy { dst, .. }, Some(Read::Staged(s))) => mem.land(s, (dst.0, dst.1)),
        (OpParams::Compute { op, out, .. }, Some(Read::Inputs(data))) => {
            let views: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
            let mut o = vec![0u8; out.2 as usize];
            op.apply(&views, &mut o);
            mem.write(out.0, out.1, &o)
        }
        (OpParams::HostWrite { dst, data }, _) => mem.write(dst.0, dst.1, data),
        (OpParams::Zero { dst }, _) => mem.zero(dst.0, dst.1, dst.2),
        _ => Ok(()),
    }
}

fn overlaps(a: Region, b: Region) -> bool {
    a.0 == b.0 && a.1 < b.1 + b.2 && b.1 < a.1 + a.2
}

/// Per space, the merged byte ranges the log writes, in address order.
fn written(recs: &[OpRecord]) -> Vec<(Space, Vec<(u64, u64)>)> {
    let mut by_space: FxHashMap<Space, Vec<(u64, u64)>> = FxHashMap::default();
    for r in recs {
        if let Some((space, offset, len)) = r.params.writes() {
            if len > 0 {
                by_space
                    .entry(space)
                    .or_default()
                    .push((offset, offset + len));
            }
        }
    }
    let mut out: Vec<(Space, Vec<(u64, u64)>)> = by_space
        .into_iter()
        .map(|(space, mut v)| {
            v.sort_unstable();
            let mut merged: Vec<(u64, u64)> = Vec::new();
            for (s, e) in v {
                match merged.last_mut() {
                    Some(last) if s <= last.1 => last.1 = last.1.max(e),
                    _ => merged.push((s, e)),
                }
            }
            (space, merged)
        })
        .collect();
    out.sort_by_key(|(space, _)| space.to_string());
    out
}

/// Ranges (start, end) where `a` and `b` differ, nearby ones merged.
fn differing(a: &[u8], b: &[u8]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    if a == b {
        return out;
    }
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        if x != y {
            let i = i as u64;
            match out.last_mut() {
                Some(last) if i <= last.1 + MERGE_GAP => last.1 = i + 1,
                _ => out.push((i, i + 1)),
            }
        }
    }
    out
}
