//! The op log (seed ADR-0052, DESIGN §3): every command the machine
//! completes, in completion order, with what it read and wrote and the
//! dependency edges the machine enforced before it ran. It is the input of
//! the second pass (`--verify-data`) and, as JSON lines, of a user's own
//! inspection (`--oplog out.jsonl`).
//!
//! An [`OpRecord`] has the seed's seven fields: `id`, `op` (the seed's
//! `op_name`: `dma_read`, `dma_write`, `ipcq_copy`, `math`,
//! `math_reduction`, `gemm`, `composite_gemm`, `host_write`), `pe`,
//! `start_ps`, `end_ps`, `deps` and `params` (per op: the regions read and
//! written; a compute op's [`ComputeOp`]). Inputs are referenced (space,
//! offset, length), never copied: recording is O(commands). The one
//! exception is `host_write`, whose bytes come from the bench and are kept
//! (shared, not copied again) so that a replay can write them.
//!
//! **Dependencies** (`deps`) are the happens-before edges of the run: an
//! op depends on the ops it had to wait for. They are of four kinds, and a
//! replay in any order that keeps them gives the same bytes unless the
//! kernel has a race:
//! * *data*: the ops that produced its input tensors (a load's result, a
//!   math result, the IPCQ copy that filled a received slot);
//! * *unit order*: on the in-order MATH unit, the op before it;
//! * *program order*: the issuing actor's latest **sync record** (below):
//!   everything its kernel (or the host) had seen complete when it issued
//!   the op;
//!
//! Kept apart as `reuse`: an op that writes scratch or an IPCQ slot that an
//! earlier tensor occupied comes after that tensor's producer and every op
//! that read it (the machine frees the bytes only after them). A replay
//! keeps that order; a race check does not take it for synchronisation
//! beyond those bytes (which bytes a tensor gets depends on when others
//! were freed, i.e. on timing).
//!
//! A **sync record** is an entry with no memory effect that stands for an
//! actor learning that ops completed: a kernel's start (after the host's
//! frontier), a blocking `recv` / `wait` / `send` / full command queue
//! returning, a kernel's end (after all its ops), the host resuming after
//! the kernels it launched. Its `op` says which (`kernel_start`, `wait`,
//! `slot_credit`, `kernel_end`, `host_sync`). Ids are a topological order
//! of `deps`: every dep has a smaller id.
//!
//! A DMA engine's queue order is a weaker edge, kept apart as
//! `queue_prev`: a DMA reads its source when its transfer starts and
//! writes at its end, and leaves the queue after its setup; so the command
//! after it starts after it *read*, but either may *land* first. An op
//! thus has two points, its start (reads) and its end (writes): `deps` go
//! from a dep's end to the op's start, `queue_prev` from the previous
//! command's start to this one's start.

use crate::address::Space;
use crate::budget::{BudgetExceeded, MemoryBudget, MemoryUse};
use crate::engine::Event;
use crate::hw::compute_op::{ComputeOp, Region};
use crate::hw::ipcq::CommId;
use crate::topology::PeCoord;
use crate::units::Ps;
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What an op read and wrote.
#[derive(Debug, Clone)]
pub enum OpParams {
    /// A DMA copy of `src` to `dst` (same length).
    Copy { src: Region, dst: Region },
    /// A compute command: `op` of `inputs` into `out`.
    Compute {
        op: ComputeOp,
        inputs: Vec<Region>,
        out: Region,
    },
    /// Bytes the bench wrote from the host (zero simulated time).
    HostWrite { dst: Region, data: Arc<[u8]> },
    /// A tensor the host allocated, filled with zeros.
    Zero { dst: Region },
    /// A sync record: no memory effect.
    Sync,
}

impl OpParams {
    /// The regions the op reads.
    pub fn reads(&self) -> &[Region] {
        match self {
            OpParams::Copy { src, .. } => std::slice::from_ref(src),
            OpParams::Compute { inputs, .. } => inputs,
            OpParams::HostWrite { .. } | OpParams::Zero { .. } | OpParams::Sync => &[],
        }
    }

