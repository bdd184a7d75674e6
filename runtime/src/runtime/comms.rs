//! The communication of one run: its process group ([`ProcessGroup`],
//! seed ADR-0047) and every call made on it — `init_process_group`, the
//! collectives (backend choice and one call: [`super::collective`], the
//! list and `torch.distributed` forms: [`super::dist_calls`]) and
//! `send` / `recv` ([`super::p2p`]). The session owns one and lends it to
//! the `distributed` interface; what a bench reports, and spawning its
//! ranks, are the session's.

use super::bindings::bench::kernbench::sim::distributed::DistError;
use super::limits::RunLimits;
use super::loader::Loader;
use super::process_group::ProcessGroup;
use super::recording_memo::KernelSources;
use super::session::Failures;
use crate::ccl::collective::Collective;
use crate::config::ccl::{AlgorithmChoice, AlgorithmEntry};
use crate::config::topology::SipTopology;
use crate::config::CclConfig;
use crate::hw::dtype::Dtype;
use crate::hw::machine::CommId;
use crate::hw::Machine;
use std::sync::{Arc, Mutex};

const NOT_INITIALIZED: &str =
    "Default process group has not been initialized, please make sure to call init_process_group.";

pub(super) fn runtime_error(m: impl Into<String>) -> DistError {
    DistError::RuntimeError(m.into())
}

/// The tensor argument of a collective, as the backend sees it.
#[derive(Debug, Clone)]
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
    /// The memory of each shard (space, offset, bytes), for host copies.
    pub blocks: Vec<super::dist_calls::Block>,
}

impl CollectiveTensor {
    /// The view of `placed`, `numel` elements of `dtype`.
    pub fn of_placed(placed: &crate::hw::vmap::PlacedTensor, dtype: Dtype, numel: u64) -> Self {
        CollectiveTensor {
            sip: placed.sip,
            t_ptr: placed.addr(),
            dtype,
            nbytes: numel * dtype.itemsize(),
            shards: placed.specs.len() as u32,
            shard_numel: placed.specs[0].numel(),
            blocks: placed
                .blocks
                .iter()
                .map(|b| (b.space, b.offset, b.nbytes()))
                .collect(),
        }
    }

    pub fn numel(&self) -> u64 {
        self.nbytes / self.dtype.itemsize()
    }
    /// Block `i` of `n` elements of a single-shard tensor, as a tensor of
    /// its own (the other buffer of an in-place collective).
    pub fn block(&self, i: u32, n: u64) -> CollectiveTensor {
        let (space, offset, _) = self.blocks[0];
        let bytes = n * self.dtype.itemsize();
        let at = i as u64 * bytes;
        CollectiveTensor {
            t_ptr: self.t_ptr + at,
            nbytes: bytes,
            shard_numel: n,
            blocks: vec![(space, offset + at, bytes)],
            ..self.clone()
        }
    }
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
    pub bound: Option<crate::bounds::CollectiveBound>,
}

/// Who makes a call: the process group it is made on and the caller's
/// rank in it (None: the single driver, standing for every rank).
#[derive(Clone)]
pub struct Caller {
    pub group: Arc<ProcessGroup>,
    pub rank: Option<u32>,
}

/// The process group of a run and the services its calls need.
pub struct Comms {
    pub machine: Arc<Machine>,
    pub ccl: CclConfig,
    pub(super) loader: Arc<Loader>,
    /// The command line's `--algorithm` choices.
    pub(super) algorithm_choice: AlgorithmChoice,
    pub(super) limits: RunLimits,
    pg: Mutex<Option<Arc<ProcessGroup>>>,
    /// Root causes of the run, shared with the session.
    pub(super) failures: Failures,
    /// Events of the executors of collectives run on a split machine (see
    /// [`super::split_run`]).
    pub(super) split_events: std::sync::atomic::AtomicU64,
    /// Where each kernel launch's calls come from.
    pub(super) kernels: Arc<KernelSources>,
    /// The process groups `new_group` made.
    pub(super) groups: super::groups::Groups,
    /// What each rank's time went to (shared with the session).
    pub(super) timelines: Arc<super::timeline::Timelines>,
}

