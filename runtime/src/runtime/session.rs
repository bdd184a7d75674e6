//! One simulation run of a bench: the machine, the bench's instances (the
//! driver and `mp.spawn`'s ranks, ADR-0024 D12), the rows they report,
//! and the run's [`Comms`] — the process group and every call made on it
//! — which it coordinates but does not implement.

use super::bench::{BenchComponent, BenchHost};
use super::comms::Comms;
use super::console::FlushOnDrop;
use super::limits::{guard_store, instances_needed, RunLimits};
use super::loader::Loader;
use super::recording_memo::KernelSources;
use super::wasi::sandbox;
use super::{describe_guest_error, describe_wasm_error};
use crate::config::ccl::AlgorithmChoice;
use crate::config::CclConfig;
use crate::engine;
use crate::error::SimError;
use crate::hw::dtype::Dtype;
use crate::hw::Machine;
use std::sync::{Arc, Mutex, OnceLock};
use wasmtime::component::ResourceTable;
use wasmtime::Store;

/// One variant of a collective a rank measured: nccl-tests' out-of-place
/// or in-place block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measured {
    pub time_ps: u64,
    /// Wrong elements of the rank's output; None when not checked.
    pub wrong: Option<u64>,
}

/// How the ranks' times of a row combine (nccl-tests' `-a`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeAggregation {
    /// Rank 0's time (the driver's when it reported the row itself).
    Rank0,
    /// The mean of the ranks that reported the row.
    Mean,
    /// The fastest rank's.
    Min,
    /// The slowest rank's: when the collective has finished everywhere.
    #[default]
    Max,
}

/// One row a bench reported (one rank's, or the driver's).
#[derive(Debug, Clone, PartialEq)]
pub struct ReportRecord {
    pub collective: String,
    pub size_bytes: u64,
    pub count: u64,
    pub dtype: Dtype,
    pub redop: String,
    /// The root of broadcast / reduce (None: not rooted, printed -1).
    pub root: Option<u32>,
    /// The rank that reported it (None: the driver).
    pub rank: Option<u32>,
    pub out_of_place: Option<Measured>,
    pub in_place: Option<Measured>,
    pub aggregation: TimeAggregation,
    /// The row's headline time: the out-of-place block's when it ran,
    /// else the in-place block's.
    pub time_ps: u64,
    /// The wrong elements of both blocks (unchecked: 0).
    pub wrong: u64,
}

impl ReportRecord {
    /// A record of the two blocks, its headline `time_ps` and `wrong`
    /// derived from them; rooted at `root`, combined as `aggregation`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        (collective, size_bytes, count, dtype, redop): (String, u64, u64, Dtype, String),
        root: Option<u32>,
        rank: Option<u32>,
        out_of_place: Option<Measured>,
        in_place: Option<Measured>,
        aggregation: TimeAggregation,
    ) -> Self {
        let headline = out_of_place.or(in_place);
        let wrong = [out_of_place, in_place]
            .into_iter()
            .flatten()
            .filter_map(|m| m.wrong)
            .fold(0, u64::saturating_add);
        ReportRecord {
            collective,
            size_bytes,
            count,
            dtype,
            redop,
            root,
            rank,
            out_of_place,
            in_place,
            aggregation,
            time_ps: headline.map_or(0, |m| m.time_ps),
            wrong,
        }
    }

    /// A row of `report.record-result` (one block, checked): the in-place
    /// block for a collective PyTorch runs in place (all-reduce,
    /// broadcast, reduce), the out-of-place one otherwise.
    pub fn one_block(
        (collective, size_bytes, count, dtype, redop): (String, u64, u64, Dtype, String),
        rank: Option<u32>,
        time_ps: u64,
        wrong: u64,
    ) -> Self {
        let block = Some(Measured {
            time_ps,
            wrong: Some(wrong),
        });
        let in_place = crate::ccl::collective::Collective::from_record_name(&collective)
            .is_some_and(|c| c.in_place());
        let (oop, ip) = if in_place {
            (None, block)
        } else {
            (block, None)
        };
        Self::new(
            (collective, size_bytes, count, dtype, redop),
            None,
            rank,
            oop,
            ip,
            TimeAggregation::Max,
        )
    }
}

/// State of one run.
pub struct Session {
    pub machine: Arc<Machine>,
    pub loader: Arc<Loader>,
    pub bench: BenchComponent,
    pub bench_args: Vec<String>,
    /// The budgets every instance of this run is held to.
    pub limits: RunLimits,
    /// The process group and every call made on it.
    pub comms: Arc<Comms>,
    rows: Mutex<Vec<ReportRecord>>,
    /// Header lines the bench asked for (`report.note`), each once.
    notes: Mutex<Vec<String>>,
    /// The compute table's rows (`report.record-kernel`).
    kernel_rows: Mutex<crate::kernel_report::KernelTable>,
    row_observer: OnceLock<super::sim::RowObserver>,
    /// Root causes seen so far: (who, message), e.g. a failed kernel or a
    /// spawned rank that returned an error.
    pub(super) failures: Failures,
    /// Where each kernel launch's calls come from (shared with `comms`).
    pub(super) kernels: Arc<KernelSources>,
    /// What each rank's time went to (shared with `comms`).
    pub timelines: Arc<super::timeline::Timelines>,
}