    /// The region the op writes, if any.
    pub fn writes(&self) -> Option<Region> {
        match self {
            OpParams::Copy { dst, .. }
            | OpParams::HostWrite { dst, .. }
            | OpParams::Zero { dst } => Some(*dst),
            OpParams::Compute { out, .. } => Some(*out),
            OpParams::Sync => None,
        }
    }
}

/// Who issues ops: the host (benches) or a PE's kernel of one
/// communicator (see [`crate::hw::machine::Issuer`]): kernels of two
/// groups running at once on a PE are two actors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Actor {
    Host,
    Pe(PeCoord, CommId),
}

/// One completed command (or sync record).
#[derive(Debug, Clone)]
pub struct OpRecord {
    pub id: u64,
    pub op: &'static str,
    /// The PE that issued it (`None`: the host).
    pub pe: Option<PeCoord>,
    pub start_ps: Ps,
    pub end_ps: Ps,
    /// Ops that completed before this one could start, by id (ascending).
    pub deps: Vec<u64>,
    /// For a DMA: the command before it on the same in-order DMA engine.
    /// This one started after that one's transfer started, so that one had
    /// read its source before this one wrote (but either may land first).
    pub queue_prev: Option<u64>,
    /// The ops that used the bytes it writes before they were freed and
    /// given to its output (see the module doc).
    pub reuse: Vec<u64>,
    pub params: OpParams,
}

impl OpRecord {
    /// A sync record has no memory effect.
    pub fn is_sync(&self) -> bool {
        matches!(self.params, OpParams::Sync)
    }

    /// How errors and reports name the op: `#12 ipcq_copy by
    /// sip0.cube0.pe1 [3000, 5000] ps`.
    pub fn describe(&self) -> String {
        let by = self.pe.map_or("the host".to_string(), |p| p.to_string());
        let what = match &self.params {
            OpParams::Compute { op, .. } => format!("{} ({})", self.op, op.describe()),
            _ => self.op.to_string(),
        };
        format!(
            "#{} {what} by {by} [{}, {}] ps",
            self.id, self.start_ps, self.end_ps
        )
    }
}

/// An op as the machine reports it when it completes.
pub struct Completed {
    pub op: &'static str,
    pub pe: Option<PeCoord>,
    /// The communicator of the kernel that issued it (with `pe`, its
    /// actor).
    pub comm: CommId,
    /// The in-order unit it ran on (MATH: an edge from the op before it
    /// there), if any.
    pub unit: Option<&'static str>,
    pub span: (Ps, Ps),
    /// The issuing actor's sync record when the op was issued.
    pub after: Option<u64>,
    /// For a DMA: the completion event of the command before it on the
    /// same engine (see [`OpLog::dma_issued`]).
    pub queue_prev: Option<usize>,
    /// The events of its input tensors (an edge from the op that set each).
    pub inputs: Vec<Event>,
    /// The event it sets (its output is ready).
    pub produces: Option<Event>,
    pub params: OpParams,
}

/// What the log knows of a command when it is issued, for its
/// [`Completed`] record.
pub struct IssueMarks {
    /// The issuing kernel's communicator ([`Completed::comm`]).
    pub comm: CommId,
    /// The issuing actor's sync record then ([`Completed::after`]).
    pub after: Option<u64>,
    /// For a DMA, see [`Completed::queue_prev`].
    pub queue_prev: Option<usize>,
}

/// What the log knows of one event (a tensor's readiness).
#[derive(Default)]
struct EventInfo {
    setter: Option<u64>,
    readers: Vec<u64>,
    /// Reuse edges for the op that will set it.
    pending: Vec<u64>,
}

