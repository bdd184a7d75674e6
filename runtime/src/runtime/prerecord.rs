//! Kernels recorded ahead on a helper thread.
//!
//! A collective launches its kernels at one simulated instant, and each is
//! recorded ([`super::eager`]) when its task first runs, before its calls
//! are replayed. A recording is guest work that reads only what the
//! machine held before the launch (topology, address map, IPCQ tables)
//! and changes nothing, so it is the same wherever it runs: a helper
//! thread records launched kernels in launch order while the engine
//! thread goes on, and the engine thread takes each recording when the
//! kernel's task needs it — recording itself any the helper has not
//! started, waiting for the one the helper is on. Simulated time, the
//! order of events and every output are those of a run without the
//! helper; on a machine of one core there is no helper.
//!
//! The memory a recording takes (its instance) is charged on the helper
//! to a budget of its own, then charged and released on the run's budget
//! when the engine thread takes it — where the recording would have run
//! without the helper — so the run's peak and the budget's refusals are
//! the same. A recording the run's budget would have refused, and one
//! that failed, wrote output or panicked, is recorded again on the engine
//! thread, exactly as without the helper (its error and output come from
//! there). One difference remains, for a racy bench only: a kernel that
//! addresses memory another rank's bench frees in the instant of the
//! launch may be recorded before the free, and then fails at that call
//! when replayed rather than when recorded (an error either way).

use super::kernel::{AlgorithmComponent, KernelLaunch, RecordOutcome, Recorded};
use super::limits::RunLimits;
use crate::budget::{MemoryBudget, MemoryUse};
use crate::error::SimError;
use crate::hw::Machine;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// Work that may be done ahead on the helper thread.
pub trait Job: Send + 'static {
    type Output: Send + 'static;
    /// Do it, charging what it holds to `budget`.
    fn run(&self, budget: &Arc<MemoryBudget>) -> Self::Output;
    /// Whether an output made against a budget of its own is the one the
    /// engine thread would have made (else it is made again there).
    fn clean(output: &Self::Output) -> bool;
}

/// What a kernel's recording gives: its calls, or that it needs
/// simulated time (see [`AlgorithmComponent::record`]).
pub type Recording = Result<RecordOutcome, SimError>;

/// A kernel to record.
pub struct KernelJob {
    pub(super) component: AlgorithmComponent,
    pub(super) algorithm: String,
    pub(super) machine: Arc<Machine>,
    pub(super) limits: RunLimits,
    pub(super) launch: KernelLaunch,
}

impl Job for KernelJob {
    type Output = Recording;

    fn run(&self, budget: &Arc<MemoryBudget>) -> Recording {
        let limits = RunLimits {
            budget: budget.clone(),
            ..self.limits.clone()
        };
        self.component
            .record(&self.algorithm, &self.machine, &limits, &self.launch)
    }

    /// A recording that needs simulated time, or one the guest finished
    /// without error (a failure is recorded again for its message).
    fn clean(output: &Recording) -> bool {
        matches!(
            output,
            Ok(RecordOutcome::InStep { .. })
                | Ok(RecordOutcome::Made(Recorded {
                    guest_error: None,
                    ..
                }))
        )
    }
}

/// A job done ahead, with what it took of a budget of its own.
struct Made<J: Job> {
    /// Back for the engine thread, should it do it again.
    job: Box<J>,
    /// `None`: it panicked.
    output: Option<J::Output>,
    /// The most memory it held at once.
    peak: u64,
    /// What it still holds (captured output).
    held: u64,
}

enum State<J: Job> {
    /// Not started: whoever comes first does it.
    Waiting(Box<J>),
    /// Being done ahead.
    Running,
    Made(Box<Made<J>>),
    /// The engine thread took it.
    Taken,
}

impl<J: Job> State<J> {
    /// The job, if nobody has started it, leaving it marked as started;
    /// any other state stays as it is.
    fn claim(&mut self) -> Option<Box<J>> {
        match std::mem::replace(self, State::Running) {
            State::Waiting(job) => Some(job),
            other => {
                *self = other;
                None
            }
        }
    }
}

struct Slot<J: Job> {
    state: Mutex<State<J>>,
    made: Condvar,
}

