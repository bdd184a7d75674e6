//! What each rank's simulated time went to: the spans in which it
//! computed (its launches, `ahbm.gemm` / `busy`) and communicated (its
//! collectives and sends / receives, blocking or asynchronous, from the
//! moment each starts running to its end on every rank), and from them
//! the breakdown a training-step author reads:
//!
//! * **compute**: the time covered by compute spans;
//! * **communication**: the time covered by communication spans;
//! * **exposed**: communication with no compute running — what
//!   overlapping did not hide;
//! * **idle**: neither, up to the end of the run.
//!
//! One span per call and rank is kept (16 bytes), whatever the call's
//! size.

use crate::units::Ps;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// What a span was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    Compute,
    Communication,
}

/// The spans of every rank of a run.
#[derive(Default)]
pub struct Timelines {
    ranks: Mutex<BTreeMap<u32, Spans>>,
    /// Whether the run made an asynchronous call: the breakdown is
    /// reported then, or when it both computed and communicated.
    overlapping: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct Spans {
    compute: Vec<(Ps, Ps)>,
    communication: Vec<(Ps, Ps)>,
}

/// One rank's breakdown, in picoseconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RankRow {
    pub rank: u32,
    pub compute_ps: Ps,
    pub communication_ps: Ps,
    pub exposed_ps: Ps,
    pub idle_ps: Ps,
}

impl Timelines {
    /// Rank `rank` did `what` from `start` to `end`.
    pub fn record(&self, rank: u32, what: Activity, (start, end): (Ps, Ps)) {
        if end <= start {
            return;
        }
        let mut ranks = self.ranks.lock().unwrap();
        let spans = ranks.entry(rank).or_default();
        match what {
            Activity::Compute => spans.compute.push((start, end)),
            Activity::Communication => spans.communication.push((start, end)),
        }
    }

    /// The run made an asynchronous call.
    pub fn note_overlap(&self) {
        self.overlapping
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Every rank's breakdown up to `end` (the run's end), by rank; none
    /// for a run that made no asynchronous call and did not both compute
    /// and communicate (a collective bench, a kernel bench).
    pub fn rows(&self, end: Ps) -> Vec<RankRow> {
        let ranks = self.ranks.lock().unwrap();
        let both = ranks.values().any(|s| !s.compute.is_empty())
            && ranks.values().any(|s| !s.communication.is_empty());
        if !both && !self.overlapping.load(std::sync::atomic::Ordering::Relaxed) {
            return Vec::new();
        }
        ranks
            .iter()
            .map(|(&rank, s)| {
                let compute = union(&s.compute);
                let comm = union(&s.communication);
                let busy = union(&[compute.clone(), comm.clone()].concat());
                RankRow {
                    rank,
                    compute_ps: measure(&compute),
                    communication_ps: measure(&comm),
                    exposed_ps: measure(&comm) - overlap(&comm, &compute),
                    idle_ps: end.saturating_sub(measure(&busy)),
                }
            })
            .collect()
    }
}

/// `spans` sorted and merged where they touch or overlap.
fn union(spans: &[(Ps, Ps)]) -> Vec<(Ps, Ps)> {
    let mut v = spans.to_vec();
    v.sort_unstable();
    let mut out: Vec<(Ps, Ps)> = Vec::with_capacity(v.len());
    for (s, e) in v {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

fn measure(merged: &[(Ps, Ps)]) -> Ps {
    merged.iter().map(|(s, e)| e - s).sum()
}

/// The time two merged lists share.
fn overlap(a: &[(Ps, Ps)], b: &[(Ps, Ps)]) -> Ps {
    let (mut i, mut j, mut total) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let (s, e) = (a[i].0.max(b[j].0), a[i].1.min(b[j].1));
        if s < e {
            total += e - s;
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

/// The breakdown as a table, in µs (nccl-tests' unit).
pub fn to_table(rows: &[RankRow]) -> String {
    let us = |ps: Ps| ps as f64 / 1e6;
    let mut out = String::from(
        "#\n# per rank: where the time went (us); exposed = communication with no compute running\n\
         #  rank     compute  communication     exposed        idle\n",
    );
    for r in rows {
        out.push_str(&format!(
            "{:>7} {:>11.3} {:>14.3} {:>11.3} {:>11.3}\n",
            r.rank,
            us(r.compute_ps),
            us(r.communication_ps),
            us(r.exposed_ps),
            us(r.idle_ps)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Overlapping spans are counted once; exposed communication is what
    /// compute does not cover; idle is the rest up to the end.
    #[test]
    fn the_breakdown_counts_overlap_once_and_exposes_the_uncovered_part() {
        let t = Timelines::default();
        t.record(0, Activity::Communication, (0, 100));
        t.record(0, Activity::Communication, (50, 150)); // overlaps: 0..150
        t.record(0, Activity::Compute, (100, 300)); // covers 100..150
        t.record(0, Activity::Communication, (400, 450));
        t.record(1, Activity::Compute, (0, 10));
        let rows = t.rows(1000);
        assert_eq!(
            rows[0],
            RankRow {
                rank: 0,
                compute_ps: 200,
                communication_ps: 200,
                exposed_ps: 150,
                idle_ps: 1000 - 350,
            }
        );
        assert_eq!(rows[1].compute_ps, 10);
        assert_eq!(rows[1].exposed_ps, 0);
        assert!(to_table(&rows).contains("exposed"));
    }

    /// A run that only communicates, or only computes, reports no
    /// breakdown, unless it made an asynchronous call.
    #[test]
    fn a_run_without_overlap_has_no_breakdown() {
        let t = Timelines::default();
        t.record(0, Activity::Communication, (0, 100));
        assert!(t.rows(100).is_empty());
        t.note_overlap();
        assert_eq!(t.rows(100).len(), 1);
        let c = Timelines::default();
        c.record(0, Activity::Compute, (0, 100));
        assert!(c.rows(100).is_empty());
        c.record(1, Activity::Communication, (0, 100));
        assert_eq!(c.rows(100).len(), 2);
    }
}
