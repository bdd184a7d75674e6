//! The process groups `dist.new_group(ranks)` makes (PyTorch's
//! `new_group`): matching every rank's calls — the k-th call of each rank
//! makes, or names, group k (id k; 0 is the default group), and must name
//! the same ranks — and making each group once, with a communicator of
//! its own ([`CommId`]): its algorithm's neighbour tables laid over its
//! ranks as a ring of its size and installed in that communicator. The
//! ranks are sorted, as PyTorch sorts them: group rank g is the g-th
//! smallest world rank of the group.

use super::bindings::bench::kernbench::sim::distributed::DistError;
use super::comms::{runtime_error, Comms};
use super::process_group::ProcessGroup;
use crate::engine::Event;
use crate::hw::machine::CommId;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The most process groups a run may make (each is a communicator with
/// rings on its PEs; a bench that makes groups in a loop is stopped here
/// rather than by the memory budget, saying why).
pub const MAX_GROUPS: usize = 4096;

/// One group, made by the first rank whose call names it.
struct Slot {
    /// Its world ranks, ascending.
    members: Vec<u32>,
    /// The rank that made it (None: the single driver).
    made_by: Option<u32>,
    /// Set when it has been made (or failed to be).
    ready: Event,
    made: OnceLock<Result<Arc<ProcessGroup>, DistError>>,
}

/// The groups of a run and how many `new_group` calls each rank has made.
#[derive(Default)]
pub struct Groups {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    slots: Vec<Arc<Slot>>,
    calls: BTreeMap<Option<u32>, usize>,
}

/// Who names the caller in messages.
fn who(rank: Option<u32>) -> String {
    rank.map_or_else(|| "the driver".to_string(), |r| format!("rank {r}"))
}

/// `e`, of the same kind, its message prefixed with `what: `.
fn with_context(e: &DistError, what: &str) -> DistError {
    match e {
        DistError::ValueError(m) => DistError::ValueError(format!("{what}: {m}")),
        DistError::RuntimeError(m) => DistError::RuntimeError(format!("{what}: {m}")),
        DistError::NotImplemented(m) => DistError::NotImplemented(format!("{what}: {m}")),
    }
}

impl Groups {
    /// Group `id` (1 and up), once it has been made.
    pub fn get(&self, id: u32) -> Result<Arc<ProcessGroup>, DistError> {
        let slot = id
            .checked_sub(1)
            .and_then(|i| self.state.lock().unwrap().slots.get(i as usize).cloned());
        let made = slot.as_ref().and_then(|s| s.made.get());
        match made {
            Some(Ok(pg)) => Ok(pg.clone()),
            Some(Err(e)) => Err(with_context(e, &format!("process group {id}"))),
            None => {
                let n = self.made().len();
                Err(DistError::ValueError(format!(
                    "process group {id} does not exist: new_group has made {n} group(s) (ids \
                     1..={n}; 0 is the default group)"
                )))
            }
        }
    }

    /// Every group made so far, by id.
    pub fn made(&self) -> Vec<(u32, Arc<ProcessGroup>)> {
        let state = self.state.lock().unwrap();
        state
            .slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s.made.get() {
                Some(Ok(pg)) => Some((i as u32 + 1, pg.clone())),
                _ => None,
            })
            .collect()
    }

    /// The slot of `rank`'s next call naming `members` (ascending), and
    /// whether this call makes it.
    fn claim(
        &self,
        rank: Option<u32>,
        members: &[u32],
    ) -> Result<(usize, Arc<Slot>, bool), String> {
        let mut state = self.state.lock().unwrap();
        let k = *state.calls.get(&rank).unwrap_or(&0);
        if let Some(slot) = state.slots.get(k).cloned() {
            if slot.members != members {
                return Err(format!(
                    "{}'s new_group call {} names ranks {members:?}, but {} named {:?} for it: every \
                     rank calls new_group in the same order with the same ranks, members or not \
                     (PyTorch's rule)",
                    who(rank),
                    k + 1,
                    who(slot.made_by),
                    slot.members
                ));
            }
            *state.calls.entry(rank).or_default() += 1;
            return Ok((k, slot, false));
        }
        if state.slots.len() >= MAX_GROUPS {
            return Err(format!(
                "new_group: a run makes at most {MAX_GROUPS} process groups (each has IPCQ rings \
                 of its own); make the groups once and reuse them"
            ));
        }
        let slot = Arc::new(Slot {
            members: members.to_vec(),
            made_by: rank,
            ready: Event::new(),
            made: OnceLock::new(),
        });
        state.slots.push(slot.clone());
        *state.calls.entry(rank).or_default() += 1;
        Ok((k, slot, true))
    }
}

impl Comms {
    /// `new_group(ranks)` called by `rank` (None: the single driver):
    /// the group's id. `wanted` is the algorithm the bench asked for
    /// (`pg_options`), else the one it asked for at `init_process_group`.
    pub async fn new_group(
        &self,
        rank: Option<u32>,
        ranks: Vec<u32>,
        wanted: Option<&str>,
    ) -> Result<u32, DistError> {
        let world = self.process_group()?;
        let mut members = ranks;
        members.sort_unstable();
        world
            .ranks
            .group(&members)
            .map_err(|e| DistError::ValueError(format!("new_group({members:?}): {e}")))?;
        let (k, slot, make) = self.groups.claim(rank, &members).map_err(runtime_error)?;
        let id = k as u32 + 1;
        if make {
            let made = self
                .make_group(CommId(id), &members, wanted)
                .await
                .map(Arc::new);
            let _ = slot.made.set(made);
            slot.ready.set();
        } else {
            slot.ready.wait().await;
        }
        match slot.made.get() {
            Some(Ok(_)) => Ok(id),
            Some(Err(e)) => Err(with_context(e, &format!("new_group({members:?})"))),
            None => unreachable!("set before `ready`"),
        }
    }

    /// Make group `comm` of the world ranks `members`: plan the algorithm
    /// serving its all-reduce on it and install its tables in its own
    /// communicator.
    async fn make_group(
        &self,
        comm: CommId,
        members: &[u32],
        wanted: Option<&str>,
    ) -> Result<ProcessGroup, DistError> {
        if self.machine.partitions() > 1 {
            // A split run runs one collective's kernels to their end at a
            // time; groups run theirs at once.
            let why = "process groups run their collectives at once".to_string();
            self.machine.give_up_split(why.clone());
            return Err(runtime_error(format!("split run given up: {why}")));
        }
        let wanted = wanted
            .map(str::to_string)
            .or_else(|| self.process_group().ok()?.wanted.clone());
        let (name, entry) = self.installed_entry(wanted.as_deref())?;
        let plan = self
            .plan_backend((comm, Some(members)), &name, &entry)
            .await?;
        self.machine
            .install_ipcq(comm, &plan.backend.tables, plan.backend.ipcq_settings())
            .map_err(|e| runtime_error(format!("installing IPCQ for '{name}': {e}")))?;
        Ok(ProcessGroup::new(
            comm,
            (0, 0),
            plan.ranks,
            (Arc::new(plan.backend), wanted),
        ))
    }
}
