//! Running collectives on the process group: choosing each collective's
//! backend (ccl.yaml's `defaults.algorithms`, the command line's
//! `--algorithm`, what the component declares it implements), planning a
//! backend's IPCQ (its install keys and neighbour tables), and one call —
//! the arguments `kernel-args-for` gives, the launch of every rank's
//! kernels, the epoch every rank joins (seed 004 D7) and the failure
//! report.

use super::bindings::bench::kernbench::sim::distributed::DistError;
use super::comms::{runtime_error, Caller, CollectiveTensor, Comms};
use super::fail::DistResult;
use super::kernel::KernelLaunch;
use super::process_group::{Backend, ProcessGroup, Wanted};
use crate::ccl::collective::{Call, Collective, RedOp};
use crate::ccl::ranks::RankMap;
use crate::config::ccl::AlgorithmEntry;
use crate::config::topology::SipTopology;
use crate::engine;
use crate::hw::machine::CommId;
use std::collections::BTreeMap;
use std::sync::Arc;

/// How many algorithms a refusal names at most.
const ALTERNATIVES: usize = 3;

/// A planned backend and the rank map its entry gives.
pub(super) struct Plan {
    pub backend: Backend,
    pub ranks: RankMap,
}

impl Comms {
    /// Load the component of ccl.yaml entry `name` and plan its IPCQ in
    /// communicator `comm`: its install keys (the entry's, else the
    /// component's defaults), rank map, neighbour tables (after its
    /// `neighbors` rewrite), topology kind, and check its parameters. For
    /// the default group (`members` None) the ranks are the world's, laid
    /// out as the machine is; for a process group of the world ranks
    /// `members`, its ranks, laid out as a ring of its size (what its
    /// kernels are told) and its tables moved onto its PEs
    /// ([`RankMap::real_pes`]). Installs nothing. Errors name the entry.
    pub(super) async fn plan_backend(
        &self,
        (comm, members): (CommId, Option<&[u32]>),
        name: &str,
        entry: &AlgorithmEntry,
    ) -> Result<Plan, DistError> {
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
        let (ranks, layout) = match members {
            None => {
                let ws = self.ccl.world_size(entry, spec.n_sips());
                let ranks = RankMap::new(ws, keys.mapper, spec).map_err(|e| in_entry(&e))?;
                (ranks, (spec.system.sips.topology, spec.sip_grid()))
            }
            Some(members) => {
                let world = self.process_group()?.world_size;
                let ranks = RankMap::new(world, keys.mapper, spec)
                    .and_then(|w| w.group(members))
                    .map_err(|e| in_entry(&e))?;
                (ranks, (SipTopology::Ring1d, (members.len() as u32, 1)))
            }
        };
        let world_size = ranks.world_size;
        // The coordinates the tables are laid over: the participants
        // themselves for the world, a world of the group's size for a
        // group (moved onto its PEs below).
        let participants: Vec<_> = (0..world_size).flat_map(|g| ranks.laid_out(g)).collect();
        // A full mesh's rings are refused by the budget before its tables
        // are made (GBs themselves at thousands of ranks).
        self.machine
            .afford_ipcq(
                comm,
                crate::ccl::tables::rings_at_most(keys.topology, participants.len()),
                keys.n_slots,
            )
            .map_err(|e| in_entry(&e))?;
        let mut tables = crate::ccl::tables::for_layout(keys.topology, &participants, layout, spec)
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
        if members.is_some() {
            tables = crate::ccl::tables::moved(&tables, &ranks.real_pes());
        }
        let kind = hooks
            .topo_kind(layout.0.name())
            .await
            .map_err(|e| in_entry(&e))?;
        let params = entry.param_values().map_err(|e| in_entry(&e))?;
        let collectives = hooks.collectives().await.map_err(|e| in_entry(&e))?;
        let out_of_place = hooks.out_of_place().await.map_err(|e| in_entry(&e))?;
        // The parameters are checked here, before anything is installed.
        if collectives.contains(&Collective::AllReduce) {
            hooks
                .kernel_args_for(&Call::seed_all_reduce(0, world_size), cube, &params)
                .await
                .map_err(|e| in_entry(&e))?;
        }
        let backend = Backend::new(
            name.to_string(),
            component,
            collectives,
            out_of_place,
            kind,
            keys,
            tables,
            world_size,
            params,
        );
        Ok(Plan { backend, ranks })
    }

