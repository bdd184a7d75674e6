//! The machine: owns the memory store, link occupancy, per-PE engines and
//! IPCQ ports, and issues commands on them in simulated time. The IPCQ
//! commands (`send`, `recv`) are in [`messaging`], installing the tables
//! in [`ipcq_install`], blocked PEs' reports in [`blocked_report`], the
//! MATH and GEMM commands in [`compute`]. A machine may be split into
//! [`partition`]s of consecutive SIPs, each with its own link calendars,
//! command tables and counters, to run on threads of their own.
//!
//! A PE *issues* commands and its engines *execute* them (DESIGN §3):
//! `load`, `store`, `binary`, `scale` return a tensor at once; each command
//! is a record on its engine's in-order queue that starts when the engine
//! is free and its input tensors are ready, and applies its data effect
//! when it completes. The engines are served by engine calls rather than
//! a task per command ([`engine_calls`]); each keeps the in-order
//! discipline of [`in_order`] and owns its timing ([`dma_engine`],
//! [`compute_unit`]). Timing (DESIGN §4):
//! * DMA: engine busy for `dma.setup_ns`, then the transfer crosses the
//!   routed path (see [`super::link`]); the bytes are read from the source
//!   as the transfer starts and land at its end.
//! * MATH: engine busy for `math.overhead_ns + n / throughput`.

mod blocked_report;
mod compute;
mod compute_unit;
mod crossings;
mod dma_engine;
mod engine_calls;
mod in_order;
mod ipcq_install;
mod lanes;
mod messaging;
mod partition;

use crate::address::{self, Space};
use crate::budget::MemoryBudget;
use crate::engine::lock::{Mutex, MutexGuard, OneThread};
use crate::engine::{self, Event};
use crate::error::HwError;
use crate::hw::alloc::RangeAlloc;
use crate::hw::blocked::Blocked;
use crate::hw::data_plane::DataPlane;
use crate::hw::dtype::Dtype;
use crate::hw::ipcq::IpcqPort;
pub use crate::hw::ipcq::{CommId, IpcqSettings};
use crate::hw::memory::MemoryStore;
use crate::hw::oplog::{Actor, Completed, IssueMarks, OpLog, OpParams};
use crate::hw::routes::RecentRoutes;
use crate::hw::tensor::Hold;
pub use crate::hw::tensor::{check_same_operands, Operands, Shape, TensorInner, TensorRef};
use crate::hw::trace::TraceRecorder;
use crate::hw::vmap::{PlacedTensor, VirtualMap};
use crate::placement::ShardSpec;
use crate::routing::{PathRouter, RouteError};
use crate::topology::{PeCoord, Topology};
use crate::units::{ns_to_ps, Ps, Rate};
use rustc_hash::FxHashMap;
use smallvec::smallvec;
use std::future::Future;
use std::sync::{Arc, OnceLock};

/// Commands one actor (a PE's kernels of one communicator, see
/// [`Issuer`]) may have in flight (issued, not completed): a hardware
/// command queue's depth, which bounds the host memory a kernel issuing
/// in a loop can take.
pub const COMMAND_QUEUE_DEPTH: usize = 4096;

/// Who issues a command: the kernel running on a PE for one communicator
/// (a collective's kernels run in their group's; `torch.launch`'s in
/// [`CommId::LAUNCH`]). A PE may run one kernel per communicator at once
/// (a group's calls are serialised by its stream, a rank's launches by
/// its compute stream), so the pair names a running kernel: its
/// commands in flight ([`Machine::take_outstanding`]), its op-log actor
/// and its trace track. The engines it issues to are the PE's, shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Issuer {
    pub pe: PeCoord,
    pub comm: CommId,
}

impl From<PeCoord> for Issuer {
    /// The default group's kernel on `pe`.
    #[inline(always)]
    fn from(pe: PeCoord) -> Issuer {
        Issuer {
            pe,
            comm: CommId::WORLD,
        }
    }
}

impl From<(PeCoord, CommId)> for Issuer {
    #[inline(always)]
    fn from((pe, comm): (PeCoord, CommId)) -> Issuer {
        Issuer { pe, comm }
    }
}

/// Per-PE state.
///
/// Laid out by hand, hottest first, on cache-line boundaries: at a
/// thousand ranks a PE's state is out of cache by the time its next ring
/// step comes (every other rank's step ran in between), so each line a
/// step touches is a miss. A ring step (send, recv, add) touches the
/// fields down to `routes`' first entry, eight lines (eleven before this
/// order: 84.9 -> 81.6 misses of a 1 MiB L2 a step, 256 ranks); the
/// matrix unit's queue, used by GEMM kernels only, comes last.
///
/// Every field but the IPCQ port is the engine thread's alone
/// ([`OneThread`]: no locked instruction to take it); the kernel-recording
/// helper thread reads the port (a send's and a receive's checks).
#[repr(C, align(64))]
struct PeState {
    /// The DMA engine (see [`dma_engine`]).
    dma: OneThread<dma_engine::DmaEngine>,
    /// The MATH unit (see [`compute_unit`]).
    math: OneThread<compute_unit::ComputeUnit>,
    /// The default group's kernel's commands in flight, in issue order
    /// (other actors' are in their [`lanes::Lane`]).
    outstanding: OneThread<std::collections::VecDeque<Event>>,
    blocked_on: OneThread<Option<Blocked>>,
    /// The direction it last sent on and its entry's target (a kernel's
    /// sends share one `Dir` per direction; an installed entry never
    /// changes): a send finds where it goes without the port's map of
    /// names or the entry.
    last_tx: OneThread<Option<(super::blocked::Dir, crate::hw::ipcq::SendTarget)>>,
    /// The allocator of its TCM (scratch); other spaces' are in
    /// `Machine::blocks`.
    scratch: OnceLock<Arc<OneThread<RangeAlloc>>>,
    ipcq: Mutex<Option<IpcqPort>>,
    /// Per receive direction (`None`: round-robin), the event set when the
    /// last `recv_async` issued on it has its message (a receive the
    /// kernel waits for leaves none): receives and `recv_async` futures
    /// on one direction claim in issue order. A PE receives on a handful
    /// of directions: a short list, searched by pointer first (a kernel's
    /// calls share one `Dir` per direction), with room for two in place
    /// (a ring's one or two; a mesh's four spill to the heap).
    claims: OneThread<smallvec::SmallVec<[Claim; 2]>>,
    routes: OneThread<RecentRoutes>,
    /// The matrix unit (`tl.gemm`), queued as the MATH unit is; GEMM
    /// kernels only, so last.
    gemm: OneThread<compute_unit::ComputeUnit>,
    /// Its IPCQ state in the communicators other than the default one
    /// (whose state is the fields above: `ipcq`, `last_tx`, `claims`,
    /// `blocked_on`); see [`lanes`].
    lanes: lanes::Lanes,
}

