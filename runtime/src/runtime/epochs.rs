//! The epoch barrier of a process group's collectives (seed 004 D7): each
//! rank's n-th collective call joins epoch n; every rank must make the
//! same call there; the epoch ends when every rank has joined and every
//! kernel launched for it has finished, and is forgotten when every rank
//! has returned.
//!
//! [`Epochs`] owns that bookkeeping and nothing else: it launches no
//! kernel and waits for nothing (it hands out the events to wait on). How
//! a call runs is [`super::collective`]'s.

use super::split_run::SplitLaunch;
use crate::ccl::collective::Call;
use crate::engine::Event;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

/// The errors of an epoch's kernels, shared by every kernel's task.
pub(super) type EpochErrors = Arc<Mutex<Vec<String>>>;

struct Epoch {
    /// The call of the first rank to join: every rank must make the same.
    call: Option<Call>,
    /// The rank that made it.
    first: u32,
    joined: BTreeSet<u32>,
    all_joined: Event,
    /// The completion of every kernel launched so far; handed to the last
    /// rank to join.
    kernels_done: Vec<Event>,
    /// Set once every rank has joined and every kernel has finished: what
    /// each rank waits for (one event, not every kernel's: a rank waiting
    /// on each was O(world size²) at the end of every collective).
    all_done: Event,
    errors: EpochErrors,
    returned: u32,
    /// On a split machine, the launches kept until every rank has joined
    /// (see [`super::split_run`]).
    split: Vec<SplitLaunch>,
}

impl Epoch {
    fn new() -> Self {
        Epoch {
            call: None,
            first: 0,
            joined: BTreeSet::new(),
            all_joined: Event::new(),
            kernels_done: Vec::new(),
            all_done: Event::new(),
            errors: EpochErrors::default(),
            returned: 0,
            split: Vec::new(),
        }
    }
}

/// A caller's epoch: its number and where its kernels put their errors.
pub(super) struct Entered {
    pub id: u64,
    pub errors: EpochErrors,
}

/// What a caller that has launched its kernels waits on; the last rank to
/// join also gets what ends the epoch.
pub(super) struct Joined {
    pub all_joined: Event,
    pub all_done: Event,
    /// For the last rank to join: every kernel's completion and the split
    /// launches. It sets `all_done` when they have ended.
    pub last: Option<(Vec<Event>, Vec<SplitLaunch>)>,
}

/// The epochs of one process group of `world_size` ranks.
pub(super) struct Epochs {
    world_size: u32,
    open: Mutex<BTreeMap<u64, Epoch>>,
    /// Each rank's next epoch.
    next: Mutex<HashMap<u32, u64>>,
}

impl Epochs {
    pub(super) fn new(world_size: u32) -> Self {
        Epochs {
            world_size,
            open: Mutex::new(BTreeMap::new()),
            next: Mutex::new(HashMap::new()),
        }
    }

    /// `ranks` (one caller's: a worker's rank, or every rank the single
    /// driver stands for) enter their next epoch with `call`. Refused,
    /// with a message naming both calls, when a rank before them made
    /// another call in that epoch.
    pub(super) fn enter(&self, ranks: &[u32], call: Call) -> Result<Entered, String> {
        let id = {
            let mut next = self.next.lock().unwrap();
            let id = *next.entry(ranks[0]).or_insert(0);
            for r in ranks {
                next.insert(*r, id + 1);
            }
            id
        };
        let mut open = self.open.lock().unwrap();
        let ep = open.entry(id).or_insert_with(Epoch::new);
        match ep.call {
            None => {
                ep.call = Some(call);
                ep.first = ranks[0];
            }
            Some(first) if first != call => {
                return Err(format!(
                    "collective #{id}: rank {} calls {} ({} elements per block) but rank {} \
                     called {} ({} elements per block): every rank must make the same collective \
                     calls, in the same order, with the same sizes, dtype, op and root",
                    ranks[0],
                    call.describe(),
                    call.block,
                    ep.first,
                    first.describe(),
                    first.block
                ));
            }
            Some(_) => {}
        }
        Ok(Entered {
            id,
            errors: ep.errors.clone(),
        })
    }

    /// `ranks` have launched their kernels for epoch `id` (`launched`:
    /// their completions; `split`: the launches a split machine runs once
    /// every rank has joined). When they are the last to join,
    /// `all_joined` is set and they get what ends the epoch.
    pub(super) fn join(
        &self,
        id: u64,
        ranks: &[u32],
        launched: Vec<Event>,
        split: Vec<SplitLaunch>,
    ) -> Joined {
        let mut open = self.open.lock().unwrap();
        let ep = open.get_mut(&id).expect("a caller enters before it joins");
        ep.joined.extend(ranks.iter().copied());
        ep.kernels_done.extend(launched);
        ep.split.extend(split);
        let last = (ep.joined.len() as u32 == self.world_size).then(|| {
            ep.all_joined.set();
            (
                std::mem::take(&mut ep.kernels_done),
                std::mem::take(&mut ep.split),
            )
        });
        Joined {
            all_joined: ep.all_joined.clone(),
            all_done: ep.all_done.clone(),
            last,
        }
    }