struct Queue<J: Job> {
    slots: VecDeque<Arc<Slot<J>>>,
    closed: bool,
}

struct Shared<J: Job> {
    queue: Mutex<Queue<J>>,
    wake: Condvar,
}

/// The helper thread of a run and its queue of jobs, done in submission
/// order.
pub struct Prerecorder<J: Job = KernelJob> {
    shared: Arc<Shared<J>>,
    helper: Mutex<Option<JoinHandle<()>>>,
    /// False on a machine of one core: jobs are done where they are taken.
    enabled: bool,
}

/// A submitted job's place in the queue; [`Ticket::take`] gives its
/// output.
pub struct Ticket<J: Job = KernelJob> {
    slot: Arc<Slot<J>>,
    shared: Arc<Shared<J>>,
}

impl<J: Job> Default for Prerecorder<J> {
    /// With a helper when this machine has more than one core (asked once
    /// per process: the answer reads the affinity mask and cgroup files).
    fn default() -> Self {
        Self::new(crate::cores::more_than_one_core())
    }
}

impl<J: Job> Prerecorder<J> {
    /// With a helper thread (started on first use) when `enabled`.
    pub fn new(enabled: bool) -> Self {
        Prerecorder {
            shared: Arc::new(Shared {
                queue: Mutex::new(Queue {
                    slots: VecDeque::new(),
                    closed: false,
                }),
                wake: Condvar::new(),
            }),
            helper: Mutex::new(None),
            enabled,
        }
    }

    /// Queue `job` for the helper.
    pub fn submit(&self, job: J) -> Ticket<J> {
        let slot = Arc::new(Slot {
            state: Mutex::new(State::Waiting(Box::new(job))),
            made: Condvar::new(),
        });
        let ticket = Ticket {
            slot: slot.clone(),
            shared: self.shared.clone(),
        };
        if !self.enabled {
            return ticket;
        }
        let mut helper = self.helper.lock().unwrap();
        if helper.is_none() {
            let shared = self.shared.clone();
            *helper = std::thread::Builder::new()
                .name("kernel-recorder".into())
                .spawn(move || {
                    while let Some((slot, job)) = shared.next_job(true) {
                        slot.make(job);
                    }
                })
                .ok();
        }
        self.shared.queue.lock().unwrap().slots.push_back(slot);
        self.shared.wake.notify_one();
        ticket
    }
}

impl<J: Job> Drop for Prerecorder<J> {
    fn drop(&mut self) {
        {
            let mut q = self.shared.queue.lock().unwrap();
            q.closed = true;
            q.slots.clear();
        }
        self.shared.wake.notify_all();
        if let Some(h) = self.helper.lock().unwrap().take() {
            let _ = h.join();
        }
    }
}

impl<J: Job> Shared<J> {
    /// The oldest queued job nobody has started, marked as started;
    /// `wait` for one when there is none (`None` once the queue closes).
    fn next_job(&self, wait: bool) -> Option<(Arc<Slot<J>>, Box<J>)> {
        let mut q = self.queue.lock().unwrap();
        loop {
            if q.closed {
                return None;
            }
            match q.slots.pop_front() {
                Some(slot) => {
                    // None: the engine thread took it itself.
                    let job = slot.state.lock().unwrap().claim();
                    if let Some(job) = job {
                        return Some((slot, job));
                    }
                }
                None if wait => q = self.wake.wait(q).unwrap(),
                None => return None,
            }
        }
    }
}

impl<J: Job> Slot<J> {
    /// Do `job` against a budget of its own; leave the output here.
    fn make(&self, job: Box<J>) {
        let own = Arc::new(MemoryBudget::unlimited());
        let output = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run(&own))).ok();
        let made = Made {
            job,
            output,
            peak: own.peak(),
            held: own.in_use(),
        };
        *self.state.lock().unwrap() = State::Made(Box::new(made));
        self.made.notify_all();
    }
}

