//! Drives one bench run on a fresh executor and machine, and turns a stall
//! into a deadlock report that says who waits for what.

use super::comms::AlphaBeta;
use super::console::Console;
use super::limits::RunLimits;
use super::loader::Loader;
use super::session::{ReportRecord, Session};
use super::split_memo::SplitMemo;
use crate::budget::MemoryBudget;
use crate::config::CclConfig;
use crate::engine::{Executor, RunOutcome};
use crate::error::SimError;
use crate::hw::machine::MachineStats;
use crate::hw::Machine;
use crate::topology::{Topology, View};
use crate::units::{ps_to_us, Ps};
use std::sync::Arc;

/// Called with every row a bench reports, as it is reported (e.g. to
/// drive a progress bar).
pub type RowObserver = Arc<dyn Fn(&ReportRecord) + Send + Sync>;

/// What to run.
#[derive(Clone)]
pub struct RunRequest {
    /// Bench name (built-in / components dir) or path to a .wasm file.
    pub bench: String,
    /// The compiled machine (see [`crate::topology::compile`]).
    pub topology: Arc<Topology>,
    pub ccl: CclConfig,
    /// Overrides ccl.yaml `defaults.algorithm`.
    pub algorithm: Option<String>,
    /// Arguments passed to the bench's `run`.
    pub args: Vec<String>,
    /// Record a Chrome/Perfetto trace of every engine and link.
    pub trace: bool,
    /// Host-memory budget of the run, bytes (simulated memory pages, guest
    /// linear memories and captured output together).
    pub memory_budget: u64,
    /// Host memory already in use that counts against the budget (the
    /// CLI passes the process's resident size; in-process callers 0).
    pub memory_baseline: u64,
    /// Compute [`RunResult::memory_digest`].
    pub memory_digest: bool,
    /// Told of every report row as it arrives.
    pub on_row: Option<RowObserver>,
    /// Where the CCL trace's lines go (`--ccl-trace`; None: off).
    pub ccl_trace: Option<crate::hw::machine::CclLog>,
    /// Record the op log ([`RunResult::oplog`]).
    pub record_ops: bool,
    /// Run the second pass on the op log ([`RunResult::verification`]).
    pub verify_data: Option<crate::verify::Strictness>,
    /// Keep no bytes (`--timing-only`): same simulated times, no data,
    /// results not checked.
    pub timing_only: bool,
    /// Move the bytes on a thread of their own while the engine goes on
    /// (see [`crate::hw::data_plane`]): the same bytes and times. On by
    /// default where the process may use more than one core; a run split
    /// into partitions has none (each partition's thread applies its own
    /// bytes, in batches).
    pub data_thread: bool,
    /// Split the machine into this many partitions, its collectives'
    /// kernels each run by a thread of its own (see [`super::split_run`]);
    /// a split run gives the one-partition run's bytes, times and rows.
    /// `Some(1)`: one executor. `None`: the run chooses
    /// ([`RunRequest::auto_partitions`]) and, if the split gives up, runs
    /// again on one partition. Told a number, a split run that cannot
    /// give the one-partition run's results fails with
    /// [`SimError::SplitGivenUp`], or runs again on one partition with
    /// `split_falls_back`.
    pub partitions: Option<usize>,
    /// A split run that gives up runs again on one partition.
    pub split_falls_back: bool,
}

/// The fewest SIPs of a machine a run that was not told how many
/// partitions to use splits (see [`RunRequest::auto_partitions`]). On two
/// cores the split run was as fast as one executor or faster at every
/// size measured from 64 SIPs on (64 x 16 B the same 0.025 s; 64 x 1 MiB
/// 0.63-0.66 s against 0.83-0.92 s; 1024 x 16 B 0.97 s against 1.41 s);
/// at 16 SIPs it gained nothing, and below that a window holds too little
/// work for a second thread to pay.
pub const AUTO_SPLIT_SIPS: u32 = 64;

impl RunRequest {
    /// The partitions a run not told how many gets, on a machine whose
    /// process may use `cores` cores: two where splitting pays and the
    /// run can be split (more than one core, at least
    /// [`AUTO_SPLIT_SIPS`] SIPs, nothing recorded that one executor
    /// alone records, an inter-SIP latency to run ahead of); else one.
    /// Two, not one per core: more has not been measured.
    pub fn auto_partitions(&self, cores: usize) -> usize {
        let sips = self.topology.spec.n_sips();
        let pays = cores > 1 && sips >= AUTO_SPLIT_SIPS;
        if pays && self.cannot_split().is_none() {
            2
        } else {
            1
        }
    }

