//! Running one point of a sweep in this process: its configuration built
//! from the plan, the bench run as `kernbench-host run` would run it, the
//! outcome turned into a [`PointRecord`]. A refused configuration or a
//! failed run is a record too (with the error), never a reason to stop
//! the other points.

use super::outdir::{Outcome, PointRecord, RunSummary, SlurmIds};
use super::spec::{BaseFile, Sweep};
use crate::config::{CclConfig, Origin};
use crate::runtime::{run_bench, Loader, LoaderOptions, RunRequest};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a point's run may use.
#[derive(Debug, Clone)]
pub struct ExecOptions {
    /// Host memory of the run, bytes (counted from the process's resident
    /// size at its start, as `run` counts it).
    pub memory_budget: u64,
    /// Wall-clock deadline of one point.
    pub deadline: Option<Duration>,
    /// The Slurm task running it, if any.
    pub slurm: Option<SlurmIds>,
}

fn origin(base: &BaseFile, embedded: &'static str) -> Origin {
    match &base.path {
        Some(p) => Origin::File(p.clone()),
        None => Origin::Embedded(embedded),
    }
}

/// Runs points one after the other in this process, sharing one
/// [`Loader`] (its engine and pooled instances) while it is large enough.
pub struct Runner {
    opts: ExecOptions,
    /// The loader of the last point and its pool size.
    loader: Option<(u32, Arc<Loader>)>,
}

impl Runner {
    pub fn new(opts: ExecOptions) -> Runner {
        Runner { opts, loader: None }
    }

    /// Run point `index` of `sweep` (whose digest is `digest`).
    pub fn run(&mut self, sweep: &Sweep, digest: &str, index: usize) -> PointRecord {
        let start = Instant::now();
        let outcome = self
            .try_point(sweep, index)
            .unwrap_or_else(|error| Outcome::Error { error });
        PointRecord {
            index,
            digest: digest.to_string(),
            outcome,
            wall_s: start.elapsed().as_secs_f64(),
            slurm: self.opts.slurm.clone(),
        }
    }

    /// A loader whose pool holds `instances`: the last one if it does.
    fn loader(&mut self, instances: u32) -> Result<Arc<Loader>, String> {
        match &self.loader {
            Some((pool, l)) if *pool >= instances => Ok(l.clone()),
            _ => {
                let pool = instances.max(LoaderOptions::default().pool_instances);
                let l = Arc::new(
                    Loader::new(LoaderOptions {
                        pool_instances: pool,
                        deadline: self.opts.deadline,
                        ..LoaderOptions::default()
                    })
                    .map_err(|e| e.to_string())?,
                );
                self.loader = Some((pool, l.clone()));
                Ok(l)
            }
        }
    }

    fn try_point(&mut self, sweep: &Sweep, index: usize) -> Result<Outcome, String> {
        let r = sweep.point(index).resolve(sweep)?;
        let topo = crate::topology::compile(
            &r.topology,
            origin(&sweep.topology, "topology.yaml"),
            &crate::topology::LayoutCache::Off,
        )
        .map_err(|e| e.to_string())?;
        let ccl = CclConfig::from_yaml_over_builtins(&r.ccl, origin(&sweep.ccl, "ccl.yaml"))
            .map_err(|e| e.to_string())?;
        let loader = self.loader(crate::runtime::limits::instances_needed(topo.spec.n_sips()))?;
        let res = run_bench(
            &loader,
            RunRequest {
                algorithm: r.algorithm,
                args: r.args,
                memory_budget: self.opts.memory_budget,
                memory_baseline: crate::budget::MemoryBudget::process_resident(),
                timing_only: sweep.timing_only,
                ..RunRequest::new(r.bench, Arc::new(topo), ccl)
            },
        )
        .map_err(|e| e.to_string())?;
        let rows = crate::report::aggregate(&res.rows, res.alpha_beta.as_ref());
        Ok(Outcome::Ok {
            summary: RunSummary {
                algorithm: res.algorithm.clone(),
                algorithms: res.algorithms.clone(),
                world_size: res.alpha_beta.as_ref().map(|a| a.world_size),
                sim_end_us: crate::units::ps_to_us(res.end_time_ps),
                timing_only: res.timing_only,
            },
            rows,
            kernels: res
                .kernel_rows
                .iter()
                .map(|k| serde_json::to_value(k).expect("a kernel row serialises"))
                .collect(),
        })
    }
}
