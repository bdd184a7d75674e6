//! One simulation run of a bench: the machine, the default process group
//! (seed ADR-0047), `mp.spawn` (ADR-0024 D12) and the collective epoch
//! barrier (seed 004 D7), plus the rows the bench reports.

use super::bench::{BenchComponent, BenchHost};
use super::bindings::bench::kernbench::sim::distributed::DistError;
use super::kernel::{AlgorithmComponent, KernelLaunch};
use super::limits::{guard_store, instances_needed, RunLimits};
use super::loader::Loader;
use super::wasi::{sandbox, FlushOnDrop};
use super::{describe_guest_error, describe_wasm_error};
use crate::ccl::ranks::RankMap;
use crate::config::ccl::{ParamValue, Validator};
use crate::config::topology::SipTopology;
use crate::config::CclConfig;
use crate::engine::{self, Event};
use crate::error::SimError;
use crate::hw::dtype::Dtype;
use crate::hw::machine::IpcqSettings;
use crate::hw::Machine;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
use wasmtime::component::ResourceTable;
use wasmtime::Store;

const NOT_INITIALIZED: &str =
    "Default process group has not been initialized, please make sure to call init_process_group.";

/// One row a bench reported.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportRecord {
    pub collective: String,
    pub size_bytes: u64,
    pub count: u64,
    pub dtype: Dtype,
    pub redop: String,
    pub time_ps: u64,
    pub wrong: u64,
}

/// The tensor argument of a collective, as the backend sees it.
#[derive(Debug, Clone, Copy)]
pub struct CollectiveTensor {
    pub sip: u32,
    /// Virtual base of the tensor on its SIP (the kernel's `t_ptr`).
    pub t_ptr: u64,
    pub dtype: Dtype,
    /// Bytes of the whole tensor.
    pub nbytes: u64,
    /// Number of shards.
    pub shards: u32,
    /// Elements of the first shard: the kernel's `n_elem` (ADR-0047 D5).
    pub shard_numel: u64,
}

/// One collective call, joined by every rank.
#[derive(Default)]
struct Epoch {
    joined: BTreeSet<u32>,
    all_joined: Event,
    kernels_done: Vec<Event>,
    errors: Arc<Mutex<Vec<String>>>,
    returned: u32,
}

/// The default process group, installed by `init_process_group`.
pub struct ProcessGroup {
    pub algorithm: String,
    pub component: AlgorithmComponent,
    pub world_size: u32,
    pub sip_topo_kind: i32,
    pub sip_topo_wh: (u32, u32),
    /// Which PEs run each rank's kernels.
    pub ranks: RankMap,
    /// The shard-layout check of ccl.yaml's `validator`.
    pub validator: Option<Validator>,
    /// ccl.yaml's algorithm parameters, passed to `kernel-args-with`.
    pub params: Vec<(String, ParamValue)>,
    epochs: Mutex<BTreeMap<u64, Epoch>>,
    next_epoch: Mutex<HashMap<u32, u64>>,
    kernel_args: Mutex<HashMap<u64, Vec<i64>>>,
}

/// The α-β figures of one ring step on the modelled machine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AlphaBeta {
    pub world_size: u32,
    /// Per-message cost: DMA setup + summed path latency (ps).
    pub alpha_ps: u64,
    /// Bottleneck bandwidth of a neighbour path (bytes/s).
    pub bandwidth: crate::units::Rate,
    /// The figures of the all-reduce lower bound ([`crate::bounds`]).
    pub bound: Option<crate::bounds::AllReduceBound>,
}

/// State of one run.
pub struct Session {
    pub machine: Arc<Machine>,
    pub ccl: CclConfig,
    pub loader: Arc<Loader>,
    pub bench: BenchComponent,
    pub algorithm_override: Option<String>,
    pub bench_args: Vec<String>,
    /// The budgets every instance of this run is held to.
    pub limits: RunLimits,
    pg: Mutex<Option<Arc<ProcessGroup>>>,
    rows: Mutex<Vec<ReportRecord>>,
    /// The compute table's rows (`report.record-kernel`).
    kernel_rows: Mutex<crate::kernel_report::KernelTable>,
    row_observer: OnceLock<super::sim::RowObserver>,
    /// Root causes seen so far: (who, message), e.g. a failed kernel or a
    /// spawned rank that returned an error.
    failures: Failures,
}