/// The log of one run.
#[derive(Default)]
pub struct OpLog {
    records: Vec<OpRecord>,
    /// Per event identity. The events are kept alive (in `kept`) so that
    /// an identity is never reused within the run.
    events: FxHashMap<usize, EventInfo>,
    kept: Vec<Event>,
    last_on_unit: FxHashMap<(PeCoord, &'static str), u64>,
    /// Each actor's latest sync record.
    frontier: FxHashMap<Actor, u64>,
    /// Per kernel actor, the ops it issued since its kernel started.
    kernel_ops: FxHashMap<(PeCoord, CommId), Vec<u64>>,
    /// Per kernel actor, its last kernel's end record, and the last one
    /// the host's frontier includes.
    kernel_end: FxHashMap<(PeCoord, CommId), u64>,
    host_seen: FxHashMap<(PeCoord, CommId), u64>,
    /// Per space, the tensors (event identities) last placed on each byte
    /// range: `start -> (end, identity)`, disjoint.
    placed: FxHashMap<Space, BTreeMap<u64, (u64, usize)>>,
    /// Per PE, the completion event of its last DMA command issued.
    last_dma: FxHashMap<PeCoord, usize>,
    /// Ops whose `queue_prev` is an event not yet resolved to an op.
    unresolved: Vec<(u64, usize)>,
    /// What the log's records are charged to, and how much.
    budget: Option<Arc<MemoryBudget>>,
    charged: u64,
    /// The charge the budget refused: the log stopped there.
    refused: Option<BudgetExceeded>,
}

impl Drop for OpLog {
    fn drop(&mut self) {
        if let Some(b) = &self.budget {
            b.release(MemoryUse::OpLog, self.charged);
        }
    }
}

impl std::fmt::Debug for OpLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OpLog({} ops)", self.records.len())
    }
}

impl OpLog {
    fn info(&mut self, e: &Event) -> &mut EventInfo {
        let kept = &mut self.kept;
        self.events.entry(e.identity()).or_insert_with(|| {
            kept.push(e.clone());
            EventInfo::default()
        })
    }

    /// A log whose records are charged to `budget` (`None`: unbounded).
    pub fn new(budget: Option<Arc<MemoryBudget>>) -> Self {
        let mut log = OpLog::default();
        log.budget = budget;
        log
    }

    /// The charge the budget refused, if it did: the log is incomplete.
    pub fn refused(&self) -> Option<&BudgetExceeded> {
        self.refused.as_ref()
    }

    fn push(&mut self, mut r: OpRecord) -> u64 {
        r.deps.sort_unstable();
        r.deps.dedup();
        let id = r.id;
        if let (Some(b), None) = (&self.budget, &self.refused) {
            // The record, its edges, what it keeps alive and indexes.
            let kept = match &r.params {
                OpParams::HostWrite { data, .. } => data.len(),
                OpParams::Compute { inputs, .. } => inputs.len() * 24,
                _ => 0,
            };
            let bytes =
                (std::mem::size_of::<OpRecord>() + 8 * (r.deps.len() + r.reuse.len()) + kept + 96)
                    as u64;
            match b.charge(
                MemoryUse::OpLog,
                bytes,
                "the op log (--oplog / --verify-data)",
            ) {
                Ok(()) => self.charged += bytes,
                Err(e) => self.refused = Some(e),
            }
        }
        self.records.push(r);
        id
    }

    fn next_id(&self) -> u64 {
        self.records.len() as u64
    }

    /// Append the completed op `c`; its id.
    pub fn record(&mut self, c: Completed) -> u64 {
        let id = self.next_id();
        let mut deps: Vec<u64> = c.after.into_iter().collect();
        for e in &c.inputs {
            let info = self.info(e);
            deps.extend(info.setter);
            info.readers.push(id);
        }
        if let (Some(pe), Some(unit)) = (c.pe, c.unit) {
            deps.extend(self.last_on_unit.insert((pe, unit), id));
        }
        let mut reuse = Vec::new();
        if let Some(e) = &c.produces {
            let info = self.info(e);
            info.setter = Some(id);
            reuse = std::mem::take(&mut info.pending);
        }
        if let Some(prev) = c.queue_prev {
            self.unresolved.push((id, prev));
        }
        match c.pe {
            Some(pe) => self.kernel_ops.entry((pe, c.comm)).or_default().push(id),
            // The host's ops take no time: it has seen each complete
            // before it goes on.
            None => {
                self.frontier.insert(Actor::Host, id);
            }
        }
        self.push(OpRecord {
            id,
            op: c.op,
            pe: c.pe,
            start_ps: c.span.0,
            end_ps: c.span.1,
            deps,
            queue_prev: None,
            reuse,
            params: c.params,
        })
    }