    /// The backend serving collective `c`: chosen at its first call from
    /// [`crate::config::CclConfig::candidates`] (the first that must
    /// serve, or may and implements `c`), then kept. It must share the
    /// installed IPCQ.
    pub(super) async fn backend_for(
        &self,
        pg: &ProcessGroup,
        c: Collective,
    ) -> Result<Arc<Backend>, DistError> {
        if let Some(b) = pg.backends.lock().unwrap().get(&c) {
            return Ok(b.clone());
        }
        let mut tried = Vec::new();
        let mut chosen = None;
        for cand in self
            .ccl
            .candidates(c, &self.algorithm_choice, pg.wanted.as_deref())
        {
            let backend = if cand.name == pg.installed.algorithm {
                pg.installed.clone()
            } else {
                let (_, entry) = self
                    .ccl
                    .resolve(Some(&cand.name))
                    .map_err(|e| runtime_error(format!("{} ({}): {e}", c, cand.source)))?;
                let entry = entry.clone();
                Arc::new(
                    self.plan_backend((pg.comm, pg.ranks.members()), &cand.name, &entry)
                        .await?
                        .backend,
                )
            };
            if backend.collectives.contains(&c) {
                chosen = Some((backend, cand));
                break;
            }
            let implements: Vec<&str> = backend.collectives.iter().map(|c| c.name()).collect();
            if cand.binding {
                return Err(DistError::NotImplemented(format!(
                    "{c}: algorithm '{}' (chosen by {}) does not implement it; it implements {}. \
                     Choose one that does with --algorithm {c}=<name> or ccl.yaml defaults.algorithms.{c}",
                    cand.name,
                    cand.source,
                    implements.join(", ")
                )));
            }
            tried.push(format!("'{}' ({})", cand.name, implements.join(", ")));
        }
        let Some((backend, cand)) = chosen else {
            return Err(DistError::NotImplemented(format!(
                "{c}: no algorithm for it; tried {} — add `defaults: {{algorithms: {{{c}: <name>}}}}` \
                 to ccl.yaml or pass --algorithm {c}=<name>",
                tried.join(", ")
            )));
        };
        if let Some(why) = backend.rank_mismatch(&pg.installed) {
            return Err(DistError::NotImplemented(format!(
                "{c}: algorithm '{}' (chosen by {}) cannot share the process group: {why}",
                backend.algorithm, cand.source
            )));
        }
        // Its IPCQ directions join the installed ones (shared where equal).
        if !Arc::ptr_eq(&backend, &pg.installed) {
            self.machine
                .extend_ipcq(pg.comm, &backend.tables, backend.ipcq_settings())
                .map_err(|e| {
                    DistError::NotImplemented(format!(
                        "{c}: algorithm '{}' (chosen by {}) cannot share the process group's IPCQ: {e}; \
                         give its ccl.yaml entry the installed '{}''s slots, or other direction names",
                        backend.algorithm, cand.source, pg.installed.algorithm
                    ))
                })?;
        }
        pg.backends.lock().unwrap().insert(c, backend.clone());
        Ok(backend)
    }

    /// `distributed.shards-wanted`: the shards per SIP the validator of
    /// the algorithm serving `collective` wants (choosing it as its first
    /// call would), None without a validator.
    pub(super) async fn shards_wanted(&self, collective: &str) -> Result<Option<u32>, DistError> {
        let c = Collective::from_record_name(collective).ok_or_else(|| {
            DistError::ValueError(format!(
                "shards_wanted: unknown collective {collective:?} (one of {})",
                Collective::names()
            ))
        })?;
        let pg = self.process_group()?;
        let backend = self.backend_for(&pg, c).await?;
        Ok(backend
            .validator
            .map(|v| v.shards_needed(&self.machine.topo.spec)))
    }

