//! A collective's kernels on a machine split into partitions (see
//! `hw::machine::partition`): once every rank has joined, at one
//! simulated time, their kernels (replays of recorded commands) run in
//! conservative windows ([`crate::engine::windows`]), each partition's on
//! a thread of its own, while the main executor waits; it then goes on
//! from the time the last kernel ended. The kernels' bytes and times are
//! those of one executor, or the machine says the split run *diverged*
//! (see `hw::machine::crossings`) and [`super::run_bench`] runs the bench
//! again on one partition; so does anything this path does not take (a
//! kernel that runs in step with simulated time, ranks that join at
//! different times, a kernel that never ends).

use super::kernel::AlgorithmComponent;
use super::kernel::KernelLaunch;
use super::limits::RunLimits;
use super::recording_memo::Source;
use super::session::Failures;
use crate::engine::{self, RunOutcome};
use crate::hw::Machine;
use crate::units::Ps;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A kernel launch kept for the windows.
pub(super) struct SplitLaunch {
    pub component: AlgorithmComponent,
    pub algorithm: String,
    pub launch: KernelLaunch,
    pub source: Source,
    /// The simulated time its rank joined.
    pub joined_at: Ps,
    pub errors: Arc<Mutex<Vec<String>>>,
}

/// What the kernels of a collective left for its ranks.
pub(super) struct SplitEnd {
    /// When the last kernel ended.
    pub end: Ps,
    /// Timer events and polls of the partitions' executors.
    pub events: u64,
}

/// Run `launches` to their end in windows (see the module doc); `Err`
/// says why the split run gives up (the machine then says it diverged).
pub(super) fn run_kernels(
    machine: &Arc<Machine>,
    launches: Vec<SplitLaunch>,
    limits: &RunLimits,
    failures: &Failures,
) -> Result<SplitEnd, String> {
    let t0 = engine::now();
    if let Some(l) = launches.iter().find(|l| l.joined_at != t0) {
        return Err(format!(
            "rank of {} joined the collective at {} ps, the last at {t0} ps",
            l.launch.pe, l.joined_at
        ));
    }
    // Every recording made before the windows: a partition that records
    // in one holds up the others at its end (the helper thread records
    // meanwhile, here beside this one).
    for l in &launches {
        if let Source::Record {
            ticket: Some(ticket),
            ..
        } = &l.source
        {
            ticket.make_ahead();
        }
    }
    let parts = machine.partitions();
    let mut by_part: Vec<Vec<SplitLaunch>> = (0..parts).map(|_| Vec::new()).collect();
    for l in launches {
        by_part[machine.partition_of(l.launch.pe.sip)].push(l);
    }
    let by_part: Vec<Mutex<Vec<SplitLaunch>>> = by_part.into_iter().map(Mutex::new).collect();
    let last_end = Arc::new(AtomicU64::new(t0));
    let began = std::time::Instant::now();
    let ends = machine.run_partitions(parts.min(crate::cores::count()), |p| {
        let mine = std::mem::take(&mut *by_part[p].lock().unwrap());
        for l in mine {
            let (machine, limits, failures) = (machine.clone(), limits.clone(), failures.clone());
            let last_end = last_end.clone();
            engine::spawn_detached(async move {
                engine::sleep_until(t0).await;
                let SplitLaunch {
                    component,
                    algorithm,
                    launch,
                    source,
                    errors,
                    ..
                } = l;
                let run = component.run_kernel(&algorithm, machine, &limits, launch, source);
                if let Err(e) = run.await {
                    failures.record("collective".into(), e.to_string());
                    errors.lock().unwrap().push(e.to_string());
                }
                last_end.fetch_max(engine::now(), Ordering::Relaxed);
            });
        }
    });
    tracing::debug!(
        target: "kernbench::split",
        "{} windows in {:.3} s of wall; each partition busy for {}",
        ends.iter().map(|e| e.windows).max().unwrap_or(0),
        began.elapsed().as_secs_f64(),
        ends.iter()
            .map(|e| format!("{:.3} s", e.busy.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(stalled) = ends.iter().position(|e| e.outcome != RunOutcome::Finished) {
        return Err(format!("partition {stalled}'s kernels did not all end"));
    }
    Ok(SplitEnd {
        end: last_end.load(Ordering::Relaxed),
        events: ends.iter().map(|e| e.events).sum(),
    })
}
