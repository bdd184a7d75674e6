//! Race detection on an op log: two ops that touch overlapping bytes, at
//! least one of them writing, with no chain of dependencies from one to
//! the other. Such a pair completes in an order only the timing chose; a
//! change of link figures or sizes may flip it.
//!
//! Each op has two points, its start (reads) and its end (writes), and the
//! log's edges join points (see [`crate::hw::oplog`]). The ops are visited
//! in id (completion) order with a shadow of memory that keeps, per byte
//! range, the last writer and the readers since it; each new access is
//! checked against them: the two points involved must be joined by a path
//! one way or the other, found by a search back through the edges, latest
//! point first, pruned by simulated time (every edge goes forward in it).

use crate::address::Space;
use crate::hw::compute_op::Region;
use crate::hw::oplog::{OpLog, OpRecord};
use crate::units::Ps;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::{BTreeMap, BinaryHeap};

/// Which accesses conflict; `first` has the smaller id (completed first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RaceKind {
    /// Both write.
    WriteWrite,
    /// `first` reads bytes that `second` writes.
    ReadWrite,
    /// `second` reads bytes that `first` writes.
    WriteRead,
}

impl RaceKind {
    pub fn name(self) -> &'static str {
        match self {
            RaceKind::WriteWrite => "write-write",
            RaceKind::ReadWrite => "read-write",
            RaceKind::WriteRead => "write-read",
        }
    }
}

/// Two unordered ops touching the same bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Race {
    pub kind: RaceKind,
    pub first: u64,
    pub second: u64,
    /// The overlapping bytes.
    pub region: Region,
}

impl Race {
    /// What ordering the kernel would have needed.
    pub fn advice(&self) -> String {
        let (a, b) = (self.first, self.second);
        match self.kind {
            RaceKind::WriteWrite => format!(
                "nothing orders these writes: the bytes hold whichever lands last. Make #{b} \
                 wait for #{a} (take its result as an input, or issue it after a recv / wait \
                 that follows #{a})"
            ),
            RaceKind::ReadWrite => format!(
                "#{b} may overwrite the bytes before #{a} has read them: the writer must wait \
                 for the reader (read through the tensor that holds the bytes, so they are not \
                 released before the read, or order the two through a message)"
            ),
            RaceKind::WriteRead => format!(
                "#{b} reads bytes #{a} writes with nothing making it wait for the write: read \
                 the tensor #{a} produces (not its raw address), or wait for it first"
            ),
        }
    }
}

/// The last writer of a byte range and the readers since.
#[derive(Debug, Clone, Default)]
struct Seg {
    end: u64,
    writer: Option<u64>,
    readers: Vec<u64>,
}

/// Per space: `start -> Seg`, disjoint.
type Shadow = FxHashMap<Space, BTreeMap<u64, Seg>>;

/// Make `at` a segment boundary.
fn split(map: &mut BTreeMap<u64, Seg>, at: u64) {
    let right = match map.range_mut(..at).next_back() {
        Some((_, seg)) if seg.end > at => {
            let right = Seg {
                end: seg.end,
                ..seg.clone()
            };
            seg.end = at;
            right
        }
        _ => return,
    };
    map.insert(at, right);
}

/// The segments covering `[start, end)`, created empty where none is.
fn cover(map: &mut BTreeMap<u64, Seg>, start: u64, end: u64) {
    split(map, start);
    split(map, end);
    let mut gaps = Vec::new();
    let mut at = start;
    for (&s, seg) in map.range(start..end) {
        if s > at {
            gaps.push((at, s));
        }
        at = seg.end;
    }
    if at < end {
        gaps.push((at, end));
    }
    for (s, e) in gaps {
        map.insert(
            s,
            Seg {
                end: e,
                ..Seg::default()
            },
        );
    }
}