/// Root causes of a run, in the order they happened: (who, message).
#[derive(Clone, Default)]
pub struct Failures(Arc<Mutex<Vec<(String, String)>>>);

impl Failures {
    pub(super) fn record(&self, who: String, message: String) {
        let mut f = self.0.lock().unwrap();
        if !f.iter().any(|(_, m)| *m == message) {
            f.push((who, message));
        }
    }

    fn first(&self) -> Option<(String, String)> {
        self.0.lock().unwrap().first().cloned()
    }
}

/// How a bench instance is named in its output and errors: the driver is
/// `bench`, a spawned worker `rank N`.
fn bench_instance_name(rank: Option<u32>) -> String {
    rank.map_or_else(|| "bench".to_string(), |r| format!("rank {r}"))
}

/// The host memory one report row costs from its record to the printed
/// table: the record in a growing vector (up to twice its size), the
/// merged row and its index entry, and its line of output. Measured: a
/// bench of 3 million rows printed as CSV peaked at 2.5 GB resident, 840
/// bytes a row; charged at the record's 105 bytes, the budget saw 315 MiB.
pub const REPORT_ROW_HOST_BYTES: u64 = 896;

impl Session {
    pub fn new(
        machine: Arc<Machine>,
        ccl: CclConfig,
        loader: Arc<Loader>,
        bench: BenchComponent,
        algorithm_choice: AlgorithmChoice,
        bench_args: Vec<String>,
        limits: RunLimits,
    ) -> Arc<Self> {
        let failures = Failures::default();
        let kernels = Arc::new(KernelSources::new(machine.clone(), limits.clone()));
        let timelines = Arc::new(super::timeline::Timelines::default());
        let comms = Comms::new(
            (machine.clone(), ccl, loader.clone()),
            algorithm_choice,
            limits.clone(),
            failures.clone(),
            (kernels.clone(), timelines.clone()),
        );
        Arc::new(Session {
            machine,
            loader,
            bench,
            bench_args,
            limits,
            comms: Arc::new(comms),
            rows: Mutex::new(Vec::new()),
            notes: Mutex::default(),
            kernel_rows: Mutex::default(),
            row_observer: OnceLock::new(),
            failures,
            kernels,
            timelines,
        })
    }

    /// Tell `observer` of every row as the bench reports it.
    pub fn observe_rows(&self, observer: super::sim::RowObserver) {
        let _ = self.row_observer.set(observer);
    }

    pub fn rows(&self) -> Vec<ReportRecord> {
        self.rows.lock().unwrap().clone()
    }

    /// Keep a row the bench reported; rows are charged to the run's
    /// memory budget like the rest of its output, at what the host will
    /// hold for them by the end ([`REPORT_ROW_HOST_BYTES`] and their text
    /// three times over), not only the record's fields.
    pub(crate) fn record(&self, r: ReportRecord, who: &str) -> Result<(), String> {
        let text = (r.collective.len() + r.redop.len()) as u64;
        let cost = REPORT_ROW_HOST_BYTES + 3 * text;
        self.limits
            .budget
            .charge(crate::budget::MemoryUse::GuestOutput, cost, who)
            .map_err(|e| format!("report.record-result: {e}"))?;
        if let Some(observe) = self.row_observer.get() {
            observe(&r);
        }
        let mut rows = self.rows.lock().unwrap();
        if !crate::report::knows(&r.collective)
            && !rows.iter().any(|k| k.collective == r.collective)
        {
            tracing::warn!(
                "{who} recorded rows as `{}`, a name the table does not know ({}, their \
                 torch.distributed variants such as all_gather_into_tensor, or sendrecv): \
                 their busbw is their algbw and they have no bound; record them under the \
                 collective's name",
                r.collective,
                crate::ccl::collective::Collective::names()
            );
        }
        rows.push(r);
        Ok(())
    }

    /// The header lines the bench asked for, in first-said order.
    pub fn notes(&self) -> Vec<String> {
        self.notes.lock().unwrap().clone()
    }

    /// Keep a header line (`report.note`) unless it was said already,
    /// charged like a row.
    pub(crate) fn note(&self, text: String, who: &str) -> Result<(), String> {
        let mut notes = self.notes.lock().unwrap();
        if notes.contains(&text) {
            return Ok(());
        }
        self.limits
            .budget
            .charge(
                crate::budget::MemoryUse::GuestOutput,
                REPORT_ROW_HOST_BYTES + 2 * text.len() as u64,
                who,
            )
            .map_err(|e| format!("report.note: {e}"))?;
        notes.push(text);
        Ok(())
    }

