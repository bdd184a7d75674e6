//! The default process group of a run (seed ADR-0047): the ranks and the
//! PEs that run them, the IPCQ wiring installed for them, and one
//! [`Backend`] per collective — the algorithm component serving it, with
//! its ccl.yaml parameters and the kernel arguments it gave for each call
//! shape — plus the epoch barrier every collective call joins
//! ([`super::epochs`]) and its unmatched point-to-point calls
//! ([`super::p2p`]). How a backend is chosen and how a call runs is
//! [`super::collective`]'s.

use super::kernel::AlgorithmComponent;
use crate::ccl::collective::{Call, Collective};
use crate::ccl::ranks::RankMap;
use crate::ccl::tables::NeighbourTables;
use crate::config::ccl::{InstallKeys, ParamValue, Validator};
use crate::hw::machine::{CommId, IpcqSettings};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// What a refused call wanted, to name the algorithms that do it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Wanted {
    pub call: Call,
    /// Shards of its tensors.
    pub shards: u32,
    /// Its output apart from its input (nccl-tests' out-of-place form).
    pub out_of_place: bool,
}

/// One algorithm serving collectives of the process group.
pub struct Backend {
    /// Its ccl.yaml entry name.
    pub algorithm: String,
    pub component: AlgorithmComponent,
    /// The collectives its component implements.
    pub collectives: Vec<Collective>,
    /// Those of all-reduce, broadcast and reduce its kernels also run out
    /// of place (its `out-of-place` export): their calls get `out-ptr`.
    pub out_of_place: Vec<Collective>,
    /// `topo-name-to-kind` of the SIP topology.
    pub sip_topo_kind: i32,
    /// The shard-layout check of ccl.yaml's `validator`.
    pub validator: Option<Validator>,
    /// ccl.yaml's algorithm parameters, passed to `kernel-args-for`.
    pub params: Vec<(String, ParamValue)>,
    /// Its install keys (the IPCQ it needs).
    pub keys: InstallKeys,
    /// The neighbour tables it needs, after its `neighbors` rewrite.
    pub tables: NeighbourTables,
    /// The world size its entry gives.
    pub world_size: u32,
    kernel_args: Mutex<HashMap<Call, Vec<i64>>>,
}

impl Backend {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        algorithm: String,
        component: AlgorithmComponent,
        collectives: Vec<Collective>,
        out_of_place: Vec<Collective>,
        sip_topo_kind: i32,
        keys: InstallKeys,
        tables: NeighbourTables,
        world_size: u32,
        params: Vec<(String, ParamValue)>,
    ) -> Backend {
        Backend {
            algorithm,
            component,
            collectives,
            out_of_place,
            sip_topo_kind,
            validator: keys.validator,
            params,
            keys,
            tables,
            world_size,
            kernel_args: Mutex::new(HashMap::new()),
        }
    }

    /// Whether its kernels for `c` take an output buffer of their own
    /// (`out-ptr` after the host's four values).
    pub fn separate_output(&self, c: Collective) -> bool {
        !c.in_place() || self.out_of_place.contains(&c)
    }

    /// The kernel arguments it gave for `call` before, if any.
    pub fn cached_args(&self, call: &Call) -> Option<Vec<i64>> {
        self.kernel_args.lock().unwrap().get(call).cloned()
    }

    pub fn cache_args(&self, call: Call, args: Vec<i64>) {
        self.kernel_args.lock().unwrap().insert(call, args);
    }

    /// The IPCQ slots its install keys ask for.
    pub fn ipcq_settings(&self) -> IpcqSettings {
        let k = &self.keys;
        IpcqSettings {
            buffer_kind: k.buffer_kind,
            n_slots: k.n_slots,
            slot_size: k.slot_size,
            strict: k.strict_validation,
            poll_interval: k.poll_interval_ns.map(crate::units::ns_to_ps),
        }
    }

    /// Why `self` cannot serve the process group installed for
    /// `installed`: its ranks differ (world size or mapper), or None. Its
    /// IPCQ tables are added to the installed ones, if they fit
    /// ([`crate::hw::Machine::extend_ipcq`]).
    pub fn rank_mismatch(&self, installed: &Backend) -> Option<String> {
        let key = |what: &str, mine: String, theirs: String| {
            Some(format!(
                "its {what} is {mine}, the installed '{}' has {theirs}",
                installed.algorithm
            ))
        };
        if self.world_size != installed.world_size {
            return key(
                "world size",
                self.world_size.to_string(),
                installed.world_size.to_string(),
            );
        }
        if self.keys.mapper != installed.keys.mapper {
            return key(
                "mapper",
                format!("{:?}", self.keys.mapper),
                format!("{:?}", installed.keys.mapper),
            );
        }
        None
    }
}

/// A process group: the default one, installed by `init_process_group`,
/// or one of `new_group`'s, with its own communicator.
pub struct ProcessGroup {
    /// The algorithm installed at `init_process_group` (the all-reduce
    /// algorithm of ccl.yaml or the command line): its IPCQ is the group's.
    pub algorithm: String,
    /// Its communicator: the IPCQ its kernels send and receive on.
    pub comm: CommId,
    pub world_size: u32,
    pub sip_topo_wh: (u32, u32),
    /// Which PEs run each rank's kernels.
    pub ranks: RankMap,
    /// The backend installed at init.
    pub installed: Arc<Backend>,
    /// The algorithm the bench asked for when it made the group
    /// (`init_process_group`'s or `new_group`'s `pg_options`; a group
    /// without one inherits the default group's): a binding candidate of
    /// every collective the group calls.
    pub wanted: Option<String>,
    /// The backend of each collective, chosen at its first call.
    pub(super) backends: Mutex<BTreeMap<Collective, Arc<Backend>>>,
    /// The epoch barrier its collective calls join.
    pub(super) epochs: super::epochs::Epochs,
    /// Unmatched `send` / `recv` calls.
    pub(super) p2p: super::p2p::P2pQueues,
    /// Each rank's stream of calls on the group (see [`super::works`]).
    pub(super) streams: super::works::Streams,
    /// The algorithms that do a call one refused (found once for every
    /// rank that meets the refusal), by the refusing algorithm and what
    /// the call wanted.
    pub(super) alternatives: Mutex<HashMap<(String, Wanted), Vec<String>>>,
}

impl ProcessGroup {
    pub fn new(
        comm: CommId,
        sip_topo_wh: (u32, u32),
        ranks: RankMap,
        (installed, wanted): (Arc<Backend>, Option<String>),
    ) -> ProcessGroup {
        let world_size = ranks.world_size;
        ProcessGroup {
            algorithm: installed.algorithm.clone(),
            comm,
            world_size,
            sip_topo_wh,
            ranks,
            installed,
            wanted,
            backends: Mutex::new(BTreeMap::new()),
            epochs: super::epochs::Epochs::new(world_size),
            p2p: Default::default(),
            streams: Default::default(),
            alternatives: Default::default(),
        }
    }

    /// The algorithm that served each collective called so far.
    pub fn backend_names(&self) -> BTreeMap<String, String> {
        self.backends
            .lock()
            .unwrap()
            .iter()
            .map(|(c, b)| (c.name().to_string(), b.algorithm.clone()))
            .collect()
    }

    /// What the ranks are waiting for in unfinished collectives and
    /// point-to-point calls.
    pub fn waiting_report(&self) -> Vec<String> {
        let mut lines = self.epochs.waiting_report();
        lines.extend(self.p2p.waiting_report());
        lines
    }
}
