//! Recordings kept for the next launch of the same kernel on the same PE.
//!
//! A kernel's recording ([`super::eager`]) is a function of what the guest
//! is given and of what it may ask the host: the component and algorithm,
//! the launch (PE, tensor address, arguments), and the two parts of the
//! machine a recording reads — the address map and the IPCQ tables, which
//! [`Machine::layout_version`] versions (the map per SIP: a rank's
//! allocations do not disturb its neighbours' kept recordings). Nothing
//! else reaches the guest: its sandbox is seeded by its PE, clocks stop a
//! recording, and no `tl` call hands data back. So a launch whose
//! [`LaunchKey`] equals the last one's of its kernel on its PE would
//! record the same calls again; instead it replays the commands kept from
//! that one. A benchmark's timed loop (`-n 20 -w 5`, nccl-tests' habit)
//! launches the same kernels 25 times per size: the 24 after the first
//! skip instantiating and running the guest. The replay is of the same
//! commands, so every table, time and byte is the one a fresh recording
//! gives.
//!
//! Kept: recordings the guest finished without an error and without
//! output (a failing or printing kernel is recorded again, so that its
//! error and output come from a run of the guest) that addressed no other
//! SIP's virtual memory (the key holds its own SIP's map only), and the
//! verdict that a kernel needs simulated time (it then runs in step at
//! once, without a recording attempt first); each only if the layout
//! did not change between the launch and the moment its recording is
//! taken ([`RecordingMemo::keep_if_current`]). One per PE and kernel
//! (component and algorithm: a bench that alternates collectives keeps
//! each one's), the latest: a launch of the same kernel with another key
//! (a new size, a new tensor) replaces it. Kept commands stay charged to
//! the run's budget as recorded kernel calls ([`Commands`]) until no
//! launch and no memo holds them.

use super::commands::CommandList;
use super::kernel::AlgorithmComponent;
use super::limits::RunLimits;
use super::prerecord::{KernelJob, Ticket};
use crate::budget::{BudgetExceeded, MemoryBudget, MemoryUse};
use crate::hw::machine::CommId;
use crate::hw::Machine;
use crate::topology::PeCoord;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Everything a kernel's recording depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchKey {
    component: String,
    algorithm: String,
    pe: PeCoord,
    /// Its communicator: the recording names that communicator's IPCQ
    /// directions, so it is never replayed in another.
    comm: CommId,
    t_ptr: u64,
    args: Vec<i64>,
    /// [`Machine::layout_version`] of the PE's SIP at the launch.
    layout: (u64, u64),
}

impl LaunchKey {
    pub fn new(
        component: &AlgorithmComponent,
        algorithm: &str,
        launch: &super::kernel::KernelLaunch,
        machine: &Machine,
    ) -> Self {
        LaunchKey {
            component: component.name.clone(),
            algorithm: algorithm.to_string(),
            pe: launch.pe,
            comm: launch.comm,
            t_ptr: launch.t_ptr,
            args: launch.args.clone(),
            layout: machine.layout_version(launch.pe.sip),
        }
    }

    fn slot(&self) -> Slot {
        (
            self.pe,
            self.comm,
            self.component.clone(),
            self.algorithm.clone(),
        )
    }
}

/// A recorded kernel's commands, charged to the run's budget (as
/// [`MemoryUse::KernelCommands`]) for as long as anything holds them.
pub struct Commands {
    list: CommandList,
    bytes: u64,
    budget: Arc<MemoryBudget>,
}

impl Commands {
    /// `list`, charged to `budget` on behalf of `who`.
    pub fn charge(
        list: CommandList,
        budget: &Arc<MemoryBudget>,
        who: impl std::fmt::Display,
    ) -> Result<Arc<Commands>, BudgetExceeded> {
        let bytes = list.bytes();
        budget.charge(MemoryUse::KernelCommands, bytes, who)?;
        Ok(Arc::new(Commands {
            list,
            bytes,
            budget: budget.clone(),
        }))
    }

    pub fn list(&self) -> &CommandList {
        &self.list
    }
}

impl Drop for Commands {
    fn drop(&mut self) {
        self.budget.release(MemoryUse::KernelCommands, self.bytes);
    }
}

/// What a launch can take from the memo instead of a recording.
#[derive(Clone)]
pub enum Kept {
    /// Replay these.
    Commands(Arc<Commands>),
    /// The kernel needs simulated time: run it in step.
    InStep,
}

