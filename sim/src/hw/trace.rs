//! Execution trace: busy intervals of PE engines and links, plus spans the
//! runtime adds (kernels, collectives), written as Chrome trace-event JSON
//! that Perfetto (ui.perfetto.dev) and chrome://tracing open.
//!
//! Tracks: one process per SIP; in it a thread per PE engine (DMA, MATH),
//! per PE kernel, and per link leaving that SIP's nodes; plus a "ranks"
//! process with one thread per bench rank.

use crate::budget::{MemoryBudget, MemoryUse};
use crate::engine::lock::Mutex;
use crate::hw::ipcq::CommId;
use crate::topology::{LinkId, PeCoord, Topology};
use crate::units::Ps;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Where a span is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Track {
    /// A PE's kernels of one communicator (two groups' kernels may run
    /// on a PE at once: a track each).
    Kernel(PeCoord, CommId),
    Dma(PeCoord),
    Math(PeCoord),
    Gemm(PeCoord),
    Link(LinkId),
    /// A rank's calls on one process group's stream (`CommId::LAUNCH`:
    /// its compute stream).
    Rank(u32, CommId),
}

/// One busy interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    pub track: Track,
    pub name: String,
    pub start: Ps,
    pub end: Ps,
}

/// Collects spans during a run (only when tracing is on). Spans are
/// charged to the run's memory budget (with room for their JSON form);
/// once it refuses, further spans are counted and dropped.
#[derive(Debug)]
pub struct TraceRecorder {
    spans: Mutex<Vec<Span>>,
    budget: Arc<MemoryBudget>,
    charged: AtomicU64,
    dropped: AtomicU64,
}

impl Drop for TraceRecorder {
    fn drop(&mut self) {
        self.budget
            .release(MemoryUse::GuestOutput, *self.charged.get_mut());
    }
}

const RANKS_PID: u32 = 1_000_000;

fn us(ps: Ps) -> f64 {
    ps as f64 / 1e6
}

impl TraceRecorder {
    pub fn new(budget: Arc<MemoryBudget>) -> Self {
        TraceRecorder {
            spans: Mutex::new(Vec::new()),
            budget,
            charged: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    pub fn record(&self, track: Track, name: impl Into<String>, start: Ps, end: Ps) {
        let name = name.into();
        // The span, and its JSON event when the trace is written.
        let cost = 4 * (std::mem::size_of::<Span>() + name.len()) as u64 + 256;
        if self
            .budget
            .charge(MemoryUse::GuestOutput, cost, "the --trace recorder")
            .is_err()
        {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.charged.fetch_add(cost, Ordering::Relaxed);
        self.spans.lock().push(Span {
            track,
            name,
            start,
            end,
        });
    }

    /// Spans not recorded because the memory budget was spent.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Chrome trace-event JSON (timestamps in µs).
    pub fn to_chrome_json(&self, topo: &Topology) -> Value {
        let spans = self.spans.lock();
        // (pid, process name) and (pid, tid) -> thread name, in a stable order.
        let mut tracks: BTreeMap<Track, (u32, u32, String)> = BTreeMap::new();
        for s in spans.iter() {
            let n = tracks.len() as u32;
            tracks.entry(s.track).or_insert_with(|| match s.track {
                Track::Kernel(pe, c) => (pe.sip, n, format!("{pe} kernel{}", c.track_suffix())),
                Track::Dma(pe) => (pe.sip, n, format!("{pe} DMA")),
                Track::Math(pe) => (pe.sip, n, format!("{pe} MATH")),
                Track::Gemm(pe) => (pe.sip, n, format!("{pe} GEMM")),
                Track::Link(id) => {
                    let l = &topo.links[id as usize];
                    let (from, to) = topo.ends(l);
                    (
                        from.sip(),
                        n,
                        format!("link {from} -> {to} ({})", l.kind.name()),
                    )
                }
                Track::Rank(r, c) => (RANKS_PID, n, format!("rank {r}{}", c.track_suffix())),
            });
        }
        let mut events = Vec::with_capacity(spans.len() + 2 * tracks.len());
        let mut pids: BTreeMap<u32, String> = BTreeMap::new();
        for (pid, tid, name) in tracks.values() {
            pids.entry(*pid).or_insert_with(|| {
                if *pid == RANKS_PID {
                    "ranks".into()
                } else {
                    crate::topology::naming::sip_name(*pid)
                }
            });
            events.push(json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}));
            events.push(json!({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}}));
        }
        for (pid, name) in &pids {
            events.push(json!({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": name}}));
        }
        for s in spans.iter() {
            let (pid, tid, _) = &tracks[&s.track];
            events.push(json!({
                "name": s.name, "ph": "X", "pid": pid, "tid": tid,
                "ts": us(s.start), "dur": us(s.end - s.start),
                "args": {"start_ps": s.start, "end_ps": s.end},
            }));
        }
        json!({"traceEvents": events, "displayTimeUnit": "ns", "otherData": {
            "time_unit": "us, from picoseconds",
            "dropped_spans": self.dropped(),
        }})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_over_the_budget_are_counted_and_dropped() {
        let budget = Arc::new(MemoryBudget::new(4096));
        let t = TraceRecorder::new(budget.clone());
        for i in 0..100 {
            t.record(Track::Rank(0, CommId::WORLD), format!("span {i}"), i, i + 1);
        }
        let kept = t.spans.lock().len() as u64;
        assert!(kept > 0 && kept < 100, "{kept}");
        assert_eq!(kept + t.dropped(), 100);
        drop(t);
        assert_eq!(budget.in_use(), 0);
    }
}