    pub fn kernel_rows(&self) -> Vec<crate::kernel_report::KernelRow> {
        self.kernel_rows.lock().unwrap().rows().to_vec()
    }

    /// Keep a compute row the bench reported (merged with the other ranks'
    /// row of the same launch), charged like `record`'s; the peak is one
    /// matrix unit's for the row's dtype.
    pub(crate) fn record_kernel(
        &self,
        make: impl FnOnce(f64) -> crate::kernel_report::KernelRow,
        dtype: Dtype,
        who: &str,
    ) -> Result<(), String> {
        let unit_peak = self.machine.gemm_peak_per_s(dtype);
        let row = make(unit_peak);
        let cost = (std::mem::size_of_val(&row) + row.name.len() + row.shape.len()) as u64;
        self.limits
            .budget
            .charge(crate::budget::MemoryUse::GuestOutput, cost, who)
            .map_err(|e| format!("report.record-kernel: {e}"))?;
        self.kernel_rows
            .lock()
            .unwrap()
            .add(row, unit_peak)
            .map_err(|e| format!("report.record-kernel: {e}"))
    }

    /// The first root-cause failure of the run, if any: (who, message).
    pub fn first_failure(&self) -> Option<(String, String)> {
        self.failures.first()
    }

    fn record_failure(&self, who: String, message: String) {
        self.failures.record(who, message)
    }

    fn bench_store(
        self: &Arc<Self>,
        rank: Option<u32>,
    ) -> wasmtime::Result<(Store<BenchHost>, super::wasi::Output)> {
        let who = bench_instance_name(rank);
        let sb = sandbox(
            0xBE_0000 + rank.map_or(0, |r| r as u64 + 1),
            &who,
            (&self.limits.budget, &self.limits.console),
        );
        let host = BenchHost {
            wasi: sb.ctx,
            table: ResourceTable::new(),
            session: self.clone(),
            rank,
            device: None,
            guard: self.limits.guard(&who),
            works: Vec::new(),
            launches: Vec::new(),
            compute: Default::default(),
        };
        let mut store = Store::new(self.bench.pre.engine(), host);
        guard_store(&mut store)?;
        Ok((store, sb.output))
    }

    /// Run the bench's `run` export (the driver).
    pub async fn run_main(self: Arc<Self>) -> Result<(), SimError> {
        let (mut store, out) = self
            .bench_store(None)
            .map_err(|e| SimError::Wasmtime(describe_wasm_error(&e)))?;
        let _flush = FlushOnDrop::new("bench".into(), out.clone());
        let args = self.bench_args.clone();
        let result = async {
            let inst = self.bench.pre.instantiate_async(&mut store).await?;
            inst.call_run(&mut store, &args).await
        }
        .await;
        let result = match result {
            Ok(Ok(())) => {
                Ok(super::works::drain(&store.data().works, &store.data().launches).await)
            }
            other => other,
        };
        let failed = |message: String| SimError::BenchFailed {
            bench: self.bench.name.clone(),
            who: "run".into(),
            message,
        };
        // A failed kernel is reported once, as itself, rather than as every
        // rank's view of it; anything else as the bench reported it.
        let kernel_failure = self
            .root_cause()
            .filter(|e| matches!(e, SimError::BenchFailed { who, .. } if who == "collective"));
        // The bench's own error (`run` returned it), or the trap.
        let message = match result {
            Ok(returned) => match returned {
                Ok(()) => return Ok(()),
                Err(msg) => msg,
            },
            Err(e) => describe_guest_error(&e, &out),
        };
        Err(kernel_failure.unwrap_or_else(|| failed(message)))
    }

    /// The first recorded failure as an error.
    pub fn root_cause(&self) -> Option<SimError> {
        self.first_failure()
            .map(|(who, message)| SimError::BenchFailed {
                bench: self.bench.name.clone(),
                who,
                message,
            })
    }

    async fn run_worker(
        self: Arc<Self>,
        rank: u32,
        world_size: u32,
        args: Vec<String>,
    ) -> Result<(), String> {
        let (mut store, out) = self
            .bench_store(Some(rank))
            .map_err(|e| describe_wasm_error(&e))?;
        let _flush = FlushOnDrop::new(bench_instance_name(Some(rank)), out.clone());
        let result = async {
            let inst = self.bench.pre.instantiate_async(&mut store).await?;
            inst.call_worker(&mut store, rank, world_size, &args).await
        }
        .await;
        let result = match result {
            Ok(Ok(())) => super::works::drain(&store.data().works, &store.data().launches).await,
            Ok(r) => r,
            Err(e) => Err(describe_guest_error(&e, &out)),
        };
        if let Err(e) = &result {
            // A rank that dies leaves its peers waiting in collectives: keep
            // its error as the root cause of whatever follows.
            self.record_failure(format!("rank {rank}"), e.clone());
        }
        result
    }