    /// `pe` issues a DMA command that sets `done`: the completion event of
    /// the one it issued before (its `queue_prev`, resolved by
    /// [`Self::finish`]).
    pub fn dma_issued(&mut self, pe: PeCoord, done: &Event) -> Option<usize> {
        self.info(done);
        self.last_dma.insert(pe, done.identity())
    }

    /// Resolve what only the end of the run knows (a DMA's predecessor on
    /// its engine may complete after it).
    pub fn finish(&mut self) {
        for (id, prev) in std::mem::take(&mut self.unresolved) {
            let setter = self.events.get(&prev).and_then(|i| i.setter);
            self.records[id as usize].queue_prev = setter;
        }
    }

    /// `actor`'s latest sync record (what an op it issues now comes after).
    pub fn frontier(&self, actor: Actor) -> Option<u64> {
        self.frontier.get(&actor).copied()
    }

    /// A sync record: `actor` learnt at `at` that `ops` and the setters of
    /// `events` completed. It becomes the actor's frontier; its id.
    pub fn observe(
        &mut self,
        actor: Actor,
        what: &'static str,
        at: Ps,
        events: &[Event],
        ops: &[u64],
    ) -> u64 {
        let mut deps: Vec<u64> = self.frontier(actor).into_iter().collect();
        deps.extend_from_slice(ops);
        for e in events {
            deps.extend(self.info(e).setter);
        }
        let id = self.push(OpRecord {
            id: self.next_id(),
            op: what,
            pe: match actor {
                Actor::Host => None,
                Actor::Pe(p, _) => Some(p),
            },
            start_ps: at,
            end_ps: at,
            deps,
            queue_prev: None,
            reuse: Vec::new(),
            params: OpParams::Sync,
        });
        self.frontier.insert(actor, id);
        id
    }

    /// A kernel starts on `pe` for communicator `comm`: after the host's
    /// frontier.
    pub fn kernel_start(&mut self, (pe, comm): (PeCoord, CommId), at: Ps) {
        let host: Vec<u64> = self.frontier(Actor::Host).into_iter().collect();
        self.kernel_ops.remove(&(pe, comm));
        self.observe(Actor::Pe(pe, comm), "kernel_start", at, &[], &host);
    }

    /// The kernel of `comm` on `pe` ended: after every op it issued.
    pub fn kernel_end(&mut self, (pe, comm): (PeCoord, CommId), at: Ps) {
        let ops = self.kernel_ops.remove(&(pe, comm)).unwrap_or_default();
        let id = self.observe(Actor::Pe(pe, comm), "kernel_end", at, &[], &ops);
        self.kernel_end.insert((pe, comm), id);
    }

    /// The host resumes after the kernels of `comm` on `pes` ended. Kernel
    /// ends it has already seen are not repeated (each rank of a
    /// collective returns after the same kernels: one record, not one per
    /// rank).
    pub fn host_sync(&mut self, comm: CommId, pes: &[PeCoord], at: Ps) {
        let mut ends = Vec::new();
        for p in pes {
            if let Some(&end) = self.kernel_end.get(&(*p, comm)) {
                if self.host_seen.insert((*p, comm), end) != Some(end) {
                    ends.push(end);
                }
            }
        }
        if !ends.is_empty() {
            self.observe(Actor::Host, "host_sync", at, &[], &ends);
        }
    }