    /// `bench` on `topology` with `ccl`, everything else off: the installed
    /// algorithm, no arguments, no trace, op log, second pass or digest,
    /// data kept, the default memory budget (half this machine's memory).
    /// Callers set what they need with struct update syntax
    /// (`RunRequest { trace: true, ..RunRequest::new(..) }`).
    pub fn new(bench: impl Into<String>, topology: Arc<Topology>, ccl: CclConfig) -> RunRequest {
        RunRequest {
            bench: bench.into(),
            topology,
            ccl,
            algorithm: None,
            args: Vec::new(),
            trace: false,
            memory_budget: MemoryBudget::default_limit(),
            memory_baseline: 0,
            memory_digest: false,
            on_row: None,
            ccl_trace: None,
            record_ops: false,
            verify_data: None,
            timing_only: false,
            data_thread: crate::cores::more_than_one_core(),
            partitions: None,
            split_falls_back: false,
        }
    }

    /// Why this run cannot be split, if it cannot: what it records is the
    /// one executor's alone, or no link is slow enough to run ahead of.
    fn cannot_split(&self) -> Option<&'static str> {
        if self.trace || self.record_ops || self.verify_data.is_some() {
            Some("a run that records a trace or an op log runs on one partition")
        } else if self.ccl_trace.is_some() {
            Some("a run that writes the CCL trace runs on one partition")
        } else if self.topology.spec.system.inter_sip_link.latency_ns <= 0.0 {
            Some("partitions need an inter-SIP link latency above zero")
        } else {
            None
        }
    }
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub bench: String,
    pub rows: Vec<ReportRecord>,
    /// The compute table (benches that launch kernels).
    pub kernel_rows: Vec<crate::kernel_report::KernelRow>,
    /// What each rank's time went to (runs that overlap compute and
    /// communication; see [`super::timeline`]).
    pub ranks: Vec<super::timeline::RankRow>,
    /// Header lines the bench asked for (`report.note`).
    pub notes: Vec<String>,
    /// Simulated time at the end of the run.
    pub end_time_ps: Ps,
    pub algorithm: Option<String>,
    /// The algorithm that served each collective the run called
    /// (PyTorch's collective name → ccl.yaml entry).
    pub algorithms: std::collections::BTreeMap<String, String>,
    pub alpha_beta: Option<AlphaBeta>,
    /// Executor polls + timer events.
    pub events: u64,
    pub stats: MachineStats,
    /// SHA-256 of the machine's memory at the end of the run, when asked
    /// for (it reads every written page).
    pub memory_digest: Option<String>,
    /// Every completed command, when asked for (`record_ops`).
    pub oplog: Option<Arc<crate::hw::oplog::OpLog>>,
    /// What the second pass found (`verify_data`).
    pub verification: Option<crate::verify::Verification>,
    /// Chrome trace-event JSON, when requested.
    pub trace: Option<serde_json::Value>,
    /// The most host memory the run's budget held at once, bytes.
    pub memory_peak: u64,
    /// Trace spans dropped for want of memory budget (when tracing).
    pub trace_dropped: Option<u64>,
    /// No bytes were kept: times only, `wrong` counts mean nothing.
    pub timing_only: bool,
    /// The partitions the machine was split into (1: one executor; see
    /// [`RunRequest::partitions`]).
    pub partitions: usize,
    /// Kernel launches that recorded their kernel, and those that replayed
    /// a recording kept from an equal launch (see
    /// [`super::recording_memo`]).
    pub recordings: super::recording_memo::RecordingCounts,
}

/// Run a bench to completion (see [`RunRequest::partitions`]).
pub fn run_bench(loader: &Arc<Loader>, req: RunRequest) -> Result<RunResult, SimError> {
    let now = Console::default();
    let result = run_bench_to(loader, req, &now);
    // The guests' tracebacks the error does not already report.
    now.finish(result.as_ref().err().map(|e| e.to_string()).as_deref());
    result
}