impl<J: Job> Ticket<J> {
    /// The job's output, on the engine thread, its memory charged to
    /// `budget` as if it were done now (`who` names it if refused). While
    /// the helper is on it, the engine thread does the next queued job
    /// rather than wait idle.
    pub fn take(self, budget: &Arc<MemoryBudget>, who: impl std::fmt::Display) -> J::Output {
        let mut st = self.slot.state.lock().unwrap();
        loop {
            match std::mem::replace(&mut *st, State::Taken) {
                State::Waiting(job) => {
                    drop(st);
                    return job.run(budget);
                }
                State::Running => {
                    *st = State::Running;
                    drop(st);
                    match self.shared.next_job(false) {
                        Some((slot, job)) => slot.make(job),
                        None => drop(self.done_elsewhere()),
                    }
                    st = self.slot.state.lock().unwrap();
                }
                State::Made(made) => {
                    drop(st);
                    return made
                        .accept(budget, who)
                        .unwrap_or_else(|job| job.run(budget));
                }
                State::Taken => unreachable!("a ticket is taken once"),
            }
        }
    }

    /// Have the job made, not taken: do queued jobs on this thread, as
    /// the helper does, until this one is made. For a caller about to
    /// take its tickets where waiting costs more than here (a split run's
    /// windows, where a partition that records stalls every other one at
    /// the next window).
    pub fn make_ahead(&self) {
        loop {
            if matches!(
                &*self.slot.state.lock().unwrap(),
                State::Made(_) | State::Taken
            ) {
                return;
            }
            if let Some((slot, job)) = self.shared.next_job(false) {
                slot.make(job);
                continue;
            }
            // Nothing queued: the helper is on this one, or (a machine of
            // one core) it was never queued.
            let job = self.done_elsewhere().claim();
            if let Some(job) = job {
                self.slot.make(job);
            }
            return;
        }
    }

    /// The job's state once no thread is doing it (the helper, or another
    /// thread helping, may be).
    fn done_elsewhere(&self) -> std::sync::MutexGuard<'_, State<J>> {
        let mut st = self.slot.state.lock().unwrap();
        while let State::Running = &*st {
            st = self.slot.made.wait(st).unwrap();
        }
        st
    }
}