/// A receive direction (`None`: round-robin) and the event of the last
/// receive that claims on it and that later receives must wait for (`None`:
/// none; see `Machine::claim_turn`).
type Claim = (Option<super::blocked::Dir>, Option<Event>);

/// What a DMA command is for: it names the command in traces and faults,
/// and its op in the log. One byte in the command's task.
#[derive(Clone, Copy)]
enum DmaKind {
    Load,
    Store,
    Send,
    Copy,
    RecvCopy,
}

impl DmaKind {
    fn name(self) -> &'static str {
        match self {
            DmaKind::Load => "load",
            DmaKind::Store => "store",
            DmaKind::Send => "send",
            DmaKind::Copy => "copy",
            DmaKind::RecvCopy => "recv copy",
        }
    }

    /// The op log's name (seed ADR-0052).
    fn log_name(self) -> &'static str {
        match self {
            DmaKind::Load => "dma_read",
            DmaKind::Send => "ipcq_copy",
            DmaKind::Store | DmaKind::Copy | DmaKind::RecvCopy => "dma_write",
        }
    }
}

/// Timing parameters of the PE engines.
#[derive(Debug, Clone, Copy)]
pub struct EngineTiming {
    pub dma_setup: Ps,
    pub math_overhead: Ps,
    pub math_rate: Rate,
    pub gemm_overhead: Ps,
    /// FLOP/s of the matrix unit by input dtype, at [`Dtype::ALL`]'s
    /// index.
    pub gemm_rates: [Rate; Dtype::ALL.len()],
    /// The largest (m, n, k) of one GEMM command.
    pub gemm_max: (u32, u32, u32),
    /// Rate of a copy that stays inside one PE's TCM.
    pub local_rate: Rate,
}

/// One copy of [`Machine::host_copies`]: `nbytes` from `src` to `dst`
/// (space, offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostCopy {
    pub src: (Space, u64),
    pub dst: (Space, u64),
    pub nbytes: u64,
}

/// Counters for reports and benchmarks.
#[derive(Debug, Default, Clone, Copy)]
pub struct MachineStats {
    pub dma_commands: u64,
    pub math_commands: u64,
    pub gemm_commands: u64,
    pub bytes_moved: u64,
}

/// The simulated machine.
///
/// What its commands change (link calendars, command tables, allocators,
/// counters, each PE's engines) is the engine thread's alone
/// ([`OneThread`]); what the kernel-recording helper thread reads as well
/// (the address map, the IPCQ ports) and the fault and logs are behind a
/// [`Mutex`]. Memory is the [`DataPlane`]'s: written in the engine's
/// order, by the engine thread or by a thread of its own.
pub struct Machine {
    pub topo: Arc<Topology>,
    pub router: Arc<PathRouter>,
    /// The engines' figures of every SIP without an override.
    pub timing: EngineTiming,
    /// Per SIP, when topology.yaml overrides some (`overrides.sips`).
    sip_timing: Option<Box<[EngineTiming]>>,
    /// The memory store and the order of the commands' reads and writes
    /// (see [`DataPlane`]).
    data: DataPlane,
    /// The link calendars, command tables, counters and engine handler,
    /// by partition (see [`partition`]).
    parts: partition::Partitions,
    /// Per-PE state, indexed densely by PE (created on first use).
    pes: Box<[OnceLock<Box<PeState>>]>,
    /// The allocators of every space but the TCMs (those are per PE).
    /// Behind a [`Mutex`]: the partitions of a split machine may each
    /// allocate (each space's allocator is then its partition's).
    blocks: Mutex<FxHashMap<Space, Arc<OneThread<RangeAlloc>>>>,
    /// Virtual ranges of placed tensors, per SIP.
    vmap: Arc<Mutex<VirtualMap>>,
    /// IPCQ receive rings per space: (rings, bytes), to explain a full
    /// memory.
    ipcq_held: Mutex<FxHashMap<Space, (u32, u64)>>,
    /// Calls of [`Machine::extend_ipcq`] that added directions (see
    /// [`Machine::layout_version`]).
    ipcq_changes: std::sync::atomic::AtomicU64,
    /// IPCQ rings installed so far: the next ring's number
    /// ([`crate::hw::ipcq::RxQueue::ring`]).
    ipcq_rings: std::sync::atomic::AtomicU64,
    /// The rings of each communicator (see [`Machine::afford_ipcq`]).
    ipcq_rings_of: Mutex<std::collections::BTreeMap<CommId, u64>>,
    /// Host bytes the installed rings are charged to the budget for
    /// ([`crate::budget::MemoryUse::IpcqRings`]), given back on drop.
    ipcq_charged: std::sync::atomic::AtomicU64,
    /// The first error an engine hit while executing a command (time or
    /// memory budget overflow) and its time; the run stops with it.
    fault: Mutex<Option<(Ps, String)>>,
    /// Why a run of a split machine is not the one-partition run, if it
    /// is not (see [`crossings`]).
    diverged: Mutex<Option<String>>,
    /// Busy intervals for `--trace` (None: tracing off).
    pub trace: Option<TraceRecorder>,
    /// Where the CCL trace goes (`--ccl-trace`; unset: off).
    ccl_log: OnceLock<CclLog>,
    /// The op log (`--oplog`, `--verify-data`; unset: off, and free).
    oplog: OnceLock<Mutex<OpLog>>,
    budget: Arc<MemoryBudget>,
}