impl Comms {
    pub(super) fn new(
        (machine, ccl, loader): (Arc<Machine>, CclConfig, Arc<Loader>),
        algorithm_choice: AlgorithmChoice,
        limits: RunLimits,
        failures: Failures,
        (kernels, timelines): (Arc<KernelSources>, Arc<super::timeline::Timelines>),
    ) -> Comms {
        Comms {
            machine,
            ccl,
            loader,
            algorithm_choice,
            limits,
            pg: Mutex::new(None),
            failures,
            split_events: Default::default(),
            kernels,
            timelines,
            groups: Default::default(),
        }
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
            bound: crate::bounds::CollectiveBound::of(
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
        let (name, entry) = self.installed_entry(wanted)?;
        let plan = self
            .plan_backend((CommId::WORLD, None), &name, &entry)
            .await?;
        let spec = &self.machine.topo.spec;
        let sip_topo_wh = match spec.system.sips.topology {
            SipTopology::Ring1d => (0, 0),
            _ => spec.sip_grid(),
        };
        self.machine
            .install_ipcq(
                CommId::WORLD,
                &plan.backend.tables,
                plan.backend.ipcq_settings(),
            )
            .map_err(|e| runtime_error(format!("installing IPCQ for '{name}': {e}")))?;
        *self.pg.lock().unwrap() = Some(Arc::new(ProcessGroup::new(
            CommId::WORLD,
            sip_topo_wh,
            plan.ranks,
            (Arc::new(plan.backend), wanted.map(str::to_string)),
        )));
        Ok(())
    }

    /// The ccl.yaml entry whose IPCQ a group installs: the all-reduce
    /// algorithm's, the first binding candidate (the command line's, the
    /// bench's `wanted`, ccl.yaml's).
    pub(super) fn installed_entry(
        &self,
        wanted: Option<&str>,
    ) -> Result<(String, AlgorithmEntry), DistError> {
        let name = self
            .ccl
            .candidates(Collective::AllReduce, &self.algorithm_choice, wanted)
            .into_iter()
            .find(|c| c.binding)
            .map(|c| c.name)
            .expect("defaults.algorithm is always a binding candidate");
        let (name, entry) = self
            .ccl
            .resolve(Some(&name))
            .map_err(|e| runtime_error(e.to_string()))?;
        Ok((name.to_string(), entry.clone()))
    }

    /// What the ranks are waiting for in unfinished collectives, the
    /// default group's, then each group's, named.
    pub fn collective_report(&self) -> Vec<String> {
        let mut lines = match self.pg.lock().unwrap().clone() {
            Some(pg) => pg.waiting_report(),
            None => Vec::new(),
        };
        for (id, pg) in self.groups.made() {
            lines.extend(
                pg.waiting_report()
                    .into_iter()
                    .map(|l| format!("group {id}: {l}")),
            );
        }
        lines
    }

    /// `who` communicated from `start` until now (on its world rank's
    /// timeline; the single driver's calls are the collectives' own).
    pub(super) fn communicated(&self, who: &Caller, start: crate::units::Ps) {
        if let Some(g) = who.rank {
            self.timelines.record(
                who.group.ranks.world_rank(g),
                super::timeline::Activity::Communication,
                (start, crate::engine::now()),
            );
        }
    }

    /// The caller of world rank `world_rank` (None: the driver) on the
    /// default group.
    pub fn world_caller(&self, world_rank: Option<u32>) -> Result<Caller, DistError> {
        Ok(Caller {
            group: self.process_group()?,
            rank: world_rank,
        })
    }

    /// The caller of world rank `world_rank` (None: the driver) on group
    /// `id`: its rank in the group; None when it is not a member (its
    /// calls on the group return at once, PyTorch's rule).
    pub fn caller(&self, id: u32, world_rank: Option<u32>) -> Result<Option<Caller>, DistError> {
        let group = self.group(id)?;
        let rank = match world_rank {
            Some(w) if id != 0 => match group.ranks.group_rank(w) {
                Some(g) => Some(g),
                None => return Ok(None),
            },
            r => r,
        };
        Ok(Some(Caller { group, rank }))
    }

    /// Process group `id`: 0 the default group, else `new_group`'s.
    pub fn group(&self, id: u32) -> Result<Arc<ProcessGroup>, DistError> {
        if id == 0 {
            return self.process_group();
        }
        self.groups.get(id)
    }
}