    /// The tensor whose readiness is `fresh` now occupies `len` bytes at
    /// `space`+`offset`: the op that sets `fresh` comes after the producer
    /// and every reader of each tensor that occupied those bytes before.
    /// Those ops, by id.
    pub fn reuse(&mut self, space: Space, offset: u64, len: u64, fresh: &Event) -> Vec<u64> {
        let end = offset + len;
        let map = self.placed.entry(space).or_default();
        let mut hit: Vec<(u64, u64, usize)> = map
            .range(..end)
            .rev()
            .take_while(|(_, &(e, _))| e > offset)
            .map(|(&s, &(e, id))| (s, e, id))
            .collect();
        // An entry that starts before `offset` but reaches past it.
        hit.retain(|&(_, e, _)| e > offset);
        for &(s, e, id) in &hit {
            map.remove(&s);
            if s < offset {
                map.insert(s, (offset, id));
            }
            if e > end {
                map.insert(end, (e, id));
            }
        }
        map.insert(offset, (end, fresh.identity()));
        let mut deps = Vec::new();
        for (_, _, id) in hit {
            if let Some(info) = self.events.get(&id) {
                deps.extend(info.setter);
                deps.extend_from_slice(&info.readers);
            }
        }
        deps.sort_unstable();
        deps.dedup();
        self.info(fresh).pending.extend_from_slice(&deps);
        deps
    }

    pub fn records(&self) -> &[OpRecord] {
        &self.records
    }

    /// The log as JSON lines, one op per line (schema in docs/verification.md).
    pub fn to_jsonl(&self) -> String {
        let mut out = String::new();
        for r in &self.records {
            let line = serde_json::to_string(&JsonOp::from(r)).expect("an op serialises");
            out.push_str(&line);
            out.push('\n');
        }
        out
    }
}

/// A region as JSON: `{"space": "sip0.cube0.hbm", "offset": 64, "len": 16}`.
#[derive(Serialize)]
struct JsonRegion {
    space: String,
    offset: u64,
    len: u64,
}

impl From<&Region> for JsonRegion {
    fn from(r: &Region) -> Self {
        JsonRegion {
            space: r.0.to_string(),
            offset: r.1,
            len: r.2,
        }
    }
}

#[derive(Serialize)]
struct JsonOp {
    id: u64,
    op: &'static str,
    pe: Option<String>,
    start_ps: Ps,
    end_ps: Ps,
    deps: Vec<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    queue_prev: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    reuse: Vec<u64>,
    /// `compute` (a compute op's description), `reads`, `writes`, and for a
    /// host write the FNV-1a hash of its bytes.
    params: JsonParams,
}

#[derive(Serialize)]
struct JsonParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    compute: Option<String>,
    reads: Vec<JsonRegion>,
    #[serde(skip_serializing_if = "Option::is_none")]
    writes: Option<JsonRegion>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data_fnv1a: Option<String>,
}

impl From<&OpRecord> for JsonOp {
    fn from(r: &OpRecord) -> Self {
        let (compute, data_fnv1a) = match &r.params {
            OpParams::Compute { op, .. } => (Some(op.describe()), None),
            OpParams::HostWrite { data, .. } => (None, Some(format!("{:016x}", fnv1a(data)))),
            _ => (None, None),
        };
        JsonOp {
            id: r.id,
            op: r.op,
            pe: r.pe.map(|p| p.to_string()),
            start_ps: r.start_ps,
            end_ps: r.end_ps,
            deps: r.deps.clone(),
            queue_prev: r.queue_prev,
            reuse: r.reuse.clone(),
            params: JsonParams {
                compute,
                reads: r.params.reads().iter().map(JsonRegion::from).collect(),
                writes: r.params.writes().as_ref().map(JsonRegion::from),
                data_fnv1a,
            },
        }
    }
}