    /// The kernel's arguments for `want.call` from `backend`, cached; a
    /// refusal names the algorithms that do the call as wanted.
    async fn kernel_args_for(
        &self,
        pg: &ProcessGroup,
        backend: &Backend,
        want: Wanted,
    ) -> Result<Vec<i64>, DistError> {
        let call = &want.call;
        if let Some(k) = backend.cached_args(call) {
            return Ok(k);
        }
        let spec = &self.machine.topo.spec;
        let cube = (spec.sip.cube_mesh.w, spec.sip.cube_mesh.h);
        let k = async {
            backend
                .component
                .hooks(&self.machine, &self.limits)
                .await
                .map_err(super::hooks::ArgsError::Failed)?
                .kernel_args_for(call, cube, &backend.params)
                .await
        }
        .await;
        let k = match k {
            Ok(k) => k,
            Err(super::hooks::ArgsError::Refused(e)) => {
                let hint = self.who_does(pg, want, &backend.algorithm).await;
                return Err(DistError::NotImplemented(format!(
                    "{}: algorithm '{}' refuses it ({e}); {hint}",
                    call.describe(),
                    backend.algorithm,
                )));
            }
            Err(super::hooks::ArgsError::Failed(e)) => {
                return Err(runtime_error(format!(
                    "{}: algorithm '{}' failed giving its kernel arguments: {e}",
                    call.describe(),
                    backend.algorithm,
                )))
            }
        };
        backend.cache_args(*call, k.clone());
        Ok(k)
    }

    /// The end of a refusal of `want`: the algorithms that do it, named
    /// with the flag that chooses the first, or that none in ccl.yaml does.
    async fn who_does(&self, pg: &ProcessGroup, want: Wanted, except: &str) -> String {
        let can = self.algorithms_that_do(pg, want, except).await;
        match can.as_slice() {
            [] => "no algorithm in ccl.yaml does it".to_string(),
            names => format!(
                "{} {} it: choose one with --algorithm {}={}",
                names.join(", "),
                if names.len() == 1 { "does" } else { "do" },
                want.call.collective,
                names[0]
            ),
        }
    }

    /// The ccl.yaml algorithms other than `except` that would do `want`
    /// in process group `pg` (the first [`ALTERNATIVES`] in name order):
    /// they load on this machine, implement the collective (out of place
    /// if wanted), share the group's ranks, take the placement and accept
    /// the call. Only asked when an algorithm refuses a call, to name one
    /// that does it; found once per group for every rank that meets the
    /// refusal.
    async fn algorithms_that_do(
        &self,
        pg: &ProcessGroup,
        want: Wanted,
        except: &str,
    ) -> Vec<String> {
        let Wanted {
            call,
            shards,
            out_of_place,
        } = want;
        let call = &call;
        let key = (except.to_string(), want);
        if let Some(found) = pg.alternatives.lock().unwrap().get(&key) {
            return found.clone();
        }
        let spec = &self.machine.topo.spec;
        let cube = (spec.sip.cube_mesh.w, spec.sip.cube_mesh.h);
        let mut found = Vec::new();
        for (name, entry) in &self.ccl.algorithms {
            if found.len() == ALTERNATIVES {
                break;
            }
            if name == except {
                continue;
            }
            let Ok(plan) = self
                .plan_backend((pg.comm, pg.ranks.members()), name, entry)
                .await
            else {
                continue;
            };
            let b = plan.backend;
            let placed = b.validator.is_none_or(|v| v.shards_needed(spec) == shards);
            let fits = b.collectives.contains(&call.collective)
                && (!out_of_place || b.separate_output(call.collective))
                && placed
                && b.rank_mismatch(&pg.installed).is_none();
            if !fits {
                continue;
            }
            let accepts = match b.component.hooks(&self.machine, &self.limits).await {
                Ok(mut hooks) => hooks.kernel_args_for(call, cube, &b.params).await.is_ok(),
                Err(_) => false,
            };
            if accepts {
                found.push(name.clone());
            }
        }
        pg.alternatives.lock().unwrap().insert(key, found.clone());
        found
    }

