//! Asynchronous `torch.distributed` calls (`async_op=True`, WIT 0.8.3):
//! the handle a call returns (PyTorch's `Work`) and how the call ended,
//! and each rank's stream on a process group, which orders its calls.
//!
//! **Streams.** A rank's calls on one group run in its issue order, each
//! after the one before it has ended on every rank of the group (its
//! `all_done`, as a blocking call returns): NCCL's communicator stream.
//! So the n-th call of every rank still joins the group's n-th epoch, and
//! a round-robin receive of one call can never take the next call's
//! message. Sends and receives wait for the collectives issued before
//! them but not for each other (PyTorch runs point-to-point calls on
//! streams of their own), so `isend` then `irecv` on two ranks pairs up
//! instead of deadlocking; a collective waits for every send and receive
//! issued before it. Different groups' streams do not wait for each
//! other: their kernels run at once on shared engines and links.
//!
//! A blocking call first waits for its group's stream to drain, then
//! runs as it always has, so a bench that makes no asynchronous call
//! runs exactly as before.

use super::bindings::bench::kernbench::sim::distributed::DistError;
use super::comms::{runtime_error, Caller, CollectiveTensor, Comms};
use super::dist_calls::GroupCall;
use super::fail::{DistFail, DistResult, Fail};
use crate::engine::{self, Event};
use crate::hw::vmap::PlacedTensor;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The simulated nanoseconds a `false` from `work.is-completed` costs the
/// caller: a loop polling it lets simulated time advance (without it the
/// loop would spin at one instant forever).
pub const POLL_NS: u64 = 100;

/// How a call ended.
#[derive(Clone)]
pub enum Outcome {
    Ended,
    Raised(DistError),
    /// A trap's message (`wasmtime::Error` is not `Clone`; a second
    /// `wait` traps with the same words).
    Trap(String),
}

/// Something in flight a guest holds a handle to (a call's `work`, a
/// launch's `launched`): set when it has ended, with its outcome `T`.
pub struct Pending<T> {
    done: Event,
    outcome: Mutex<Option<T>>,
    /// How messages name it: `all_reduce on group 1 by rank 2`.
    pub what: String,
    waited: AtomicBool,
}

/// An asynchronous `torch.distributed` call.
pub type WorkState = Pending<Outcome>;

/// A `torch.launch-async`: the picoseconds it took, or its error.
pub type LaunchState = Pending<Result<u64, String>>;

impl<T: Clone> Pending<T> {
    pub fn new(what: String) -> Arc<Pending<T>> {
        Arc::new(Pending {
            done: Event::new(),
            outcome: Mutex::new(None),
            what,
            waited: AtomicBool::new(false),
        })
    }

    /// It ended with `outcome`.
    pub fn end(&self, outcome: T) {
        *self.outcome.lock().unwrap() = Some(outcome);
        self.done.set();
    }

    /// The event set when it has ended.
    pub fn done(&self) -> &Event {
        &self.done
    }

    pub fn is_completed(&self) -> bool {
        self.done.is_set()
    }

    /// Wait until it has ended: its outcome.
    pub async fn outcome(&self) -> T {
        self.done.wait().await;
        self.waited.store(true, Ordering::Relaxed);
        let outcome = self.outcome.lock().unwrap().clone();
        outcome.expect("set before `done`")
    }

    /// Its outcome if it has ended and nobody waited for it.
    fn unseen(&self) -> Option<T> {
        if self.waited.load(Ordering::Relaxed) {
            return None;
        }
        self.outcome.lock().unwrap().clone()
    }
}

impl Pending<Outcome> {
    /// A call that has already ended (a rank outside the group).
    pub fn ended(what: String) -> Arc<WorkState> {
        let w = WorkState::new(what);
        w.finish(Ok(()));
        w
    }

    /// The call ended with `r`.
    pub fn finish(&self, r: DistResult) {
        self.end(match r {
            Ok(()) => Outcome::Ended,
            Err(Fail::Raised(e)) => Outcome::Raised(e),
            Err(Fail::Trap(e)) => Outcome::Trap(format!("{e:#}")),
        });
    }

    /// Wait until the call has ended: how, as the blocking call would
    /// have returned it.
    pub async fn wait(&self) -> DistResult {
        match self.outcome().await {
            Outcome::Ended => Ok(()),
            Outcome::Raised(e) => Err(DistFail::Raised(e)),
            Outcome::Trap(m) => Err(DistFail::Trap(wasmtime::Error::msg(m))),
        }
    }

    /// Its error, if it failed and nobody waited for it (once it ended).
    pub fn unseen_error(&self) -> Option<String> {
        match self.unseen()? {
            Outcome::Ended => None,
            Outcome::Raised(e) => Some(format!("{e:?}")),
            Outcome::Trap(m) => Some(m),
        }
    }
}

/// The host object behind a guest's `work`.
pub struct Work(pub Arc<WorkState>);

/// The host object behind a guest's `launched`.
pub struct Launched(pub Arc<LaunchState>);

/// A rank's compute stream: its launches and `ahbm.gemm` / `ahbm.busy`,
/// each starting when the one before it has ended (a CUDA stream's
/// order), beside its groups' streams.
#[derive(Default)]
pub struct ComputeStream {
    tail: Option<Event>,
}

impl ComputeStream {
    /// Queue work whose end sets `ends`: what it waits for first.
    pub fn enqueue(&mut self, ends: &Event) -> Option<Event> {
        self.tail.replace(ends.clone()).filter(|e| !e.is_set())
    }