    /// `torch.multiprocessing.spawn(worker, nprocs)`: one bench instance per
    /// rank, run concurrently; returns when all have finished.
    pub async fn spawn_workers(
        self: Arc<Self>,
        nprocs: u32,
        args: Vec<String>,
    ) -> Result<(), String> {
        let max = self.machine.topo.spec.n_sips().max(1) * 64;
        if nprocs == 0 || nprocs > max {
            return Err(format!("spawn: nprocs must be in 1..={max}, got {nprocs}"));
        }
        if let Some(pool) = self.loader.pool_instances() {
            let need = instances_needed(nprocs);
            if need > pool {
                return Err(format!(
                    "spawn({nprocs}): {nprocs} ranks need up to {need} WebAssembly instances at once \
                     (a bench and a kernel instance per rank, plus the driver), but the instance pool \
                     holds {pool}; raise it with --pool-instances {need}"
                ));
            }
        }
        let handles: Vec<_> = (0..nprocs)
            .map(|rank| engine::spawn(self.clone().run_worker(rank, nprocs, args.clone())))
            .collect();
        let mut failed = Vec::new();
        for (rank, h) in handles.into_iter().enumerate() {
            if let Err(e) = h.await {
                failed.push((rank as u32, e));
            }
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(spawn_error(failed))
        }
    }
}

/// The error of a `spawn` whose ranks `failed` (rank, error; by rank), as
/// PyTorch words it, each distinct error once with the ranks that hit it:
/// a typo every rank runs into is one traceback, not one per rank.
fn spawn_error(failed: Vec<(u32, String)>) -> String {
    // Messages that differ only by naming their own rank ("guest instances
    // (rank 7) asked for ...") are one error too: 14 ranks refused by the
    // memory budget printed 14 near-identical paragraphs.
    let own_rank = |rank: u32| format!("(rank {rank})");
    let mut groups: Vec<(Vec<u32>, String, String)> = Vec::new();
    for (rank, e) in failed {
        let key = e.replace(&own_rank(rank), "(rank {})");
        match groups.iter_mut().find(|(_, k, _)| *k == key) {
            Some((ranks, _, _)) => ranks.push(rank),
            None => groups.push((vec![rank], key, e)),
        }
    }
    groups
        .into_iter()
        .map(|(ranks, key, e)| {
            let who = match ranks.as_slice() {
                [r] => format!("process {r}"),
                _ => format!("processes {}", rank_ranges(&ranks)),
            };
            let each = if ranks.len() > 1 && key != e {
                " (each naming its own rank; the first's)"
            } else {
                ""
            };
            format!("{who} terminated with the following error{each}:\n{e}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Ascending ranks as runs: `0-3, 5, 7-8`.
fn rank_ranges(ranks: &[u32]) -> String {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &r in ranks {
        match runs.last_mut() {
            Some((_, hi)) if hi.checked_add(1) == Some(r) => *hi = r,
            _ => runs.push((r, r)),
        }
    }
    runs.iter()
        .map(|&(lo, hi)| match hi - lo {
            0 => lo.to_string(),
            1 => format!("{lo}, {hi}"),
            _ => format!("{lo}-{hi}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod spawn_error_tests {
    #[test]
    fn identical_rank_errors_are_told_once_with_their_ranks() {
        let e = |r: u32, m: &str| (r, m.to_string());
        let said = super::spawn_error(vec![
            e(0, "NameError: x"),
            e(1, "NameError: x"),
            e(2, "ValueError: y"),
            e(3, "NameError: x"),
            e(5, "NameError: x"),
        ]);
        assert_eq!(
            said,
            "processes 0, 1, 3, 5 terminated with the following error:\nNameError: x\n\
             process 2 terminated with the following error:\nValueError: y"
        );
        assert_eq!(super::rank_ranges(&[0, 1, 2, 3, 5, 7, 8]), "0-3, 5, 7, 8");
    }

    #[test]
    fn errors_that_differ_only_by_their_own_rank_are_told_once() {
        let e = |r: u32| {
            (
                r,
                format!("budget exhausted: guest instances (rank {r}) asked"),
            )
        };
        let said = super::spawn_error(vec![e(7), e(8), e(9), (10, "other (rank 3)".into())]);
        assert_eq!(
            said,
            "processes 7-9 terminated with the following error (each naming its own rank; \
             the first's):\nbudget exhausted: guest instances (rank 7) asked\n\
             process 10 terminated with the following error:\nother (rank 3)"
        );
    }
}