/// FNV-1a 64 of `data` (a stable fingerprint for the JSON log).
fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    const W: crate::hw::ipcq::CommId = crate::hw::ipcq::CommId::WORLD;

    const PE: PeCoord = PeCoord {
        sip: 0,
        cube: 0,
        pe: 1,
    };
    const TCM: Space = Space::Tcm(PE);

    fn op(log: &mut OpLog, inputs: &[&Event], out: &Event, at: Ps) -> u64 {
        log.record(Completed {
            op: "math",
            pe: Some(PE),
            comm: W,
            unit: None,
            span: (at, at + 10),
            after: log.frontier(Actor::Pe(PE, W)),
            queue_prev: None,
            inputs: inputs.iter().map(|e| (*e).clone()).collect(),
            produces: Some(out.clone()),
            params: OpParams::Sync,
        })
    }

    /// A tensor placed over bytes that others held comes after their
    /// producers and readers (and only theirs), split ranges included.
    #[test]
    fn reused_bytes_order_the_new_producer_after_the_old_users() {
        let mut log = OpLog::default();
        let (a, b, c, d) = (Event::new(), Event::new(), Event::new(), Event::new());
        assert!(log.reuse(TCM, 0, 64, &a).is_empty());
        assert!(log.reuse(TCM, 64, 64, &b).is_empty());
        let pa = op(&mut log, &[], &a, 0); // 0 produces a
        let pb = op(&mut log, &[], &b, 0); // 1 produces b
        let reader = op(&mut log, &[&a], &Event::new(), 20); // 2 reads a
                                                             // c over the second half of a and the first half of b.
        assert_eq!(log.reuse(TCM, 32, 64, &c), vec![pa, pb, reader]);
        let pc = op(&mut log, &[], &c, 40);
        assert_eq!(log.records()[pc as usize].reuse, vec![pa, pb, reader]);
        assert!(
            log.records()[pc as usize].deps.is_empty(),
            "reuse is not a dep"
        );
        // d over [0, 32): only what is left of a there.
        assert_eq!(log.reuse(TCM, 0, 16, &d), vec![pa, reader]);
        // Elsewhere, nothing.
        assert!(log.reuse(TCM, 4096, 64, &Event::new()).is_empty());
    }

    /// Sync records: an op issued after a wait depends on it; the kernel's
    /// end on every op it issued; the host on the kernel ends.
    #[test]
    fn sync_records_carry_program_order() {
        let mut log = OpLog::default();
        let host = log.record(Completed {
            op: "host_write",
            pe: None,
            comm: W,
            unit: None,
            span: (0, 0),
            after: None,
            queue_prev: None,
            inputs: Vec::new(),
            produces: Some(Event::done()),
            params: OpParams::Sync,
        });
        log.kernel_start((PE, W), 0);
        let start = log.frontier(Actor::Pe(PE, W)).unwrap();
        assert_eq!(log.records()[start as usize].deps, vec![host]);
        let e = Event::new();
        let first = op(&mut log, &[], &e, 0);
        assert_eq!(log.records()[first as usize].deps, vec![start]);
        let w = log.observe(Actor::Pe(PE, W), "wait", 10, std::slice::from_ref(&e), &[]);
        assert_eq!(log.records()[w as usize].deps, vec![start, first]);
        let second = op(&mut log, &[], &Event::new(), 10);
        assert_eq!(log.records()[second as usize].deps, vec![w]);
        log.kernel_end((PE, W), 20);
        let end = log.frontier(Actor::Pe(PE, W)).unwrap();
        assert_eq!(log.records()[end as usize].deps, vec![first, w, second]);
        log.host_sync(W, &[PE], 20);
        let h = log.frontier(Actor::Host).unwrap();
        assert_eq!(log.records()[h as usize].deps, vec![host, end]);
        // Another rank returning after the same kernel adds nothing.
        log.host_sync(W, &[PE], 20);
        assert_eq!(log.frontier(Actor::Host), Some(h));
        assert!(log
            .records()
            .iter()
            .all(|r| r.deps.iter().all(|&d| d < r.id)));
    }
}