/// The default machine and its first PE (for unit tests).
#[cfg(test)]
pub(crate) fn test_machine() -> (Arc<Machine>, PeCoord) {
    let spec = crate::config::TopologySpec::default_embedded();
    let m = Machine::new(Arc::new(crate::topology::build(&spec).unwrap()));
    let pe = PeCoord {
        sip: 0,
        cube: 0,
        pe: 0,
    };
    (m, pe)
}

/// A 3-SIP ring with its IPCQ installed (TCM buffers, 4 slots of 1 MiB)
/// and its middle PE (for unit tests).
#[cfg(test)]
pub(crate) fn test_ring_machine() -> (Arc<Machine>, PeCoord) {
    use crate::config::ccl::{BufferKind, NeighbourTopology};
    let mut spec = crate::config::TopologySpec::default_embedded();
    spec.system.sips.count = 3;
    let machine = Machine::new(Arc::new(crate::topology::build(&spec).unwrap()));
    let pes = PeCoord::first_of_sips(3);
    let tables = crate::ccl::tables::builtin(NeighbourTopology::Ring1d, &pes, (3, 1)).unwrap();
    machine
        .install_ipcq(
            CommId::WORLD,
            &tables,
            IpcqSettings::new(BufferKind::Tcm, 4, 1 << 20),
        )
        .unwrap();
    (machine, pes[1])
}

/// A sink for the lines of the CCL trace.
pub type CclLog = Arc<dyn Fn(String) + Send + Sync>;

impl Drop for Machine {
    fn drop(&mut self) {
        self.budget.release(
            crate::budget::MemoryUse::IpcqRings,
            *self.ipcq_charged.get_mut(),
        );
    }
}

impl From<RouteError> for HwError {
    fn from(e: RouteError) -> Self {
        match e {
            RouteError::Address(h) => h,
            other => HwError::Mismatch {
                what: format!("routing: {other}"),
            },
        }
    }
}

impl Machine {
    /// Send every IPCQ send and receive to `log` as a line of the seed's
    /// CCL trace: `[ccl t=<ns> send] <pe> dir=<d> nbytes=<n> seq=<k>` (a
    /// receive names the message's sender and seq).
    pub fn set_ccl_log(&self, log: CclLog) {
        let _ = self.ccl_log.set(log);
    }

    /// Emit a CCL trace line (built only when the trace is on).
    pub(super) fn ccl_trace(&self, line: impl FnOnce() -> String) {
        if let Some(log) = self.ccl_log.get() {
            let t = engine::now() as f64 / 1000.0;
            log(format!("[ccl t={t:.1} {}", line()));
        }
    }

    /// Record every completed command in the op log from now on (its
    /// memory charged to the run's budget).
    pub fn record_ops(&self) {
        let _ = self
            .oplog
            .set(Mutex::new(OpLog::new(Some(self.budget.clone()))));
    }