/// Every race in `log`, in the order their second op completed.
pub fn find_races(log: &OpLog) -> Vec<Race> {
    let recs = log.records();
    let mut shadow = Shadow::default();
    let mut races = Vec::new();
    for r in recs.iter().filter(|r| !r.is_sync()) {
        // Candidates: (op, kind, overlap), one entry per op.
        let mut cands: Vec<(u64, RaceKind, Region)> = Vec::new();
        let mut note = |c: u64, kind: RaceKind, (space, s, e): (Space, u64, u64)| {
            // The bytes were freed by `c` and given to `r`'s output.
            if c == r.id || r.reuse.contains(&c) {
                return;
            }
            match cands.iter_mut().find(|x| x.0 == c) {
                Some(x) => {
                    let end = (x.2 .1 + x.2 .2).max(e);
                    x.2 .1 = x.2 .1.min(s);
                    x.2 .2 = end - x.2 .1;
                }
                None => cands.push((c, kind, (space, s, e - s))),
            }
        };
        for &(space, offset, len) in r.params.reads() {
            if len == 0 {
                continue;
            }
            let map = shadow.entry(space).or_default();
            cover(map, offset, offset + len);
            for (&s, seg) in map.range_mut(offset..offset + len) {
                if let Some(w) = seg.writer {
                    note(w, RaceKind::WriteRead, (space, s, seg.end));
                }
                if seg.readers.last() != Some(&r.id) {
                    seg.readers.push(r.id);
                }
            }
        }
        if let Some((space, offset, len)) = r.params.writes().filter(|w| w.2 > 0) {
            let map = shadow.entry(space).or_default();
            cover(map, offset, offset + len);
            let keys: Vec<u64> = map.range(offset..offset + len).map(|(&s, _)| s).collect();
            for s in keys {
                let seg = map.remove(&s).expect("a covered segment");
                if let Some(w) = seg.writer {
                    note(w, RaceKind::WriteWrite, (space, s, seg.end));
                }
                for &rd in &seg.readers {
                    note(rd, RaceKind::ReadWrite, (space, s, seg.end));
                }
            }
            map.insert(
                offset,
                Seg {
                    end: offset + len,
                    writer: Some(r.id),
                    readers: Vec::new(),
                },
            );
        }
        if cands.is_empty() {
            continue;
        }
        // The points each pair must have ordered, one way or the other.
        let pairs: Vec<(Point, Point)> = cands
            .iter()
            .map(|&(c, kind, _)| match kind {
                RaceKind::WriteWrite => (Point::end(c), Point::end(r.id)),
                RaceKind::ReadWrite => (Point::start(c), Point::end(r.id)),
                RaceKind::WriteRead => (Point::end(c), Point::start(r.id)),
            })
            .collect();
        let mut ordered = vec![false; pairs.len()];
        // First through `r`'s own PE and the host only (program and queue
        // order, the host's chain of writes and launches: most pairs are
        // ordered there, and that search is short), then through every op
        // for the pairs still open.
        let same_pe = |x: &OpRecord| x.pe == r.pe || x.pe.is_none();
        let any = |_: &OpRecord| true;
        for keep in [&same_pe as &dyn Fn(&OpRecord) -> bool, &any] {
            for to in [Point::start(r.id), Point::end(r.id)] {
                let from: FxHashSet<Point> = pairs
                    .iter()
                    .zip(&ordered)
                    .filter(|(p, done)| p.1 == to && !**done)
                    .map(|(p, _)| p.0)
                    .collect();
                if from.is_empty() {
                    continue;
                }
                let found = reaching(recs, to, &from, keep);
                for (k, p) in pairs.iter().enumerate() {
                    ordered[k] |= p.1 == to && found.contains(&p.0);
                }
            }
        }
        for (k, &(a, b)) in pairs.iter().enumerate() {
            // The other way round: `r` did its part first (an earlier DMA
            // on the same engine can complete later).
            if !ordered[k] && b.time(recs) <= a.time(recs) {
                let b_only = [b].into_iter().collect();
                ordered[k] = reaching(recs, a, &b_only, &any).contains(&b);
            }
        }
        for (k, (c, kind, region)) in cands.into_iter().enumerate() {
            if !ordered[k] {
                races.push(Race {
                    kind,
                    first: c,
                    second: r.id,
                    region,
                });
            }
        }
    }
    races
}

/// A point of an op: its start (where it reads) or its end (where it
/// writes; see [`crate::hw::oplog`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Point {
    op: u64,
    end: bool,
}

impl Point {
    fn start(op: u64) -> Self {
        Point { op, end: false }
    }
    fn end(op: u64) -> Self {
        Point { op, end: true }
    }
    fn time(self, recs: &[OpRecord]) -> Ps {
        let r = &recs[self.op as usize];
        if self.end {
            r.end_ps
        } else {
            r.start_ps
        }
    }
}

/// The points with an edge to `p`: an op's end follows its start; its
/// start follows its deps' ends and (a DMA) the previous command's start
/// on its engine.
fn edges_to(recs: &[OpRecord], p: Point) -> impl Iterator<Item = Point> + '_ {
    let r = &recs[p.op as usize];
    let (own, deps, queue) = if p.end {
        (Some(Point::start(p.op)), &[][..], None)
    } else {
        (None, &r.deps[..], r.queue_prev.map(Point::start))
    };
    own.into_iter()
        .chain(deps.iter().map(|&d| Point::end(d)))
        .chain(queue)
}