/// [`run_bench`], the guests' output of the run that is kept to `now`.
fn run_bench_to(
    loader: &Arc<Loader>,
    req: RunRequest,
    now: &Console,
) -> Result<RunResult, SimError> {
    let chosen = req.partitions.is_none();
    let memo = chosen.then(|| loader.split_memo()).flatten();
    let (parts, falls_back) = match req.partitions {
        Some(n) => (n, req.split_falls_back),
        None => (choose_partitions(loader, &req, memo.as_ref()), true),
    };
    let now = now.clone();
    if parts <= 1 {
        return run_on(loader, req, 1, now);
    }
    if let Some(why) = req.cannot_split() {
        return Err(SimError::Usage(format!("--partitions: {why}")));
    }
    if !falls_back {
        return run_on(loader, req, parts, now);
    }
    // Rows go to the observer once, and the guests' output to stderr
    // once, from the run that is kept.
    let attempt = RunRequest {
        on_row: None,
        ..req.clone()
    };
    let held = Console::held();
    match run_on(loader, attempt, parts, held.clone()) {
        Ok(result) => {
            held.release();
            if let Some(observer) = &req.on_row {
                result.rows.iter().for_each(|row| observer(row));
            }
            Ok(result)
        }
        Err(SimError::SplitGivenUp(why)) => {
            // A split the run chose: said once, and not tried again for
            // this run (see `split_memo`).
            let remembered = if memo.is_some() {
                " (the next run like this one will not split; --partitions 1 never does)"
            } else {
                ""
            };
            eprintln!(
                "note: the split run was given up ({why}); running on one partition{remembered}"
            );
            if let Some(memo) = &memo {
                memo.remember(&req, &why);
            }
            run_on(loader, req, 1, now)
        }
        // A split the run chose that fails gives the one executor's
        // error: that run's report (a deadlock's waits, a fault's time)
        // is the one the user reads, whatever the split saw.
        Err(e) if chosen => {
            tracing::info!(target: "kernbench::split", "the split run failed ({e}); running on one partition");
            run_on(loader, req, 1, now)
        }
        Err(e) => Err(e),
    }
}

/// The partitions of a run not told how many: one if its kernels run in
/// step (`--in-step-kernels`: the split would give up at the first) or
/// its split gave up before (`memo`), else
/// [`RunRequest::auto_partitions`].
fn choose_partitions(loader: &Loader, req: &RunRequest, memo: Option<&SplitMemo>) -> usize {
    if !loader.records_kernels() {
        return 1;
    }
    match memo.and_then(|m| m.gave_up(req)) {
        Some(why) => {
            tracing::info!(target: "kernbench::split", "not split: this run's split gave up before ({why})");
            1
        }
        None => req.auto_partitions(crate::cores::count()),
    }
}