    /// The op log so far (`None`: not recording).
    pub fn oplog(&self) -> Option<MutexGuard<'_, OpLog>> {
        self.oplog.get().map(|l| l.lock())
    }

    /// The op log recorded so far, leaving an empty one.
    pub fn take_oplog(&self) -> Option<OpLog> {
        self.oplog.get().map(|l| {
            let mut log = std::mem::take(&mut *l.lock());
            log.finish();
            log
        })
    }

    /// Log a completed command when recording.
    pub(super) fn log_op(&self, op: impl FnOnce() -> Completed) {
        if let Some(log) = self.oplog.get() {
            log.lock().record(op());
        }
    }

    /// Run `f` on the op log when recording.
    fn with_oplog<R>(&self, f: impl FnOnce(&mut OpLog) -> R) -> Option<R> {
        self.oplog.get().map(|l| f(&mut l.lock()))
    }

    /// What the op log needs of a command `pe` issues now, `None` when
    /// not recording: boxed, so that a command's task carries one pointer
    /// for it (tasks are read at each poll; the log is off on the hot path).
    /// `dma`: the completion event of a DMA command (its engine's order).
    /// A command issued before the log began is not logged when it
    /// completes (the log starts before a run's first command).
    #[inline]
    pub(super) fn issue_marks(&self, at: Issuer, dma: Option<&Event>) -> Option<Box<IssueMarks>> {
        self.with_oplog(|l| {
            Box::new(IssueMarks {
                comm: at.comm,
                after: l.frontier(Actor::Pe(at.pe, at.comm)),
                queue_prev: dma.and_then(|done| l.dma_issued(at.pe, done)),
            })
        })
    }

    /// `at`'s kernel resumed after waiting for `events` (a sync record).
    pub(super) fn observe(
        &self,
        at: impl Into<Issuer>,
        what: &'static str,
        events: &[Event],
        ops: &[u64],
    ) {
        let at: Issuer = at.into();
        self.with_oplog(|l| l.observe(Actor::Pe(at.pe, at.comm), what, engine::now(), events, ops));
    }

    /// A kernel starts on `at` (op log: after what the host has done).
    pub fn note_kernel_start(&self, at: impl Into<Issuer>) {
        let at: Issuer = at.into();
        self.with_oplog(|l| l.kernel_start((at.pe, at.comm), engine::now()));
    }

    /// The kernel on `at` ended, every command it issued complete.
    pub fn note_kernel_end(&self, at: impl Into<Issuer>) {
        let at: Issuer = at.into();
        self.with_oplog(|l| l.kernel_end((at.pe, at.comm), engine::now()));
    }

    /// The engines' figures of SIP `sip` (its overrides applied).
    #[inline(always)]
    pub fn timing_of(&self, sip: u32) -> &EngineTiming {
        match &self.sip_timing {
            None => &self.timing,
            Some(t) => &t[sip as usize],
        }
    }

    /// The host resumes after the kernels of communicator `comm` on `pes`
    /// ended.
    pub fn note_host_sync(&self, comm: CommId, pes: &[PeCoord]) {
        self.with_oplog(|l| l.host_sync(comm, pes, engine::now()));
    }

    pub fn new(topo: Arc<Topology>) -> Arc<Self> {
        Self::with_options(topo, false, Arc::new(MemoryBudget::unlimited()))
    }

    /// A machine that records a trace of every engine and link when
    /// `trace` is set, and charges its memory pages to `budget`.
    pub fn with_options(topo: Arc<Topology>, trace: bool, budget: Arc<MemoryBudget>) -> Arc<Self> {
        Self::with_partitions(topo, trace, budget, 1)
    }

    /// A machine as [`Machine::with_options`] makes it, its SIPs split
    /// into `parts` partitions of consecutive SIPs (see [`partition`]),
    /// to run in a windowed run with partition `p`'s commands on the
    /// executor of its partition `p`.
    pub fn with_partitions(
        topo: Arc<Topology>,
        trace: bool,
        budget: Arc<MemoryBudget>,
        parts: usize,
    ) -> Arc<Self> {
        let spec = &topo.spec;
        let pe_count = spec.system.sips.count as usize
            * spec.cubes_per_sip() as usize
            * spec.pes_per_cube() as usize;
        let timing = EngineTiming {
            dma_setup: ns_to_ps(spec.pe.dma.setup_ns),
            math_overhead: ns_to_ps(spec.pe.math.overhead_ns),
            math_rate: Rate::from_giga_per_s(spec.pe.math.throughput_gflops),
            gemm_overhead: ns_to_ps(spec.pe.gemm.overhead_ns),
            gemm_rates: {
                let r = &spec.pe.gemm.throughput_tflops;
                Dtype::ALL.map(|dt| Rate::from_giga_per_s(r.rate(dt) * 1000.0))
            },
            gemm_max: (spec.pe.gemm.max_m, spec.pe.gemm.max_n, spec.pe.gemm.max_k),
            local_rate: spec.pe.attach.rate(),
        };
        let sip_timing = (!spec.overrides.sips.is_empty()).then(|| {
            (0..spec.n_sips())
                .map(|sip| {
                    let mut t = timing;
                    if let Some(o) = spec.overrides.sip(sip) {
                        if let Some(g) = o.gemm_scale {
                            t.gemm_rates = t
                                .gemm_rates
                                .map(|r| Rate::from_giga_per_s(r.giga_per_s() * g));
                        }
                        if let Some(m) = o.math_throughput_gflops {
                            t.math_rate = Rate::from_giga_per_s(m);
                        }
                    }
                    t
                })
                .collect()
        });
        let memory = MemoryStore::for_machine(
            budget.clone(),
            spec.pe_dims(),
            pe_count as u64,
            spec.pe.tcm_kib << 10,
        );
        let partitions = partition::Partitions::new(&topo, parts);
        Arc::new(Machine {
            router: Arc::new(PathRouter::new(topo.clone())),
            data: DataPlane::new(memory, parts, partitions.sip_map()),
            parts: partitions,
            topo,
            timing,
            sip_timing,
            pes: (0..pe_count).map(|_| OnceLock::new()).collect(),
            blocks: Mutex::default(),
            vmap: Arc::default(),
            ipcq_held: Mutex::default(),
            ipcq_changes: Default::default(),
            ipcq_rings: Default::default(),
            ipcq_rings_of: Default::default(),
            ipcq_charged: Default::default(),
            fault: Mutex::new(None),
            diverged: Mutex::new(None),
            trace: trace.then(|| TraceRecorder::new(budget.clone())),
            ccl_log: OnceLock::new(),
            oplog: OnceLock::new(),
            budget,
        })
    }

    /// Keep no bytes from now on (`--timing-only`): the memory store drops
    /// every write and reads zeros; commands take the same simulated time.
    /// Call before anything is written.
    pub fn keep_no_bytes(&self) {
        self.data.keep_no_bytes();
    }

    /// False once [`Machine::keep_no_bytes`] was called.
    pub fn keeps_bytes(&self) -> bool {
        self.data.keeps_bytes()
    }

    /// Move the commands' reads and writes of memory to a thread of their
    /// own (see [`DataPlane`]). Call before anything is written.
    pub fn move_bytes_on_a_thread(&self) {
        self.data.use_a_thread();
    }

    /// Wait until every command's effect on memory has been applied; one
    /// that failed on the data thread becomes the run's fault.
    pub fn settle_data(&self) {
        if let Some(f) = self.data.settle() {
            let pe = self.pe_at(f.who.pe);
            self.set_fault_at(f.who.at, pe, f.who.what, f.error.into());
        }
    }

    /// The counters of every partition, summed.
    pub fn stats(&self) -> MachineStats {
        self.parts.iter().fold(MachineStats::default(), |a, p| {
            let b = *p.stats.lock();
            MachineStats {
                dma_commands: a.dma_commands + b.dma_commands,
                math_commands: a.math_commands + b.math_commands,
                gemm_commands: a.gemm_commands + b.gemm_commands,
                bytes_moved: a.bytes_moved + b.bytes_moved,
            }
        })
    }

    /// The number of partitions (see [`Machine::with_partitions`]).
    pub fn partitions(&self) -> usize {
        self.parts.count()
    }

    /// The partition of SIP `sip`.
    pub fn partition_of(&self, sip: u32) -> usize {
        self.parts.of_sip(sip)
    }

    /// The engine state of the partition the running executor runs,
    /// which must be `pe`'s: a command of another partition's PE would
    /// book its links and queue its records in the wrong tables. On a
    /// split machine, a command issued outside a windowed run (by the
    /// host, between collectives) gives the split run up (see
    /// [`crossings`]) and fails.
    #[inline]
    fn part_of(&self, pe: PeCoord) -> Result<&partition::Partition, HwError> {
        match self.parts.count() {
            1 => Ok(self.parts.current()),
            _ => self.part_of_split(pe),
        }
    }

    #[cold]
    fn part_of_split(&self, pe: PeCoord) -> Result<&partition::Partition, HwError> {
        let mine = self.parts.of_sip(pe.sip);
        if !engine::lock::is_windows_thread() {
            let why = format!("{pe} issued a command outside the kernels of a collective");
            self.give_up_split(why.clone());
            return Err(HwError::Mismatch {
                what: format!("split run given up: {why}"),
            });
        }
        let running = engine::partition();
        assert_eq!(
            mine, running,
            "{pe} (partition {mine}) issued a command on the executor of partition {running}"
        );
        Ok(self.parts.current())
    }

    /// Record an error an engine hit while executing a command of `pe`.
    /// The command never completes, so whoever waits for it stalls and the
    /// run ends; [`Machine::fault`] then names the cause.
    fn set_fault(&self, pe: PeCoord, what: &str, e: HwError) {
        self.set_fault_at(engine::try_now().unwrap_or(0), pe, what, e);
    }

    /// Record a fault of `pe`'s `what` at simulated time `at`; the
    /// earliest is kept (the first of those at the same time). A write
    /// the data thread could not make is found after the engine went on,
    /// so it may come after a later fault.
    fn set_fault_at(&self, at: Ps, pe: PeCoord, what: &str, e: HwError) {
        let mut f = self.fault.lock();
        if f.as_ref().is_none_or(|(t, _)| at < *t) {
            *f = Some((at, format!("{what} on {pe}: {e}")));
        }
    }

    /// The earliest engine fault of the run, if any, and its time.
    pub fn fault(&self) -> Option<(Ps, String)> {
        self.fault.lock().clone()
    }

    fn allocator(&self, space: Space) -> Arc<OneThread<RangeAlloc>> {
        // A PE's scratch allocator sits with the PE: every MATH result
        // takes one, and the machine-wide map was a lock and a hash
        // lookup (a cache miss at a thousand ranks) per command.
        if let Space::Tcm(pe) = space {
            return self
                .pe(pe)
                .scratch
                .get_or_init(|| {
                    Arc::new(OneThread::new(RangeAlloc::new(space.size(&self.topo.spec))))
                })
                .clone();
        }
        let mut b = self.blocks.lock();
        b.entry(space)
            .or_insert_with(|| {
                Arc::new(OneThread::new(RangeAlloc::new(space.size(&self.topo.spec))))
            })
            .clone()
    }

    /// The state of `pe`, a PE of this machine (every `PeCoord` the
    /// machine is given comes from its topology or a resolved address).
    fn pe(&self, pe: PeCoord) -> &PeState {
        self.pes
            .get(self.pe_index(pe))
            .unwrap_or_else(|| panic!("{pe} is not a PE of this machine"))
            .get_or_init(|| {
                Box::new(PeState {
                    routes: OneThread::default(),
                    dma: OneThread::default(),
                    math: OneThread::default(),
                    gemm: OneThread::default(),
                    ipcq: Mutex::new(None),
                    last_tx: OneThread::new(None),
                    outstanding: OneThread::default(),
                    blocked_on: OneThread::new(None),
                    claims: OneThread::new(Default::default()),
                    scratch: OnceLock::new(),
                    lanes: Mutex::new(Vec::new()),
                })
            })
    }

    /// The PE of state index `index`.
    fn pe_at(&self, index: usize) -> PeCoord {
        PeCoord::from_flat_index(index as u64, self.topo.spec.pe_dims())
    }

    /// The state index of `pe` (what an engine call names it by).
    fn pe_index(&self, pe: PeCoord) -> usize {
        pe.flat_index(self.topo.spec.pe_dims()) as usize
    }

    /// The state of the PE of state index `index`, which has issued a
    /// command (so its state exists).
    fn state_at(&self, index: usize) -> &PeState {
        self.pes[index]
            .get()
            .expect("a PE with a command has state")
    }

    /// Every PE that has state, in `PeCoord` order.
    fn pes(&self) -> impl Iterator<Item = (PeCoord, &PeState)> {
        let dims = self.topo.spec.pe_dims();
        self.pes.iter().enumerate().filter_map(move |(i, st)| {
            st.get()
                .map(|st| (PeCoord::from_flat_index(i as u64, dims), &**st))
        })
    }

    /// Allocate a zero-filled tensor in `space`; the returned tensor frees
    /// its bytes when its last reference drops.
    pub fn alloc_tensor(
        &self,
        space: Space,
        shape: &[u32],
        dtype: Dtype,
    ) -> Result<TensorRef, HwError> {
        self.alloc_block(space, shape, dtype, true, Event::done())
    }

    /// Allocate a tensor in `space`, zero-filled when `zeroed`. Without it
    /// the bytes are whatever a freed tensor left: only for a tensor that
    /// its producing command overwrites whole before anyone may read it
    /// (readers wait for `ready`), which keeps its pages in place instead
    /// of dropping and re-creating them on every ring step.
    fn alloc_block(
        &self,
        space: Space,
        shape: &[u32],
        dtype: Dtype,
        zeroed: bool,
        ready: Event,
    ) -> Result<TensorRef, HwError> {
        let len = dtype.nbytes(shape)?;
        let alloc = self.allocator(space);
        let offset = {
            let mut a = alloc.lock();
            a.alloc(len).ok_or_else(|| HwError::OutOfMemory {
                space: self.describe_full(space),
                len,
                free: a.free_bytes(),
            })?
        };
        let t = TensorInner::build(
            space,
            offset,
            shape,
            dtype,
            ready,
            Hold::Block { alloc, offset, len },
        )?;
        self.with_oplog(|l| l.reuse(space, offset, len, &t.ready));
        // Freshly allocated memory reads as zero (it may hold a freed
        // tensor's bytes); zeroing drops pages, and allocates only to
        // un-share the part of a shared page that the block covers (on a
        // budget refusal the block is freed with `t`).
        if zeroed {
            self.data.zero(space, offset, len)?;
            self.log_host_op(
                "alloc_zero",
                &t.ready,
                OpParams::Zero {
                    dst: (space, offset, len),
                },
            );
        }
        Ok(t)
    }

    /// `space` as a full-memory error names it: with what the IPCQ rings
    /// hold of it, when they hold any.
    fn describe_full(&self, space: Space) -> String {
        match self.ipcq_held.lock().get(&space) {
            Some(&(rings, bytes)) => format!(
                "{space} ({rings} IPCQ receive ring(s) hold {} of it: move them with the algorithm's \
                 buffer_kind or shrink n_slots / slot_kib in ccl.yaml)",
                crate::budget::human_bytes(bytes)
            ),
            None => space.to_string(),
        }
    }

    fn scratch(&self, pe: PeCoord, shape: &[u32], dtype: Dtype) -> Result<TensorRef, HwError> {
        // Its producer (a load or a MATH command) writes every byte, and
        // the tensor is not ready until that producer completes.
        self.alloc_block(Space::Tcm(pe), shape, dtype, false, Event::new())
    }

    /// A view of existing memory at `addr` (no ownership): a physical
    /// address, or a virtual one translated through the address map.
    pub fn view(&self, addr: u64, shape: &[u32], dtype: Dtype) -> Result<TensorRef, HwError> {
        let len = dtype.nbytes(shape)?;
        let (space, offset) = self.translate(addr, len)?;
        TensorInner::build(space, offset, shape, dtype, Event::done(), Hold::None)
    }

    /// The version of what a kernel's calls are checked against before
    /// they run: SIP `sip`'s address map and the IPCQ tables. Equal
    /// versions, equal answers to every such check of calls that address
    /// no other SIP's virtual memory.
    pub fn layout_version(&self, sip: u32) -> (u64, u64) {
        (
            self.vmap.lock().changes(sip),
            self.ipcq_changes.load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// The physical `(space, offset)` of `[addr, addr + len)`.
    pub fn translate(&self, addr: u64, len: u64) -> Result<(Space, u64), HwError> {
        if address::as_virtual(addr).is_some() {
            self.vmap.lock().translate(addr, len)
        } else {
            address::resolve(&self.topo.spec, addr, len)
        }
    }

    /// Allocate a zero-filled tensor placed as `specs` say (each shard a
    /// block in its cube's HBM, all on one SIP) and map it as one virtual
    /// range; `tensor` names it in address errors.
    pub fn place_tensor(
        &self,
        specs: Vec<ShardSpec>,
        dtype: Dtype,
        tensor: &str,
    ) -> Result<PlacedTensor, HwError> {
        let sip = specs.first().map_or(0, |s| s.sip);
        let blocks = specs
            .iter()
            .map(|s| {
                let shape = [s.rows.len() as u32, s.cols.len() as u32];
                self.alloc_tensor(Space::Hbm { sip, cube: s.cube }, &shape, dtype)
            })
            .collect::<Result<Vec<_>, _>>()?;
        PlacedTensor::map(self.vmap.clone(), sip, specs, blocks, tensor)
    }

    /// Host-side (zero simulated time) write, e.g. a bench's `copy_`.
    pub fn host_write(&self, space: Space, offset: u64, data: &[u8]) -> Result<(), HwError> {
        self.data.write(space, offset, data)?;
        if self.oplog.get().is_some() {
            let params = OpParams::HostWrite {
                dst: (space, offset, data.len() as u64),
                data: Arc::from(data),
            };
            self.log_host_op("host_write", &Event::done(), params);
        }
        Ok(())
    }

    /// Log a zero-time op of the host (after the host's frontier).
    fn log_host_op(&self, op: &'static str, produces: &Event, params: OpParams) {
        self.with_oplog(|log| {
            let now = engine::try_now().unwrap_or(0);
            log.record(Completed {
                op,
                pe: None,
                comm: CommId::WORLD,
                unit: None,
                span: (now, now),
                after: log.frontier(Actor::Host),
                queue_prev: None,
                inputs: Vec::new(),
                produces: Some(produces.clone()),
                params,
            })
        });
    }

    /// Digest of the whole memory store (see [`MemoryStore::digest`]).
    pub fn memory_digest(&self) -> String {
        self.settle_data();
        self.data.digest()
    }

    /// Host-side (zero simulated time) read.
    pub fn host_read(&self, space: Space, offset: u64, len: u64) -> Vec<u8> {
        self.data.read(space, offset, len)
    }

    /// Wait (in simulated time) until `at` has fewer than
    /// [`COMMAND_QUEUE_DEPTH`] commands in flight, as a hardware command
    /// queue of that depth would make its kernel wait. Bounds the host
    /// memory a kernel issuing commands in a loop can take.
    pub async fn queue_room(&self, at: impl Into<Issuer>) {
        let Issuer { pe, comm } = at.into();
        let st = self.pe(pe);
        let lane = st.lane(comm);
        loop {
            let oldest = {
                let mut o = lane.outstanding().lock();
                if o.len() < COMMAND_QUEUE_DEPTH {
                    return;
                }
                o.retain(|e| !e.is_set());
                if o.len() < COMMAND_QUEUE_DEPTH {
                    return;
                }
                o[0].clone()
            };
            self.set_blocked(pe, comm, Some(Blocked::CommandQueueFull));
            oldest.wait().await;
            self.set_blocked(pe, comm, None);
            self.observe((pe, comm), "wait", std::slice::from_ref(&oldest), &[]);
        }
    }

    /// `comm`'s kernel on PE `st` issued a command that sets `done`.
    #[inline(always)]
    fn track(&self, st: &PeState, comm: CommId, done: &Event) {
        if comm == CommId::WORLD {
            Self::track_in(&st.outstanding, done);
        } else {
            Self::track_in(st.lane(comm).outstanding(), done);
        }
    }

    #[inline(always)]
    fn track_in(outstanding: &OneThread<std::collections::VecDeque<Event>>, done: &Event) {
        let mut o = outstanding.lock();
        // Forget finished commands, so a long kernel holds only what is
        // still in flight: those at the front (most finish in issue order,
        // and the front was issued a command or two ago, still in cache),
        // and now and then all of them (amortised O(1); a scan touches
        // every event, long out of cache when a thousand PEs take turns).
        while o.front().is_some_and(Event::is_set) {
            o.pop_front();
        }
        if o.len() >= 64 && o.len().is_power_of_two() {
            o.retain(|e| !e.is_set());
        }
        o.push_back(done.clone());
    }

    /// Completion events of every command `at` issued since the last call
    /// and not seen finished yet, in issue order.
    pub fn take_outstanding(&self, at: impl Into<Issuer>) -> Vec<Event> {
        let Issuer { pe, comm } = at.into();
        std::mem::take(&mut *self.pe(pe).lane(comm).outstanding().lock()).into()
    }

    /// Copies (`src`, `dst`, bytes) that the host asks `pe`'s DMA engine
    /// for outside any kernel (the point-to-point transport of `send` /
    /// `recv`, the staging copies of the list forms of `all_gather` /
    /// `reduce_scatter`). Timed as any DMA (setup, then the routed path;
    /// they queue on the engine in order); the op log sees them as one
    /// kernel on `pe`. Resolves when every byte has landed.
    pub fn host_copies(
        self: &Arc<Self>,
        at: impl Into<Issuer>,
        copies: Vec<HostCopy>,
    ) -> impl Future<Output = Result<(), HwError>> + Send + 'static {
        let m = self.clone();
        let at: Issuer = at.into();
        async move {
            m.note_kernel_start(at);
            let mut done = Vec::with_capacity(copies.len());
            for c in copies {
                let d = Event::new();
                m.dma(
                    DmaKind::Copy,
                    at,
                    c.src,
                    c.dst,
                    c.nbytes,
                    Operands::new(),
                    d.clone(),
                )?;
                done.push(d);
            }
            for d in done {
                d.wait().await;
            }
            m.note_kernel_end(at);
            Ok(())
        }
    }

    /// `tl.load`: DMA `shape`/`dtype` elements at `addr` into TCM scratch.
    pub fn load(
        self: &Arc<Self>,
        at: impl Into<Issuer>,
        addr: u64,
        shape: &[u32],
        dtype: Dtype,
    ) -> Result<TensorRef, HwError> {
        let at: Issuer = at.into();
        let src = self.view(addr, shape, dtype)?;
        let out = self.scratch(at.pe, shape, dtype)?;
        self.dma(
            DmaKind::Load,
            at,
            (src.space, src.offset),
            (out.space, out.offset),
            out.nbytes(),
            Operands::new(),
            out.ready.clone(),
        )?;
        Ok(out)
    }

    /// `tl.store`: DMA `value` to `addr`.
    pub fn store(
        self: &Arc<Self>,
        at: impl Into<Issuer>,
        addr: u64,
        value: &TensorRef,
    ) -> Result<(), HwError> {
        let at: Issuer = at.into();
        let dst = self.view(addr, &value.shape, value.dtype)?;
        self.dma(
            DmaKind::Store,
            at,
            (value.space, value.offset),
            (dst.space, dst.offset),
            value.nbytes(),
            smallvec![value.clone()],
            Event::new(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::PeState;
    use std::mem::{align_of, offset_of};

    /// What a ring step touches of a PE's state stays in its first eight
    /// cache lines (the state starts on a line), the matrix unit's queue
    /// after it: a field added in the middle, or a field that grows, shows
    /// here rather than as a slower step.
    #[test]
    fn a_ring_step_s_state_fits_in_the_first_eight_lines() {
        assert_eq!(align_of::<PeState>(), 64);
        // `routes`' head and first entry (a ring's send route).
        let first_route_end = offset_of!(PeState, routes) + 64;
        assert!(first_route_end <= 8 * 64, "{first_route_end}");
        assert!(offset_of!(PeState, gemm) >= offset_of!(PeState, routes));
    }
}

#[cfg(test)]
mod actor_tests {
    use super::*;
    use crate::engine::{Executor, RunOutcome};

    /// Kernels of two communicators (and `torch.launch`'s) issuing on one
    /// PE at once keep their commands apart: each kernel's end takes and
    /// waits for its own commands only, and in the op log each kernel's
    /// end depends on its own ops, not on the other's.
    #[test]
    fn two_actors_on_one_pe_keep_their_commands_and_op_logs_apart() {
        let (m, pe) = test_machine();
        m.record_ops();
        let actors = [CommId::WORLD, CommId(1), CommId::LAUNCH];
        let ex = Executor::new();
        let outs: Arc<std::sync::Mutex<Vec<(CommId, usize, usize)>>> = Arc::default();
        ex.enter(|| {
            let (m, outs) = (m.clone(), outs.clone());
            engine::spawn_detached(async move {
                let mut made = Vec::new();
                for (i, &comm) in actors.iter().enumerate() {
                    m.note_kernel_start((pe, comm));
                    // Each actor issues i + 1 fills.
                    let mine: Vec<TensorRef> = (0..=i)
                        .map(|_| m.fill((pe, comm), &[64], Dtype::F32, 1.0).unwrap())
                        .collect();
                    made.push((comm, mine));
                }
                for (comm, mine) in made {
                    let taken = m.take_outstanding((pe, comm));
                    let own = taken
                        .iter()
                        .zip(&mine)
                        .filter(|(e, t)| e.identity() == t.ready.identity())
                        .count();
                    for e in &taken {
                        e.wait().await;
                    }
                    m.note_kernel_end((pe, comm));
                    outs.lock().unwrap().push((comm, taken.len(), own));
                }
            });
        });
        assert_eq!(ex.run(), RunOutcome::Finished);
        let outs = outs.lock().unwrap().clone();
        assert_eq!(
            outs,
            vec![
                (CommId::WORLD, 1, 1),
                (CommId(1), 2, 2),
                (CommId::LAUNCH, 3, 3)
            ]
        );
        let log = m.oplog().unwrap();
        let ends: Vec<&crate::hw::oplog::OpRecord> = log
            .records()
            .iter()
            .filter(|r| r.op == "kernel_end")
            .collect();
        assert_eq!(ends.len(), 3);
        let fills: Vec<u64> = log
            .records()
            .iter()
            .filter(|r| !r.is_sync())
            .map(|r| r.id)
            .collect();
        assert_eq!(fills.len(), 6);
        // Ops were issued actor by actor: 1, then 2, then 3 of them; each
        // end depends on its own only.
        let own: Vec<Vec<u64>> = vec![
            fills[0..1].to_vec(),
            fills[1..3].to_vec(),
            fills[3..6].to_vec(),
        ];
        for (end, own) in ends.iter().zip(own) {
            let ops: Vec<u64> = end
                .deps
                .iter()
                .copied()
                .filter(|d| fills.contains(d))
                .collect();
            assert_eq!(ops, own, "{}", end.describe());
        }
    }

    /// A host charge holds the matrix unit for exactly its time, and a
    /// later command there (another actor's) waits for it; the roofline
    /// is the compute bound for a square GEMM and the memory bound for a
    /// thin one.
    #[test]
    fn a_host_charge_holds_the_matrix_unit_and_the_roofline_takes_the_longer_bound() {
        let (m, pe) = test_machine();
        let ex = Executor::new();
        let ends: Arc<std::sync::Mutex<Vec<Ps>>> = Arc::default();
        ex.enter(|| {
            let (m, ends) = (m.clone(), ends.clone());
            engine::spawn_detached(async move {
                let busy = crate::hw::compute_op::ComputeOp::Charge {
                    mnk: None,
                    dtype: Dtype::Bf16,
                };
                let a = m
                    .charge_gemm_unit((pe, CommId::LAUNCH), 1000, busy.clone())
                    .unwrap();
                let b = m.charge_gemm_unit(pe, 500, busy).unwrap();
                a.wait().await;
                ends.lock().unwrap().push(engine::now());
                b.wait().await;
                ends.lock().unwrap().push(engine::now());
            });
        });
        assert_eq!(ex.run(), RunOutcome::Finished);
        assert_eq!(*ends.lock().unwrap(), vec![1000, 1500]);

        let spec = &m.topo.spec;
        let pes = (spec.cubes_per_sip() * spec.pes_per_cube()) as f64;
        let peak = m.gemm_peak_per_s(Dtype::Bf16) * pes;
        let hbm = spec.cube.hbm.bandwidth_gbps
            * 1e9
            * (spec.cube.hbm.stacks * spec.cubes_per_sip()) as f64;
        let overhead = m.timing.gemm_overhead as f64;
        for (mnk, compute_bound) in [((4096, 4096, 4096), true), ((1 << 16, 1, 1 << 12), false)] {
            let (mm, nn, kk) = (mnk.0 as f64, mnk.1 as f64, mnk.2 as f64);
            let t_c = 2.0 * mm * nn * kk / peak * 1e12;
            let t_m = (mm * kk + kk * nn + mm * nn) * 2.0 / hbm * 1e12;
            assert_eq!(t_c > t_m, compute_bound, "{mnk:?}: {t_c} vs {t_m}");
            let got = m.roofline_gemm(0, mnk, Dtype::Bf16).unwrap() as f64;
            let want = overhead + t_c.max(t_m);
            assert!((got - want).abs() <= 2.0, "{mnk:?}: {got} ps, want {want}");
        }
        assert!(m
            .roofline_gemm(0, (u32::MAX, u32::MAX, u32::MAX), Dtype::F64)
            .is_err());
    }
}