    /// What blocking work waits for first: the last queued, if running.
    pub fn pending(&self) -> Option<Event> {
        self.tail.clone().filter(|e| !e.is_set())
    }
}

/// The streams of one process group: per caller (its world rank; `None`
/// the single driver), the end of its last collective and of the sends
/// and receives issued since.
#[derive(Default)]
pub struct Streams {
    tails: Mutex<BTreeMap<Option<u32>, Tail>>,
}

#[derive(Default)]
struct Tail {
    collective: Option<Event>,
    p2p: Vec<Event>,
}

impl Streams {
    /// Queue a call of `rank` (`p2p`: a send or receive) whose end sets
    /// `ends`: the events it must wait for before it starts.
    pub fn enqueue(&self, rank: Option<u32>, p2p: bool, ends: &Event) -> Vec<Event> {
        let mut tails = self.tails.lock().unwrap();
        let tail = tails.entry(rank).or_default();
        tail.p2p.retain(|e| !e.is_set());
        let collective = tail.collective.iter().filter(|e| !e.is_set()).cloned();
        if p2p {
            let after = collective.collect();
            tail.p2p.push(ends.clone());
            after
        } else {
            let after = collective.chain(tail.p2p.drain(..)).collect();
            tail.collective = Some(ends.clone());
            after
        }
    }

    /// What a blocking call of `rank` waits for first: every call it
    /// issued on the group before and that has not ended.
    pub fn pending(&self, rank: Option<u32>) -> Vec<Event> {
        let tails = self.tails.lock().unwrap();
        let Some(tail) = tails.get(&rank) else {
            return Vec::new();
        };
        tail.collective
            .iter()
            .chain(&tail.p2p)
            .filter(|e| !e.is_set())
            .cloned()
            .collect()
    }
}

/// Wait for everything an instance left in flight — its asynchronous
/// calls and launches (a bench may return without waiting, as a PyTorch
/// script may exit; they still run to their end, and their time counts):
/// the first error nobody waited for, as the blocking call would have
/// failed the bench.
pub async fn drain(works: &[Arc<WorkState>], launches: &[Arc<LaunchState>]) -> Result<(), String> {
    for e in works
        .iter()
        .map(|w| w.done())
        .chain(launches.iter().map(|l| l.done()))
    {
        e.wait().await;
    }
    let calls = works
        .iter()
        .find_map(|w| Some((&w.what, w.unseen_error()?)));
    let launched = || {
        launches
            .iter()
            .find_map(|l| Some((&l.what, l.unseen()?.err()?)))
    };
    match calls.or_else(launched) {
        Some((what, e)) => Err(format!(
            "the asynchronous {what} failed and was never waited for: {e}"
        )),
        None => Ok(()),
    }
}

impl Comms {
    /// Wait until `who`'s earlier asynchronous calls on its group have
    /// ended: a blocking call runs after them.
    pub async fn settle(&self, who: &Caller) {
        for e in who.group.streams.pending(who.rank) {
            e.wait().await;
        }
    }

    /// Queue `call` (checked) of `who` on its group's stream and run it
    /// when its turn comes, with `keep` (its tensors' memory) held until
    /// it ends; `state` learns how it ended.
    pub fn issue_async(
        self: &Arc<Self>,
        who: Caller,
        (call, tensors, op): (GroupCall, Vec<CollectiveTensor>, String),
        keep: Vec<Arc<PlacedTensor>>,
        state: Arc<WorkState>,
    ) -> Result<(), DistError> {
        if self.machine.partitions() > 1 {
            // A split run runs one collective's kernels to their end at a
            // time; asynchronous calls overlap.
            let why = "asynchronous calls overlap their collectives".to_string();
            self.machine.give_up_split(why.clone());
            return Err(runtime_error(format!("split run given up: {why}")));
        }
        let after = who
            .group
            .streams
            .enqueue(who.rank, call.is_p2p(), state.done());
        self.timelines.note_overlap();
        let comms = self.clone();
        engine::spawn_detached(async move {
            for e in after {
                e.wait().await;
            }
            let r = comms.run_group_call(&who, &call, tensors, &op).await;
            drop(keep);
            state.finish(r);
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A collective waits for everything before it; a send or receive
    /// only for the collective before it; ended calls are not waited for.
    #[test]
    fn a_stream_orders_collectives_after_everything_and_p2p_after_collectives() {
        let s = Streams::default();
        let (c1, p1, p2, c2) = (Event::new(), Event::new(), Event::new(), Event::new());
        assert!(s.enqueue(Some(0), false, &c1).is_empty());
        let ids = |v: Vec<Event>| v.iter().map(Event::identity).collect::<Vec<_>>();
        assert_eq!(ids(s.enqueue(Some(0), true, &p1)), vec![c1.identity()]);
        assert_eq!(ids(s.enqueue(Some(0), true, &p2)), vec![c1.identity()]);
        // Another rank's stream is its own.
        assert!(s.pending(Some(1)).is_empty());
        assert_eq!(s.pending(Some(0)).len(), 3);
        p1.set();
        assert_eq!(
            ids(s.enqueue(Some(0), false, &c2)),
            vec![c1.identity(), p2.identity()]
        );
        c1.set();
        p2.set();
        assert_eq!(ids(s.pending(Some(0))), vec![c2.identity()]);
        c2.set();
        assert!(s.pending(Some(0)).is_empty());
    }
}