/// Which of `from` have a path to `to` through the ops `keep` accepts
/// (and `from` themselves): a
/// search back from `to`, latest point first, that stops at the earliest
/// of `from` (every edge goes forward in simulated time).
fn reaching(
    recs: &[OpRecord],
    to: Point,
    from: &FxHashSet<Point>,
    keep: &dyn Fn(&OpRecord) -> bool,
) -> FxHashSet<Point> {
    let earliest = from.iter().map(|p| p.time(recs)).min().unwrap_or(0);
    let mut found = FxHashSet::default();
    let mut seen = FxHashSet::default();
    let mut heap: BinaryHeap<(Ps, Point)> = edges_to(recs, to).map(|p| (p.time(recs), p)).collect();
    while let Some((t, p)) = heap.pop() {
        if t < earliest {
            break;
        }
        if !seen.insert(p) {
            continue;
        }
        if from.contains(&p) {
            found.insert(p);
            if found.len() == from.len() {
                break;
            }
        }
        for q in edges_to(recs, p) {
            let tq = q.time(recs);
            let wanted = keep(&recs[q.op as usize]) || from.contains(&q);
            if tq >= earliest && wanted && !seen.contains(&q) {
                heap.push((tq, q));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    const W: crate::hw::ipcq::CommId = crate::hw::ipcq::CommId::WORLD;
    use crate::engine::Event;
    use crate::hw::oplog::{Completed, OpParams};
    use crate::topology::PeCoord;

    const PE: PeCoord = PeCoord {
        sip: 0,
        cube: 0,
        pe: 0,
    };
    const HBM: Space = Space::Hbm { sip: 0, cube: 0 };

    /// DMA copies on one PE's engine, issued in the order given and
    /// completing at the spans given: (src offset, dst offset, span).
    fn dmas(copies: &[(u64, u64, (Ps, Ps))], queued: bool) -> Vec<Race> {
        let mut log = OpLog::default();
        let done: Vec<Event> = copies.iter().map(|_| Event::new()).collect();
        let prev: Vec<Option<usize>> = done
            .iter()
            .map(|d| if queued { log.dma_issued(PE, d) } else { None })
            .collect();
        let mut order: Vec<usize> = (0..copies.len()).collect();
        order.sort_by_key(|&i| copies[i].2 .1);
        for i in order {
            let (src, dst, span) = copies[i];
            log.record(Completed {
                op: "dma",
                pe: Some(PE),
                comm: W,
                unit: None,
                span,
                after: None,
                queue_prev: prev[i],
                inputs: Vec::new(),
                produces: Some(done[i].clone()),
                params: OpParams::Copy {
                    src: (HBM, src, 16),
                    dst: (HBM, dst, 16),
                },
            });
        }
        log.finish();
        find_races(&log)
    }

    #[test]
    fn the_dma_queue_orders_a_read_before_a_later_write_only() {
        // A copy reading [0, 16) then one writing it, the writer landing
        // first: the reader had read when the writer started.
        assert!(dmas(&[(0, 64, (0, 100)), (128, 0, (10, 50))], true).is_empty());
        // Without the queue between them, a race: the writer completed
        // first (id 0), the reader may have read before it landed.
        let r = dmas(&[(0, 64, (0, 100)), (128, 0, (10, 50))], false);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].kind, RaceKind::WriteRead);
        assert_eq!((r[0].first, r[0].second), (0, 1));
        assert_eq!(r[0].region, (HBM, 0, 16));
        // A write then a read of the same bytes on one engine: the read may
        // start before the write lands.
        let r = dmas(&[(128, 0, (0, 100)), (0, 64, (10, 120))], true);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].kind, RaceKind::WriteRead);
        // Two writes on one engine: either may land last.
        let r = dmas(&[(128, 0, (0, 100)), (256, 0, (10, 50))], true);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].kind, RaceKind::WriteWrite);
    }

    /// A dependency (the reader waits for the writer's result) orders them.
    #[test]
    fn a_dependency_orders_a_write_and_a_read() {
        let mut log = OpLog::default();
        let (a, b) = (Event::new(), Event::new());
        let copy = |src: u64, dst: u64, span, inputs: Vec<Event>, done: &Event| Completed {
            op: "dma",
            pe: Some(PE),
            comm: W,
            unit: None,
            span,
            after: None,
            queue_prev: None,
            inputs,
            produces: Some(done.clone()),
            params: OpParams::Copy {
                src: (HBM, src, 16),
                dst: (HBM, dst, 16),
            },
        };
        log.record(copy(128, 0, (0, 50), vec![], &a));
        log.record(copy(0, 64, (50, 90), vec![a.clone()], &b));
        log.finish();
        assert!(find_races(&log).is_empty());
        assert_eq!(log.records()[1].deps, vec![0]);
    }
}