/// How many launches recorded their kernel and how many reused what the
/// recording of an equal launch left (its commands, or that the kernel
/// needs simulated time). Launches of a loader that records nothing
/// (`--in-step-kernels`) count in neither.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordingCounts {
    pub recorded: u64,
    pub reused: u64,
}

/// Where a kept recording is kept: one per PE, communicator and kernel
/// (the process groups of a PE do not evict each other's).
type Slot = (PeCoord, CommId, String, String);

/// The kept recordings of one run, one per PE and kernel.
#[derive(Default)]
pub struct RecordingMemo {
    by_slot: Mutex<FxHashMap<Slot, (LaunchKey, Kept)>>,
    recorded: AtomicU64,
    reused: AtomicU64,
}

impl RecordingMemo {
    /// What was kept for `key`'s PE and kernel, if it was kept for this
    /// very key.
    pub fn find(&self, key: &LaunchKey) -> Option<Kept> {
        let kept = self
            .by_slot
            .lock()
            .unwrap()
            .get(&key.slot())
            .filter(|(k, _)| k == key)
            .map(|(_, kept)| kept.clone());
        if kept.is_some() {
            self.reused.fetch_add(1, Ordering::Relaxed);
        }
        kept
    }

    /// Keep `kept` for `key` (replacing what was kept for its PE and
    /// kernel before) if `now`, the machine's
    /// [`Machine::layout_version`] when the recording is taken, is still
    /// the one `key` was launched with: versions only grow, so the
    /// recording, made between the two, saw that very layout. (A bench
    /// that maps or frees memory on the SIP in the instant of the launch
    /// may have changed it under the recording; such a recording is used
    /// once and not kept.) Whether it was kept.
    pub fn keep_if_current(&self, key: LaunchKey, kept: Kept, now: (u64, u64)) -> bool {
        let current = key.layout == now;
        if current {
            self.keep(key, kept);
        }
        current
    }

    fn keep(&self, key: LaunchKey, kept: Kept) {
        self.by_slot.lock().unwrap().insert(key.slot(), (key, kept));
    }

    pub fn counts(&self) -> RecordingCounts {
        RecordingCounts {
            recorded: self.recorded.load(Ordering::Relaxed),
            reused: self.reused.load(Ordering::Relaxed),
        }
    }
}

/// Where a launched kernel's calls come from.
pub enum Source {
    /// A recording kept from an equal launch.
    Kept(Kept),
    /// A new recording: by the helper thread when `ticket` is given, else
    /// where the kernel's task first runs; kept in `memo` under `key`
    /// when it may be.
    Record {
        ticket: Option<Ticket>,
        memo: Option<(Arc<RecordingMemo>, LaunchKey)>,
    },
}

impl Source {
    /// A recording made where the kernel's task first runs, not kept.
    pub fn record_here() -> Source {
        Source::Record {
            ticket: None,
            memo: None,
        }
    }
}

/// Where the kernel launches of one run get their calls: the run's kept
/// recordings and its helper thread that records ahead. Shared by the
/// collectives and `torch.launch`.
pub struct KernelSources {
    machine: Arc<Machine>,
    limits: RunLimits,
    prerecorder: super::prerecord::Prerecorder,
    recordings: Arc<RecordingMemo>,
}

impl KernelSources {
    pub fn new(machine: Arc<Machine>, limits: RunLimits) -> KernelSources {
        KernelSources {
            machine,
            limits,
            prerecorder: Default::default(),
            recordings: Default::default(),
        }
    }

    /// How many recordings were made and reused.
    pub fn counts(&self) -> RecordingCounts {
        self.recordings.counts()
    }