    /// `n` ranks of epoch `id` have returned; it is forgotten when every
    /// rank has.
    pub(super) fn leave(&self, id: u64, n: u32) {
        let mut open = self.open.lock().unwrap();
        let ep = open
            .get_mut(&id)
            .expect("a caller leaves the epoch it joined");
        ep.returned += n;
        if ep.returned == self.world_size {
            open.remove(&id);
        }
    }

    /// The epochs some rank has not joined yet, for the deadlock report.
    pub(super) fn waiting_report(&self) -> Vec<String> {
        let open = self.open.lock().unwrap();
        open.iter()
            .filter(|(_, e)| (e.joined.len() as u32) < self.world_size)
            .map(|(id, e)| {
                let missing: Vec<String> = (0..self.world_size)
                    .filter(|r| !e.joined.contains(r))
                    .map(|r| r.to_string())
                    .collect();
                format!(
                    "collective #{id} ({}): ranks {:?} joined; waiting for rank(s) {} to call it",
                    e.call.map_or("?".into(), |c| c.describe()),
                    e.joined,
                    missing.join(", ")
                )
            })
            .collect()
    }

    /// Epochs not yet forgotten.
    #[cfg(test)]
    fn open(&self) -> usize {
        self.open.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccl::collective::{Collective, RedOp};
    use crate::hw::dtype::Dtype;

    fn call(c: Collective, block: u64) -> Call {
        Call {
            collective: c,
            dtype: Dtype::F32,
            op: RedOp::Sum,
            root: 0,
            block,
            world_size: 2,
        }
    }

    /// Each rank's n-th call joins epoch n, whatever the order in which
    /// the ranks make their calls.
    #[test]
    fn each_rank_s_nth_call_joins_epoch_n() {
        let e = Epochs::new(2);
        let ar = call(Collective::AllReduce, 8);
        assert_eq!(e.enter(&[0], ar).unwrap().id, 0);
        assert_eq!(e.enter(&[0], ar).unwrap().id, 1);
        assert_eq!(e.enter(&[1], ar).unwrap().id, 0);
        assert_eq!(e.enter(&[1], ar).unwrap().id, 1);
        // The single driver stands for every rank.
        let d = Epochs::new(4);
        assert_eq!(d.enter(&[0, 1, 2, 3], ar).unwrap().id, 0);
        assert_eq!(d.enter(&[0, 1, 2, 3], ar).unwrap().id, 1);
    }

    /// A rank that makes another call than the first rank of its epoch
    /// is refused, with both calls and ranks named.
    #[test]
    fn a_rank_that_calls_another_collective_is_refused() {
        let e = Epochs::new(2);
        e.enter(&[1], call(Collective::AllReduce, 8)).unwrap();
        let err = e
            .enter(&[0], call(Collective::AllGather, 8))
            .err()
            .expect("refused");
        assert!(
            err.starts_with("collective #0: rank 0 calls all_gather"),
            "{err}"
        );
        assert!(err.contains("but rank 1 called all_reduce"), "{err}");
        let bigger = e.enter(&[0], call(Collective::AllReduce, 16));
        assert!(bigger.is_ok(), "its next call is its epoch 1, a new one");
    }

    /// Only the last rank to join sets `all_joined` and gets every
    /// kernel's completion; the epoch is forgotten when every rank has
    /// returned, and the report names who has not joined.
    #[test]
    fn the_last_rank_to_join_ends_the_epoch() {
        let e = Epochs::new(3);
        let ar = call(Collective::AllReduce, 8);
        let k: Vec<Event> = (0..3).map(|_| Event::new()).collect();
        let a = e.enter(&[2], ar).unwrap();
        let first = e.join(a.id, &[2], vec![k[2].clone()], Vec::new());
        assert!(first.last.is_none() && !first.all_joined.is_set());
        let report = e.waiting_report();
        assert_eq!(report.len(), 1);
        assert!(report[0].contains("waiting for rank(s) 0, 1"), "{report:?}");
        let b = e.enter(&[0, 1], ar).unwrap();
        assert_eq!(b.id, a.id);
        let last = e.join(b.id, &[0, 1], vec![k[0].clone(), k[1].clone()], Vec::new());
        assert!(last.all_joined.is_set());
        let (kernels, split) = last.last.expect("the last to join ends it");
        assert_eq!((kernels.len(), split.len()), (3, 0));
        assert!(e.waiting_report().is_empty());
        e.leave(a.id, 1);
        assert_eq!(e.open(), 1);
        e.leave(a.id, 2);
        assert_eq!(e.open(), 0);
    }
}