/// Root causes of a run, in the order they happened: (who, message).
#[derive(Clone, Default)]
struct Failures(Arc<Mutex<Vec<(String, String)>>>);

impl Failures {
    fn record(&self, who: String, message: String) {
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

fn runtime_error(m: impl Into<String>) -> DistError {
    DistError::RuntimeError(m.into())
}

impl Session {
    pub fn new(
        machine: Arc<Machine>,
        ccl: CclConfig,
        loader: Arc<Loader>,
        bench: BenchComponent,
        algorithm_override: Option<String>,
        bench_args: Vec<String>,
        limits: RunLimits,
    ) -> Arc<Self> {
        Arc::new(Session {
            machine,
            ccl,
            loader,
            bench,
            algorithm_override,
            bench_args,
            limits,
            pg: Mutex::new(None),
            rows: Mutex::new(Vec::new()),
            kernel_rows: Mutex::default(),
            row_observer: OnceLock::new(),
            failures: Failures::default(),
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
    /// memory budget like the rest of its output.
    pub(crate) fn record(&self, r: ReportRecord, who: &str) -> Result<(), String> {
        let cost =
            (std::mem::size_of::<ReportRecord>() + r.collective.len() + r.redop.len()) as u64;
        self.limits
            .budget
            .charge(crate::budget::MemoryUse::GuestOutput, cost, who)
            .map_err(|e| format!("report.record-result: {e}"))?;
        if let Some(observe) = self.row_observer.get() {
            observe(&r);
        }
        self.rows.lock().unwrap().push(r);
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
        self.kernel_rows.lock().unwrap().add(row, unit_peak);
        Ok(())
    }

    /// The first root-cause failure of the run, if any: (who, message).
    pub fn first_failure(&self) -> Option<(String, String)> {
        self.failures.first()
    }

    fn record_failure(&self, who: String, message: String) {
        self.failures.record(who, message)
    }

    pub fn process_group(&self) -> Result<Arc<ProcessGroup>, DistError> {
        self.pg
            .lock()
            .unwrap()
            .clone()
            .ok_or_else(|| runtime_error(NOT_INITIALIZED))
    }

    /// The α-β figures for the installed process group (ring neighbours:
    /// rank r → r+1).
    pub fn alpha_beta(&self) -> Option<AlphaBeta> {
        let pg = self.pg.lock().unwrap().clone()?;
        let n = pg.world_size as usize;
        let mut alpha = 0;
        let mut bw: Option<crate::units::Rate> = None;
        for r in 0..n {
            let (a, b) = (
                pg.ranks.first_pe(r as u32),
                pg.ranks.first_pe(((r + 1) % n) as u32),
            );
            let path = self
                .machine
                .router
                .find_path(
                    crate::topology::NodeId::Pe(a),
                    crate::topology::NodeId::Pe(b),
                )
                .ok()?;
            let d = self.machine.router.distance(&path);
            alpha = alpha.max(self.machine.timing.dma_setup + d.latency_ps);
            let rate = d.bottleneck.unwrap_or(self.machine.timing.local_rate);
            bw = Some(bw.map_or(rate, |b: crate::units::Rate| b.min(rate)));
        }
        Some(AlphaBeta {
            world_size: pg.world_size,
            alpha_ps: alpha,
            bandwidth: bw?,
            bound: crate::bounds::AllReduceBound::of(
                &self.machine.topo,
                pg.world_size,
                self.machine.timing.dma_setup,
            ),
        })
    }

    /// `init_process_group(backend)` (ADR-0047 D1–D3): load the algorithm
    /// named by ccl.yaml, resolve the world size, install IPCQ. Atomic: on
    /// failure nothing is installed.
    /// `wanted` is the algorithm the bench asked for; the command line's
    /// `--algorithm` wins over it, and it over ccl.yaml's default.
    pub async fn init_process_group(
        &self,
        backend: &str,
        wanted: Option<&str>,
    ) -> Result<(), DistError> {
        if backend != "ahbm" {
            return Err(DistError::ValueError(format!(
                "Unsupported backend '{backend}': KernBench provides only the 'ahbm' backend"
            )));
        }
        if self.pg.lock().unwrap().is_some() {
            return Err(runtime_error(
                "trying to initialize the default process group twice!",
            ));
        }
        let (name, entry) = self
            .ccl
            .resolve(self.algorithm_override.as_deref().or(wanted))
            .map_err(|e| runtime_error(e.to_string()))?;
        let (name, entry) = (name.to_string(), entry.clone());
        let component = self
            .loader
            .load_algorithm(&entry.module, self.ccl.base_dir.as_deref())
            .map_err(|e| runtime_error(format!("ccl.yaml algorithm '{name}': {e}")))?;
        let in_entry =
            |e: &dyn std::fmt::Display| runtime_error(format!("ccl.yaml algorithm '{name}': {e}"));
        let spec = &self.machine.topo.spec;
        let cube = (spec.sip.cube_mesh.w, spec.sip.cube_mesh.h);
        let mut hooks = component
            .hooks(&self.machine, &self.limits)
            .await
            .map_err(|e| in_entry(&e))?;
        let keys = entry.install_keys(&hooks.entry_defaults().await.map_err(|e| in_entry(&e))?);
        let world_size = self.ccl.world_size(&entry, spec.n_sips());
        let ranks = RankMap::new(world_size, keys.mapper, spec).map_err(|e| in_entry(&e))?;
        let sip_topo = spec.system.sips.topology;
        let sip_topo_wh = match sip_topo {
            SipTopology::Ring1d => (0, 0),
            _ => spec.sip_grid(),
        };
        let participants = ranks.all();
        let mut tables = crate::ccl::tables::for_machine(keys.topology, &participants, spec)
            .map_err(|e| in_entry(&e))?;
        if hooks.has_neighbors() {
            let n = participants.len() as u32;
            let mut rows = BTreeMap::new();
            for i in 0..participants.len() {
                let row = crate::ccl::tables::row_links(&tables, &participants, i);
                if let Some(new) = hooks
                    .neighbors(i as u32, n, row)
                    .await
                    .map_err(|e| in_entry(&e))?
                {
                    rows.insert(i, new);
                }
            }
            tables = crate::ccl::tables::with_rows(&tables, &participants, rows)
                .map_err(|e| in_entry(&e))?;
        }
        let kind = hooks
            .topo_kind(sip_topo.name())
            .await
            .map_err(|e| in_entry(&e))?;
        let params = entry.param_values().map_err(|e| in_entry(&e))?;
        // The parameters are checked here, before anything is installed.
        hooks
            .kernel_args(world_size, 0, cube, &params)
            .await
            .map_err(|e| in_entry(&e))?;
        drop(hooks);
        self.machine
            .install_ipcq(
                &tables,
                IpcqSettings {
                    buffer_kind: keys.buffer_kind,
                    n_slots: keys.n_slots,
                    slot_size: keys.slot_size,
                    strict: keys.strict_validation,
                    poll_interval: keys.poll_interval_ns.map(crate::units::ns_to_ps),
                },
            )
            .map_err(|e| runtime_error(format!("installing IPCQ for '{name}': {e}")))?;
        *self.pg.lock().unwrap() = Some(Arc::new(ProcessGroup {
            algorithm: name,
            component,
            world_size,
            sip_topo_kind: kind,
            sip_topo_wh,
            ranks,
            validator: keys.validator,
            params,
            epochs: Mutex::new(BTreeMap::new()),
            next_epoch: Mutex::new(HashMap::new()),
            kernel_args: Mutex::new(HashMap::new()),
        }));
        Ok(())
    }

    /// `all_reduce(tensor, op)` (ADR-0047 D5): launch the kernels of the
    /// ranks this caller stands for (a spawned worker: its own; the single
    /// driver: every rank, when they all share its tensor's SIP), join the
    /// epoch, return when every rank's kernels have finished.
    /// A kernel failure traps the calling bench (it is not a recoverable
    /// Python-style exception).
    pub async fn all_reduce(
        &self,
        rank: Option<u32>,
        tensor: CollectiveTensor,
        op: &str,
    ) -> wasmtime::Result<Result<(), DistError>> {
        let pg = match self.process_group() {
            Ok(pg) => pg,
            Err(e) => return Ok(Err(e)),
        };
        if op != "sum" {
            return Ok(Err(DistError::NotImplemented(format!(
                "all_reduce op '{op}' is not implemented: the ahbm kernels implement only 'sum'"
            ))));
        }
        if tensor.dtype != Dtype::F16 {
            return Ok(Err(DistError::NotImplemented(format!(
                "all_reduce of a {} tensor: the algorithm ABI counts n_elem in f16 elements (ADR-0050 D2); use f16",
                tensor.dtype.name()
            ))));
        }
        let ranks = match self.callers_ranks(&pg, rank, &tensor) {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        if let Some(v) = pg.validator {
            let want = v.shards_needed(&self.machine.topo.spec);
            if tensor.shards != want {
                return Ok(Err(DistError::ValueError(format!(
                    "all_reduce on rank {} ({} validator of '{}'): the tensor has {} shard(s) on SIP {}, \
                     the algorithm needs {want} (place it with a DPPolicy that gives {want})",
                    ranks[0],
                    v.name(),
                    pg.algorithm,
                    tensor.shards,
                    tensor.sip
                ))));
            }
        }
        let kargs = match self.kernel_args(&pg, tensor.shard_numel).await {
            Ok(k) => k,
            Err(e) => return Err(wasmtime::Error::msg(e.to_string())),
        };

        let started = engine::now();
        // One epoch per collective call of each rank (seed 004 D7).
        let epoch_id = {
            let mut next = pg.next_epoch.lock().unwrap();
            let id = *next.entry(ranks[0]).or_insert(0);
            for r in &ranks {
                next.insert(*r, id + 1);
            }
            id
        };
        let errors = {
            let mut epochs = pg.epochs.lock().unwrap();
            epochs.entry(epoch_id).or_default().errors.clone()
        };
        // Launch now; each kernel starts at this caller's current time.
        let mut launched = Vec::new();
        for &r in &ranks {
            let mut args = kargs.clone();
            args.extend([
                r as i64,
                pg.sip_topo_kind as i64,
                pg.sip_topo_wh.0 as i64,
                pg.sip_topo_wh.1 as i64,
            ]);
            for pe in pg.ranks.participants(r) {
                let launch = KernelLaunch {
                    pe,
                    t_ptr: tensor.t_ptr,
                    args: args.clone(),
                };
                let (comp, machine, algo) = (
                    pg.component.clone(),
                    self.machine.clone(),
                    pg.algorithm.clone(),
                );
                let errs = errors.clone();
                let (limits, failures) = (self.limits.clone(), self.failures.clone());
                let h = engine::spawn(async move {
                    if let Err(e) = comp.run_kernel(&algo, machine, &limits, launch).await {
                        // Recorded at once: if its peers then wait for it
                        // forever, the run reports this failure, not the wait.
                        failures.record("collective".into(), e.to_string());
                        errs.lock().unwrap().push(e.to_string());
                    }
                });
                launched.push(h.finished());
            }
        }
        let ws = pg.world_size;
        let all_joined = {
            let mut epochs = pg.epochs.lock().unwrap();
            let ep = epochs.get_mut(&epoch_id).expect("epoch exists");
            ep.joined.extend(ranks.iter().copied());
            ep.kernels_done.extend(launched);
            if ep.joined.len() as u32 == ws {
                ep.all_joined.set();
            }
            ep.all_joined.clone()
        };
        all_joined.wait().await;
        let done: Vec<Event> = pg.epochs.lock().unwrap()[&epoch_id].kernels_done.clone();
        for d in done {
            d.wait().await;
        }
        if self.machine.oplog().is_some() {
            let pes: Vec<crate::topology::PeCoord> =
                (0..ws).flat_map(|r| pg.ranks.participants(r)).collect();
            self.machine.note_host_sync(&pes);
        }
        {
            let mut epochs = pg.epochs.lock().unwrap();
            let ep = epochs.get_mut(&epoch_id).expect("epoch exists");
            ep.returned += ranks.len() as u32;
            if ep.returned == ws {
                epochs.remove(&epoch_id);
            }
        }
        if let Some(tr) = &self.machine.trace {
            let name = format!("all_reduce {} B", tensor.nbytes);
            for &r in &ranks {
                tr.record(
                    crate::hw::trace::Track::Rank(r),
                    name.clone(),
                    started,
                    engine::now(),
                );
            }
        }
        let errors = errors.lock().unwrap().clone();
        if let Some(first) = errors.first() {
            self.record_failure("collective".into(), first.clone());
            return Err(wasmtime::Error::msg(format!(
                "all_reduce failed: {}",
                errors.join("; ")
            )));
        }
        Ok(Ok(()))
    }

    /// The ranks a collective call of `rank` (None: the single driver)
    /// joins, each checked to run on the SIP of its tensor.
    fn callers_ranks(
        &self,
        pg: &ProcessGroup,
        rank: Option<u32>,
        tensor: &CollectiveTensor,
    ) -> Result<Vec<u32>, DistError> {
        let ws = pg.world_size;
        let ranks: Vec<u32> = match rank {
            Some(r) if r >= ws => {
                return Err(runtime_error(format!(
                    "rank {r} is outside the process group (world_size {ws})"
                )))
            }
            Some(r) => vec![r],
            None if ws == 1 => vec![0],
            // ADR-0047 D5: the single driver launches every rank and
            // drains inline, which needs every rank on its tensor's SIP
            // (rank = flat PE index inside one SIP, as the seed's
            // ccl_hello).
            None if (0..ws).all(|r| pg.ranks.sip(r) == tensor.sip) => (0..ws).collect(),
            None => {
                return Err(runtime_error(format!(
                    "all_reduce called by the single driver with world_size {ws} ({}): its tensor on SIP {} \
                     cannot serve ranks on other SIPs; run one worker per rank with torch.multiprocessing.spawn",
                    pg.ranks.describe(),
                    tensor.sip
                )))
            }
        };
        for &r in &ranks {
            let sip = pg.ranks.sip(r);
            if sip != tensor.sip {
                return Err(DistError::ValueError(format!(
                    "rank {r} runs on SIP {sip} but its tensor lives on SIP {}: call torch.ahbm.set_device({sip}) \
                     before creating the tensor",
                    tensor.sip
                )));
            }
        }
        Ok(ranks)
    }

    async fn kernel_args(&self, pg: &ProcessGroup, n_elem: u64) -> Result<Vec<i64>, SimError> {
        if let Some(k) = pg.kernel_args.lock().unwrap().get(&n_elem) {
            return Ok(k.clone());
        }
        let spec = &self.machine.topo.spec;
        let cube = (spec.sip.cube_mesh.w, spec.sip.cube_mesh.h);
        let k = pg
            .component
            .hooks(&self.machine, &self.limits)
            .await?
            .kernel_args(pg.world_size, n_elem, cube, &pg.params)
            .await?;
        pg.kernel_args.lock().unwrap().insert(n_elem, k.clone());
        Ok(k)
    }

    /// What the ranks are waiting for in unfinished collectives.
    pub fn collective_report(&self) -> Vec<String> {
        let Some(pg) = self.pg.lock().unwrap().clone() else {
            return Vec::new();
        };
        let epochs = pg.epochs.lock().unwrap();
        epochs
            .iter()
            .filter(|(_, e)| (e.joined.len() as u32) < pg.world_size)
            .map(|(id, e)| {
                let missing: Vec<String> = (0..pg.world_size)
                    .filter(|r| !e.joined.contains(r))
                    .map(|r| r.to_string())
                    .collect();
                format!(
                    "collective #{id}: ranks {:?} joined; waiting for rank(s) {} to call it",
                    e.joined,
                    missing.join(", ")
                )
            })
            .collect()
    }

    fn bench_store(
        self: &Arc<Self>,
        rank: Option<u32>,
    ) -> wasmtime::Result<(Store<BenchHost>, super::wasi::Output)> {
        let who = bench_instance_name(rank);
        let sb = sandbox(
            0xBE_0000 + rank.map_or(0, |r| r as u64 + 1),
            &who,
            &self.limits.budget,
        );
        let host = BenchHost {
            wasi: sb.ctx,
            table: ResourceTable::new(),
            session: self.clone(),
            rank,
            device: None,
            guard: self.limits.guard(&who),
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
        match result {
            Ok(Ok(())) => Ok(()),
            Ok(Err(msg)) => Err(kernel_failure.unwrap_or_else(|| failed(msg))),
            Err(e) => Err(kernel_failure.unwrap_or_else(|| failed(describe_guest_error(&e, &out)))),
        }
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
        let mut errors = Vec::new();
        for (rank, h) in handles.into_iter().enumerate() {
            if let Err(e) = h.await {
                errors.push(format!(
                    "process {rank} terminated with the following error:\n{e}"
                ));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("\n"))
        }
    }
}