    /// Where the calls of `component`'s kernel launched as `launch` come
    /// from: a kept recording of an equal launch, else a new recording
    /// queued for the helper thread (and kept for the next launch).
    pub(super) fn source(
        &self,
        component: &AlgorithmComponent,
        algorithm: &str,
        launch: &super::kernel::KernelLaunch,
    ) -> Source {
        if component.eager.is_none() {
            return Source::record_here();
        }
        let key = LaunchKey::new(component, algorithm, launch, &self.machine);
        if let Some(kept) = self.recordings.find(&key) {
            return Source::Kept(kept);
        }
        self.recordings.recorded.fetch_add(1, Ordering::Relaxed);
        let ticket = self.prerecorder.submit(KernelJob {
            component: component.clone(),
            algorithm: algorithm.to_string(),
            machine: self.machine.clone(),
            limits: self.limits.clone(),
            launch: launch.clone(),
        });
        Source::Record {
            ticket: Some(ticket),
            memo: Some((self.recordings.clone(), key)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pe: u32, args: Vec<i64>, layout: (u64, u64)) -> LaunchKey {
        LaunchKey {
            component: "ring_allreduce".into(),
            algorithm: "ring".into(),
            pe: PeCoord {
                sip: pe,
                cube: 0,
                pe: 0,
            },
            comm: CommId::WORLD,
            t_ptr: 1 << 32,
            args,
            layout,
        }
    }

    fn one_store() -> CommandList {
        CommandList::from_commands([super::super::commands::Command::Store { addr: 64, value: 0 }])
    }

    fn commands(budget: &Arc<MemoryBudget>) -> Arc<Commands> {
        Commands::charge(CommandList::default(), budget, "test").unwrap()
    }

    #[test]
    fn a_launch_takes_what_was_kept_for_an_equal_one_on_its_pe() {
        let budget = Arc::new(MemoryBudget::unlimited());
        let memo = RecordingMemo::default();
        let k = key(0, vec![8, 4, 8], (3, 1));
        memo.keep(k.clone(), Kept::Commands(commands(&budget)));
        assert!(matches!(memo.find(&k), Some(Kept::Commands(_))));
        // Another PE, other arguments, a changed address map or IPCQ.
        for other in [
            key(1, vec![8, 4, 8], (3, 1)),
            key(0, vec![8, 4, 16], (3, 1)),
            key(0, vec![8, 4, 8], (4, 1)),
            key(0, vec![8, 4, 8], (3, 2)),
        ] {
            assert!(memo.find(&other).is_none(), "{other:?}");
        }
        assert_eq!(memo.counts().reused, 1);
        // The verdict "needs simulated time" is kept too.
        let k1 = key(1, vec![1], (0, 0));
        memo.keep(k1.clone(), Kept::InStep);
        assert!(matches!(memo.find(&k1), Some(Kept::InStep)));
        // A recording taken after the layout changed is not kept.
        let k2 = key(2, vec![1], (5, 1));
        assert!(!memo.keep_if_current(k2.clone(), Kept::InStep, (6, 1)));
        assert!(memo.find(&k2).is_none());
        assert!(memo.keep_if_current(k2.clone(), Kept::InStep, (5, 1)));
        assert!(memo.find(&k2).is_some());
        // Another kernel on the same PE is kept beside it, not instead.
        let mut other_kernel = k.clone();
        other_kernel.algorithm = "tree".into();
        memo.keep(other_kernel.clone(), Kept::InStep);
        assert!(matches!(memo.find(&k), Some(Kept::Commands(_))));
        assert!(matches!(memo.find(&other_kernel), Some(Kept::InStep)));
        // The same kernel in another process group's communicator: its
        // recording names that group's directions, so it is neither
        // taken for this one nor kept instead of it.
        let mut other_group = k.clone();
        other_group.comm = CommId(1);
        assert!(memo.find(&other_group).is_none());
        memo.keep(other_group.clone(), Kept::InStep);
        assert!(matches!(memo.find(&k), Some(Kept::Commands(_))));
        assert!(matches!(memo.find(&other_group), Some(Kept::InStep)));
    }

    #[test]
    fn kept_commands_are_charged_until_the_last_holder_lets_go() {
        let budget = Arc::new(MemoryBudget::unlimited());
        let c = Commands::charge(one_store(), &budget, "test").unwrap();
        let bytes = c.list().bytes();
        assert!(bytes > 0);
        assert_eq!(budget.used_by(MemoryUse::KernelCommands), bytes);
        let memo = RecordingMemo::default();
        let k = key(0, vec![], (0, 0));
        memo.keep(k.clone(), Kept::Commands(c.clone()));
        drop(c);
        assert_eq!(budget.used_by(MemoryUse::KernelCommands), bytes, "kept");
        // A launch with another key on the same PE replaces it.
        memo.keep(key(0, vec![1], (0, 0)), Kept::InStep);
        assert_eq!(budget.used_by(MemoryUse::KernelCommands), 0, "released");
        assert!(memo.find(&k).is_none());
        // Refused by a budget too small: the launch fails as before.
        let small = Arc::new(MemoryBudget::new(1));
        assert!(Commands::charge(one_store(), &small, "pe").is_err());
    }
}