    /// One collective call of `who` (its rank in its group; None: the
    /// single driver) with its
    /// input and output (the same tensor for in-place collectives): pick
    /// the backend, check the shard layout, launch the kernels of the
    /// ranks this caller stands for, join the epoch, return when every
    /// rank's kernels have finished. `factor` is the caller's premul-sum
    /// factor: it is not part of the call, so ranks may differ in it. A
    /// kernel failure traps the calling bench (it is not a recoverable
    /// Python-style exception).
    pub(super) async fn run_collective(
        &self,
        who: &Caller,
        (call, factor): (Call, Option<f64>),
        input: CollectiveTensor,
        output: CollectiveTensor,
    ) -> DistResult {
        let (pg, rank) = (who.group.clone(), who.rank);
        let backend = match self.backend_for(&pg, call.collective).await {
            Ok(b) => b,
            Err(e) => return Err(e.into()),
        };
        let ranks = match self.callers_ranks(&pg, rank, &input, call.collective) {
            Ok(r) => r,
            Err(e) => return Err(e.into()),
        };
        if let Some(v) = backend.validator {
            let want = v.shards_needed(&self.machine.topo.spec);
            for t in [&input, &output] {
                if t.shards != want {
                    return Err(DistError::ValueError(format!(
                        "{} on rank {} ({} validator of '{}'): the tensor has {} shard(s) on SIP {}, \
                         the algorithm needs {want} (place it with a DPPolicy that gives {want})",
                        call.collective,
                        ranks[0],
                        v.name(),
                        backend.algorithm,
                        t.shards,
                        t.sip
                    )).into());
                }
            }
        }
        let separate = backend.separate_output(call.collective);
        if input.t_ptr != output.t_ptr && !separate {
            let want = Wanted {
                call,
                shards: input.shards,
                out_of_place: true,
            };
            let hint = self.who_does(&pg, want, &backend.algorithm).await;
            return Err(DistError::NotImplemented(format!(
                "{} out of place: algorithm '{}' runs it in place only (its `out-of-place` export \
                 does not list {}); {hint}",
                call.describe(),
                backend.algorithm,
                call.collective
            ))
            .into());
        }
        let kargs = match self
            .kernel_args_for(
                &pg,
                &backend,
                Wanted {
                    call,
                    shards: input.shards,
                    out_of_place: input.t_ptr != output.t_ptr,
                },
            )
            .await
        {
            Ok(k) => k,
            Err(e) => return Err(e.into()),
        };

        let started = engine::now();
        // One epoch per collective call of each rank (seed 004 D7).
        let (epoch_id, errors) = match pg.epochs.enter(&ranks, call) {
            Ok(entered) => (entered.id, entered.errors),
            Err(e) => {
                self.failures
                    .record(format!("rank {}", ranks[0]), e.clone());
                return Err(runtime_error(e).into());
            }
        };
        // Launch now; each kernel starts at this caller's current time (on
        // a split machine, all at once when the last rank has joined).
        let mut launched = Vec::new();
        let mut split = Vec::new();
        for &r in &ranks {
            let mut args = kargs.clone();
            args.extend([
                r as i64,
                backend.sip_topo_kind as i64,
                pg.sip_topo_wh.0 as i64,
                pg.sip_topo_wh.1 as i64,
            ]);
            // The seed's four, then the output where the kernel takes one
            // apart from its input (seed kernels index the four from the
            // end, so only those that declare it get it).
            // A premul-sum call: the output always, then the rank's factor
            // (the WIT's `kernel`).
            if separate || call.op == RedOp::PremulSum {
                args.push(output.t_ptr as i64);
            }
            if call.op == RedOp::PremulSum {
                args.push(factor.unwrap_or(1.0).to_bits() as i64);
            }
            for pe in pg.ranks.participants(r) {
                let launch = KernelLaunch {
                    pe,
                    comm: pg.comm,
                    t_ptr: input.t_ptr,
                    args: args.clone(),
                };
                let (comp, machine, algo) = (
                    backend.component.clone(),
                    self.machine.clone(),
                    backend.algorithm.clone(),
                );
                let source = self.kernels.source(&comp, &algo, &launch);
                if machine.partitions() > 1 {
                    split.push(super::split_run::SplitLaunch {
                        component: comp,
                        algorithm: algo,
                        launch,
                        source,
                        joined_at: engine::now(),
                        errors: errors.clone(),
                    });
                    continue;
                }
                let errs = errors.clone();
                let (limits, failures) = (self.limits.clone(), self.failures.clone());
                let h = engine::spawn(async move {
                    let run = comp.run_kernel(&algo, machine, &limits, launch, source);
                    if let Err(e) = run.await {
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
        let joined = pg.epochs.join(epoch_id, &ranks, launched, split);
        let (all_joined, all_done) = (joined.all_joined, joined.all_done);
        let split = match joined.last {
            // The last rank to join: a task sets `all_done` when every
            // kernel has ended (on a split machine, this one, below).
            Some((kernels, split)) if split.is_empty() => {
                let all_done = all_done.clone();
                engine::spawn_detached(async move {
                    for k in kernels {
                        k.wait().await;
                    }
                    all_done.set();
                });
                split
            }
            Some((_, split)) => split,
            None => Vec::new(),
        };
        if !split.is_empty() {
            // The last rank to join runs every kernel of the collective in
            // windows, then sleeps until the last one ended.
            match super::split_run::run_kernels(&self.machine, split, &self.limits, &self.failures)
            {
                Ok(end) => {
                    self.split_events
                        .fetch_add(end.events, std::sync::atomic::Ordering::Relaxed);
                    engine::sleep_until(end.end).await;
                    all_done.set();
                }
                Err(why) => {
                    self.machine.give_up_split(why.clone());
                    return Err(wasmtime::Error::msg(format!("split run given up: {why}")).into());
                }
            }
        }
        // The last rank to join waits first, then the others in the order
        // they joined: the order in which they resume, and so start their
        // next calls, within the instant the collective ends.
        all_joined.wait().await;
        all_done.wait().await;
        if self.machine.oplog().is_some() {
            let pes: Vec<crate::topology::PeCoord> =
                (0..ws).flat_map(|r| pg.ranks.participants(r)).collect();
            self.machine.note_host_sync(pg.comm, &pes);
        }
        pg.epochs.leave(epoch_id, ranks.len() as u32);
        for &r in &ranks {
            self.timelines.record(
                pg.ranks.world_rank(r),
                super::timeline::Activity::Communication,
                (started, engine::now()),
            );
        }
        if let Some(tr) = &self.machine.trace {
            let name = format!("{} {} B", call.collective, input.nbytes);
            for &r in &ranks {
                tr.record(
                    crate::hw::trace::Track::Rank(pg.ranks.world_rank(r), pg.comm),
                    name.clone(),
                    started,
                    engine::now(),
                );
            }
        }
        let errors = errors.lock().unwrap().clone();
        if let Some(first) = errors.first() {
            self.failures.record("collective".into(), first.clone());
            return Err(wasmtime::Error::msg(format!(
                "{} failed: {}",
                call.collective,
                errors.join("; ")
            ))
            .into());
        }
        Ok(())
    }

    /// The ranks a collective call of `rank` (None: the single driver)
    /// joins, each checked to run on the SIP of its tensor.
    fn callers_ranks(
        &self,
        pg: &ProcessGroup,
        rank: Option<u32>,
        tensor: &CollectiveTensor,
        c: Collective,
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
                    "{c} called by the single driver with world_size {ws} ({}): its tensor on SIP {} \
                     cannot serve ranks on other SIPs; run one worker per rank with torch.multiprocessing.spawn",
                    pg.ranks.describe(),
                    tensor.sip
                )))
            }
        };
        for &r in &ranks {
            let sip = pg.ranks.sip(r);
            if sip != tensor.sip {
                return Err(DistError::ValueError(pg.ranks.misplaced(r, tensor.sip)));
            }
        }
        Ok(ranks)
    }
}