impl<J: Job> Made<J> {
    /// The output, when the engine thread would have made the same (its
    /// memory charged to and released from `budget`); else the job, to
    /// do again.
    fn accept(
        self,
        budget: &MemoryBudget,
        who: impl std::fmt::Display,
    ) -> Result<J::Output, Box<J>> {
        let clean = self.held == 0 && self.output.as_ref().is_some_and(J::clean);
        if !clean
            || budget
                .charge(MemoryUse::GuestMemory, self.peak, who)
                .is_err()
        {
            return Err(self.job);
        }
        budget.release(MemoryUse::GuestMemory, self.peak);
        Ok(self.output.expect("a clean output"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Charges `memory` while it runs and keeps `keep` charged (as captured
    /// output is); notes each run and whether it was on the helper.
    struct Fake {
        n: u32,
        memory: u64,
        keep: u64,
        fail: bool,
        panic_ahead: bool,
        runs: Arc<Mutex<Vec<(u32, bool)>>>,
    }

    impl Job for Fake {
        type Output = Result<u32, String>;

        fn run(&self, budget: &Arc<MemoryBudget>) -> Self::Output {
            let ahead = std::thread::current().name() == Some("kernel-recorder");
            self.runs.lock().unwrap().push((self.n, ahead));
            if ahead && self.panic_ahead {
                panic!("fake job {} panics on the helper", self.n);
            }
            budget
                .charge(MemoryUse::GuestMemory, self.memory, "fake")
                .map_err(|e| e.to_string())?;
            budget.release(MemoryUse::GuestMemory, self.memory);
            if self.keep > 0 {
                budget
                    .charge(MemoryUse::GuestOutput, self.keep, "fake")
                    .map_err(|e| e.to_string())?;
            }
            if self.fail {
                return Err(format!("job {} failed", self.n));
            }
            Ok(self.n)
        }

        fn clean(output: &Self::Output) -> bool {
            output.is_ok()
        }
    }

    fn fake(n: u32, runs: &Arc<Mutex<Vec<(u32, bool)>>>) -> Fake {
        Fake {
            n,
            memory: 10 * (n as u64 % 7 + 1),
            keep: 0,
            fail: false,
            panic_ahead: false,
            runs: runs.clone(),
        }
    }

    /// Wait until the helper has done the job behind `t`.
    fn made<J: Job>(t: &Ticket<J>) {
        for _ in 0..10_000 {
            if let State::Made(_) = &*t.slot.state.lock().unwrap() {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("the helper never did the job");
    }

    /// Fake jobs `0..n` submitted to a prerecorder (with its helper when
    /// `enabled`), noting their runs in `runs`.
    fn submitted(
        enabled: bool,
        n: u32,
        runs: &Arc<Mutex<Vec<(u32, bool)>>>,
    ) -> (Prerecorder<Fake>, Vec<Ticket<Fake>>) {
        let p = Prerecorder::new(enabled);
        let tickets = (0..n).map(|n| p.submit(fake(n, runs))).collect();
        (p, tickets)
    }

    #[test]
    fn outputs_come_in_submission_order_charged_where_they_are_taken() {
        for enabled in [true, false] {
            let runs = Arc::default();
            let (_p, tickets) = submitted(enabled, 300, &runs);
            let budget = Arc::new(MemoryBudget::new(1000));
            for (n, t) in tickets.into_iter().enumerate() {
                assert_eq!(t.take(&budget, "fake"), Ok(n as u32));
            }
            assert_eq!(
                (budget.peak(), budget.in_use()),
                (70, 0),
                "the most one job held"
            );
            let runs = runs.lock().unwrap();
            assert_eq!(runs.len(), 300, "each job done once: {runs:?}");
            assert!(enabled || runs.iter().all(|r| !r.1), "no helper: {runs:?}");
        }
    }

    #[test]
    fn jobs_made_ahead_are_taken_without_running_again() {
        for enabled in [true, false] {
            let runs = Arc::default();
            let (_p, tickets) = submitted(enabled, 100, &runs);
            for t in tickets.iter().rev() {
                t.make_ahead();
                assert!(matches!(&*t.slot.state.lock().unwrap(), State::Made(_)));
            }
            assert_eq!(runs.lock().unwrap().len(), 100, "each job done once");
            let budget = Arc::new(MemoryBudget::new(1000));
            for (n, t) in tickets.into_iter().enumerate() {
                assert_eq!(t.take(&budget, "fake"), Ok(n as u32));
            }
            assert_eq!(
                runs.lock().unwrap().len(),
                100,
                "none done again: {enabled}"
            );
            assert_eq!(budget.in_use(), 0);
        }
    }

    #[test]
    fn a_job_the_run_budget_would_refuse_is_done_again_where_it_is_taken() {
        let runs = Arc::default();
        let p = Prerecorder::new(true);
        let mut big = fake(1, &runs);
        big.memory = 150;
        let t = p.submit(big);
        made(&t);
        let budget = Arc::new(MemoryBudget::new(100));
        let e = t.take(&budget, "fake").unwrap_err();
        assert!(e.contains("exhausted"), "{e}");
        assert_eq!(*runs.lock().unwrap(), [(1, true), (1, false)]);
        assert_eq!(budget.in_use(), 0);
    }

    #[test]
    fn failed_panicking_or_output_holding_jobs_are_done_again_where_taken() {
        let runs = Arc::default();
        let p = Prerecorder::new(true);
        let mut failing = fake(1, &runs);
        failing.fail = true;
        let mut talking = fake(2, &runs);
        talking.keep = 5;
        let mut panicking = fake(3, &runs);
        panicking.panic_ahead = true;
        let tickets = [failing, talking, panicking].map(|j| p.submit(j));
        tickets.iter().for_each(made);
        let budget = Arc::new(MemoryBudget::new(1000));
        let [a, b, c] = tickets.map(|t| t.take(&budget, "fake"));
        assert_eq!((a, b, c), (Err("job 1 failed".into()), Ok(2), Ok(3)));
        assert_eq!(
            budget.in_use(),
            5,
            "the output kept by the run on this thread"
        );
        let mut runs = runs.lock().unwrap().clone();
        runs.sort();
        assert_eq!(
            runs,
            [
                (1, false),
                (1, true),
                (2, false),
                (2, true),
                (3, false),
                (3, true)
            ]
        );
    }
}