/// Run a bench on a machine of `parts` partitions, its guests' output
/// to `console`.
fn run_on(
    loader: &Arc<Loader>,
    req: RunRequest,
    parts: usize,
    console: Console,
) -> Result<RunResult, SimError> {
    let topo = req.topology.clone();
    let limits = RunLimits {
        console,
        ..loader.run_limits(req.memory_budget)
    };
    limits.budget.charge(
        crate::budget::MemoryUse::Host,
        req.memory_baseline,
        "at start",
    )?;
    if req.memory_baseline > 0 {
        // The budget covers the whole process (the CLI's runs).
        limits.budget.bound_resident();
    }
    let machine = Machine::with_partitions(topo.clone(), req.trace, limits.budget.clone(), parts);
    if let Some(log) = req.ccl_trace.clone() {
        machine.set_ccl_log(log);
    }
    if req.timing_only {
        if req.verify_data.is_some() {
            return Err(SimError::Usage(
                "--verify-data replays the data a run moved: a --timing-only run moves none".into(),
            ));
        }
        machine.keep_no_bytes();
    } else if req.data_thread && parts == 1 {
        // A split machine's partitions apply their own bytes, in batches
        // (see `hw::data_plane`): no third thread on their cores.
        machine.move_bytes_on_a_thread();
    }
    if req.record_ops || req.verify_data.is_some() {
        machine.record_ops();
    }
    let bench = loader.load_bench(&req.bench)?;
    if req.memory_baseline > 0 {
        // What the host itself took since the baseline (the bench's compiled
        // code) and the device view's routing tables (made below, on
        // another thread, or with the first search) are the host's too,
        // not room for the guests.
        let grown = MemoryBudget::process_resident().saturating_sub(req.memory_baseline);
        let tables = machine.router.table_bytes();
        limits.budget.charge(
            crate::budget::MemoryUse::Host,
            grown + tables,
            "after loading",
        )?;
    }
    // The device view's routing tables are first needed when the benches
    // have all started (the IPCQ install's searches): made meanwhile on
    // the other core.
    let _warming =
        crate::cores::more_than_one_core().then(|| machine.router.warm_in_background(View::Noc));
    let session = Session::new(
        machine.clone(),
        req.ccl,
        loader.clone(),
        bench,
        crate::config::ccl::AlgorithmChoice::parse(req.algorithm.as_deref())
            .map_err(SimError::Usage)?,
        req.args,
        limits.clone(),
    );
    if let Some(observer) = req.on_row {
        session.observe_rows(observer);
    }
    let ex = Executor::new();
    let main = ex.spawn(session.clone().run_main());
    let outcome = ex.run();
    machine.settle_data();
    // Whatever else it ended with, a split run that gave up is run again.
    if let Some(why) = machine.diverged() {
        return Err(SimError::SplitGivenUp(why));
    }
    // An engine fault (time past the clock's horizon, memory over budget)
    // stops the commands it hit; whatever then waited is its consequence.
    if let Some((at, message)) = machine.fault() {
        return Err(SimError::Fault {
            time_us: ps_to_us(at),
            message,
        });
    }
    match outcome {
        RunOutcome::Finished => {
            main.try_take().expect("the bench task finished")?;
        }
        RunOutcome::Stalled { .. } => {
            if let Some(SimError::BenchFailed {
                bench,
                who,
                message,
            }) = session.root_cause()
            {
                return Err(SimError::BenchFailed {
                    bench,
                    who,
                    message: format!("{message}\n(the other ranks then waited for it forever)"),
                });
            }
            let mut report = Vec::new();
            for (pe, what) in machine.blocked_report() {
                report.push(format!("  {pe}: {what}"));
            }
            for line in session.comms.collective_report() {
                report.push(format!("  {line}"));
            }
            let dump = machine.ipcq_dump(ex.now());
            if !dump.is_empty() {
                report.push("  IPCQ rings:".into());
                report.extend(dump.into_iter().map(|l| format!("    {l}")));
            }
            return Err(SimError::Deadlock {
                time_us: ps_to_us(ex.now()),
                report: report.join("\n"),
            });
        }
    }
    let pg = session.comms.process_group().ok();
    let oplog = machine.take_oplog();
    if let Some(e) = oplog.as_ref().and_then(|l| l.refused()) {
        return Err(SimError::Budget(e.clone()));
    }
    let verification = match (&oplog, req.verify_data) {
        (Some(log), Some(strictness)) => Some(crate::verify::verify(
            log,
            |space, offset, len| machine.host_read(space, offset, len),
            limits.budget.clone(),
            strictness,
        )?),
        _ => None,
    };
    Ok(RunResult {
        bench: session.bench.name.clone(),
        rows: session.rows(),
        kernel_rows: session.kernel_rows(),
        ranks: session.timelines.rows(ex.now()),
        notes: session.notes(),
        end_time_ps: ex.now(),
        algorithm: pg.as_ref().map(|p| p.algorithm.clone()),
        algorithms: pg.as_ref().map(|p| p.backend_names()).unwrap_or_default(),
        alpha_beta: session.comms.alpha_beta(),
        events: ex.events_processed()
            + session
                .comms
                .split_events
                .load(std::sync::atomic::Ordering::Relaxed),
        stats: machine.stats(),
        memory_digest: (req.memory_digest && !req.timing_only).then(|| machine.memory_digest()),
        timing_only: req.timing_only,
        oplog: oplog.filter(|_| req.record_ops).map(Arc::new),
        verification,
        trace: machine.trace.as_ref().map(|t| t.to_chrome_json(&topo)),
        memory_peak: limits.budget.peak(),
        trace_dropped: machine.trace.as_ref().map(|t| t.dropped()),
        partitions: parts,
        recordings: session.kernels.counts(),
    })
}
