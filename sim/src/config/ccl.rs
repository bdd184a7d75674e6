//! `ccl.yaml`: which collective algorithm runs and how its IPCQ is set up
//! (seed ADR-0047 D2/D3, ADR-0050 D6).

use super::Origin;
use crate::ccl::collective::Collective;
use crate::error::ConfigError;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Where IPCQ receive slots live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BufferKind {
    Tcm,
    Sram,
    Hbm,
}

impl BufferKind {
    /// The spelling used in ccl.yaml.
    pub fn name(self) -> &'static str {
        match self {
            BufferKind::Tcm => "tcm",
            BufferKind::Sram => "sram",
            BufferKind::Hbm => "hbm",
        }
    }
}

/// Builtin IPCQ neighbour tables (seed 003 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum NeighbourTopology {
    /// E = rank+1, W = rank-1 (mod world size).
    #[serde(rename = "ring_1d")]
    Ring1d,
    /// E = rank+1 only (receivers see it as W).
    #[serde(rename = "ring_1d_unidir")]
    Ring1dUnidir,
    /// N/S/E/W on the SIP grid, no wrap.
    #[serde(rename = "mesh_2d")]
    Mesh2d,
    /// N/S/E/W on the SIP grid with wrap-around.
    #[serde(rename = "torus_2d")]
    Torus2d,
    /// P → parent, C0 / C1 → children (see [`crate::ccl::tables`]).
    #[serde(rename = "tree_binary")]
    TreeBinary,
    /// The hierarchical install (seed `configure_sfr_intercube_multisip`):
    /// N/S/E/W between the cubes of a SIP, `global_*` between the same
    /// cube of neighbouring SIPs on the SIP network.
    #[serde(rename = "intercube_multisip")]
    IntercubeMultisip,
    /// `R{j}` → participant `j`, for every other participant (received
    /// as `R{i}`): every rank reaches every other directly, over the
    /// routed machine (the tables of direct, tree and recursive
    /// halving–doubling algorithms).
    #[serde(rename = "full_mesh")]
    FullMesh,
    /// No neighbours: the algorithm does not use IPCQ.
    #[serde(rename = "none")]
    None,
}

/// Which PEs of each rank's SIP run the kernel (seed 004 D5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mapper {
    /// One PE per SIP: cube 0, PE 0.
    #[default]
    LeaderOnly,
    /// Every PE of every cube of the SIP.
    AllPes,
    /// PE 0 of every cube of the SIP (one kernel per cube, as the seed's
    /// hierarchical all-reduce runs).
    CubeLeaders,
}

impl Mapper {
    pub fn name(self) -> &'static str {
        match self {
            Mapper::LeaderOnly => "leader_only",
            Mapper::AllPes => "all_pes",
            Mapper::CubeLeaders => "cube_leaders",
        }
    }
}

/// The shard-layout check a collective makes on its tensor before it
/// launches (seed 004 D8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Validator {
    /// Exactly one shard on the rank's SIP.
    SingleShardPerRank,
    /// One shard per PE of the SIP (cubes × PEs per cube).
    MultiPeSipLocal,
    /// One shard per cube of the SIP (a tensor row-wise over the cubes, as
    /// a hierarchical algorithm with one kernel per cube reduces it).
    OneShardPerCube,
}

impl Validator {
    pub fn name(self) -> &'static str {
        match self {
            Validator::SingleShardPerRank => "single_shard_per_rank",
            Validator::MultiPeSipLocal => "multi_pe_sip_local",
            Validator::OneShardPerCube => "one_shard_per_cube",
        }
    }

    /// The shards a rank's tensor must have on its SIP of `spec`.
    pub fn shards_needed(self, spec: &super::TopologySpec) -> u32 {
        match self {
            Validator::SingleShardPerRank => 1,
            Validator::MultiPeSipLocal => spec.cubes_per_sip() * spec.pes_per_cube(),
            Validator::OneShardPerCube => spec.cubes_per_sip(),
        }
    }
}

impl NeighbourTopology {
    /// The spelling used in ccl.yaml.
    pub fn name(self) -> &'static str {
        match self {
            NeighbourTopology::Ring1d => "ring_1d",
            NeighbourTopology::Ring1dUnidir => "ring_1d_unidir",
            NeighbourTopology::Mesh2d => "mesh_2d",
            NeighbourTopology::Torus2d => "torus_2d",
            NeighbourTopology::TreeBinary => "tree_binary",
            NeighbourTopology::IntercubeMultisip => "intercube_multisip",
            NeighbourTopology::FullMesh => "full_mesh",
            NeighbourTopology::None => "none",
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// The algorithm `torch.distributed` uses; may be left out when the
    /// file has exactly one entry (as the seed's snippets do).
    #[serde(default)]
    pub algorithm: String,
    /// The algorithm of each collective (`all_gather: ring_rsag`), by
    /// PyTorch's names; a collective left out uses `algorithm` when that
    /// implements it. `all_reduce` here wins over `algorithm`.
    #[serde(default)]
    pub algorithms: BTreeMap<String, String>,
    pub world_size: Option<u32>,
    /// Accepted for seed compatibility (the seed's default tile size).
    pub n_elem: Option<u64>,
}

/// One `algorithms.<name>` entry.
#[derive(Debug, Clone, Deserialize)]
pub struct AlgorithmEntry {
    pub module: String,
    /// The IPCQ neighbour table; absent: the algorithm's own default
    /// (its `default-topology` export, else `ring_1d`).
    pub topology: Option<NeighbourTopology>,
    /// Where the receive slots live; absent: the algorithm's default, else tcm.
    pub buffer_kind: Option<BufferKind>,
    /// Slots per direction; absent: the algorithm's default, else 4.
    pub n_slots: Option<u32>,
    /// Size of one IPCQ slot in KiB: the largest message a `send` may carry.
    pub slot_kib: Option<u64>,
    /// The same in bytes (the seed's key); give one of the two.
    pub slot_size: Option<u64>,
    /// Absent: the algorithm's default, else `leader_only`.
    pub mapper: Option<Mapper>,
    pub validator: Option<Validator>,
    /// A receive checks the message's shape and dtype, not only its size
    /// (seed 003 §8 item 3; default false).
    pub strict_validation: Option<bool>,
    /// How a sender with no free slot learns of one (default sleep).
    pub backpressure: Option<Backpressure>,
    /// `backpressure: poll`: how often the sender looks (default 100 ns).
    pub poll_interval_ns: Option<f64>,
    pub world_size: Option<u32>,
    /// Accepted for seed compatibility.
    pub n_elem: Option<u64>,
    /// Algorithm parameters (seed 004 D6 `kernel_config`): `chunk_size`,
    /// `reduce_op` and every `kernel_*` key. Any other key is an error.
    #[serde(flatten)]
    pub params: BTreeMap<String, serde_yaml::Value>,
}

/// Keys of an algorithm entry besides the fixed ones (see
/// [`AlgorithmEntry::params`]).
fn is_param(key: &str) -> bool {
    matches!(key, "chunk_size" | "reduce_op") || key.starts_with("kernel_")
}

/// How a sender whose peer has no free slot learns that one was freed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backpressure {
    /// The credit wakes it: it sees the slot as soon as the credit is back
    /// (release + the credit's path latency).
    Sleep,
    /// It re-reads the peer's ring pointers every `poll_interval_ns` from
    /// when it started waiting, and sees the slot at the first look after
    /// the credit is back.
    Poll,
}

/// The default poll interval (ns).
pub const DEFAULT_POLL_INTERVAL_NS: f64 = 100.0;

/// The value of an algorithm parameter: a YAML scalar.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    Int(i64),
    Float(f64),
    Text(String),
    Flag(bool),
}

impl ParamValue {
    fn from_yaml(v: &serde_yaml::Value) -> Option<Self> {
        use serde_yaml::Value;
        match v {
            Value::Bool(b) => Some(ParamValue::Flag(*b)),
            Value::Number(n) => n
                .as_i64()
                .map(ParamValue::Int)
                .or_else(|| n.as_f64().map(ParamValue::Float)),
            Value::String(s) => Some(ParamValue::Text(s.clone())),
            _ => None,
        }
    }
}

impl AlgorithmEntry {
    /// The parameters with their values, in key order. Fails on a value
    /// that is not a scalar (checked when the file is loaded).
    pub fn param_values(&self) -> Result<Vec<(String, ParamValue)>, String> {
        self.params
            .iter()
            .map(|(k, v)| {
                ParamValue::from_yaml(v)
                    .map(|p| (k.clone(), p))
                    .ok_or_else(|| {
                        format!("{k} must be a number, a string or true/false, got {v:?}")
                    })
            })
            .collect()
    }

    /// Bytes of one IPCQ slot as ccl.yaml gives it (`slot_size` or `slot_kib`).
    pub fn slot_bytes(&self) -> Option<u64> {
        self.slot_size.or(self.slot_kib.map(|k| k * 1024))
    }

    /// The install keys: this entry's, else the algorithm's `defaults`,
    /// else the host's.
    pub fn install_keys(&self, defaults: &EntryDefaults) -> InstallKeys {
        InstallKeys {
            topology: self
                .topology
                .or(defaults.topology)
                .unwrap_or(NeighbourTopology::Ring1d),
            mapper: self.mapper.or(defaults.mapper).unwrap_or_default(),
            buffer_kind: self
                .buffer_kind
                .or(defaults.buffer_kind)
                .unwrap_or(BufferKind::Tcm),
            n_slots: self.n_slots.or(defaults.n_slots).unwrap_or(4),
            slot_size: self
                .slot_bytes()
                .or(defaults.slot_size)
                .unwrap_or(DEFAULT_SLOT_KIB * 1024),
            validator: self.validator.or(defaults.validator),
            strict_validation: self.strict_validation.unwrap_or(false),
            poll_interval_ns: match self.backpressure {
                Some(Backpressure::Poll) => {
                    Some(self.poll_interval_ns.unwrap_or(DEFAULT_POLL_INTERVAL_NS))
                }
                _ => None,
            },
        }
    }
}

/// Install keys an algorithm component asks for when its ccl.yaml entry
/// leaves them out (its `entry-defaults` export).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EntryDefaults {
    pub topology: Option<NeighbourTopology>,
    pub mapper: Option<Mapper>,
    pub buffer_kind: Option<BufferKind>,
    pub n_slots: Option<u32>,
    pub slot_size: Option<u64>,
    pub validator: Option<Validator>,
}

/// An algorithm's install keys as names (spelled as in ccl.yaml) and numbers.
#[derive(Debug, Clone, Default)]
pub struct EntryDefaultNames<'a> {
    pub topology: Option<&'a str>,
    pub mapper: Option<&'a str>,
    pub buffer_kind: Option<&'a str>,
    pub n_slots: Option<u32>,
    pub slot_size: Option<u64>,
    pub validator: Option<&'a str>,
}

impl EntryDefaults {
    /// Parse the names an algorithm gives (spelled as in ccl.yaml) and
    /// check the numbers as ccl.yaml's are checked.
    pub fn parse(names: &EntryDefaultNames) -> Result<Self, String> {
        fn named<T: serde::de::DeserializeOwned>(
            key: &str,
            v: Option<&str>,
        ) -> Result<Option<T>, String> {
            v.map(|v| {
                serde_yaml::from_value(serde_yaml::Value::String(v.to_string()))
                    .map_err(|e| format!("{key} {v:?}: {e}"))
            })
            .transpose()
        }
        if let Some(n) = names.n_slots {
            check_n_slots(n).map_err(|e| format!("n_slots {e}"))?;
        }
        if let Some(b) = names.slot_size {
            check_slot_size(b).map_err(|e| format!("slot_size {e}"))?;
        }
        Ok(EntryDefaults {
            topology: named("topology", names.topology)?,
            mapper: named("mapper", names.mapper)?,
            buffer_kind: named("buffer_kind", names.buffer_kind)?,
            n_slots: names.n_slots,
            slot_size: names.slot_size,
            validator: named("validator", names.validator)?,
        })
    }
}

/// Every install key of an algorithm entry, decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InstallKeys {
    pub topology: NeighbourTopology,
    pub mapper: Mapper,
    pub buffer_kind: BufferKind,
    pub n_slots: u32,
    pub slot_size: u64,
    pub validator: Option<Validator>,
    pub strict_validation: bool,
    /// `Some(ns)` for `backpressure: poll`.
    pub poll_interval_ns: Option<f64>,
}

fn check_n_slots(n: u32) -> Result<(), String> {
    if n == 0 || n > 1024 {
        return Err(format!("must be in 1..=1024, got {n}"));
    }
    Ok(())
}

fn check_slot_size(b: u64) -> Result<(), String> {
    if b == 0 || b > MAX_SLOT_BYTES {
        return Err(format!("must be in 1..={MAX_SLOT_BYTES} bytes, got {b}"));
    }
    Ok(())
}

const DEFAULT_SLOT_KIB: u64 = 1024;
/// The largest IPCQ slot (1 GiB).
const MAX_SLOT_BYTES: u64 = 1 << 30;

/// The parsed ccl.yaml plus the directory relative paths resolve against.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CclConfig {
    #[serde(default)]
    pub defaults: Defaults,
    /// None in a file that only sets `defaults` over the built-in
    /// algorithms.
    #[serde(default)]
    pub algorithms: BTreeMap<String, AlgorithmEntry>,
    #[serde(skip)]
    pub base_dir: Option<PathBuf>,
    #[serde(skip)]
    pub origin: Option<Origin>,
}

impl CclConfig {
    pub fn from_yaml(text: &str, origin: Origin) -> Result<Self, ConfigError> {
        Self::parse(text, &origin)?.checked(origin)
    }

    /// The file's text as read, not yet checked; relative paths resolve
    /// against `origin`'s directory.
    fn parse(text: &str, origin: &Origin) -> Result<Self, ConfigError> {
        let mut cfg: CclConfig = serde_yaml::from_str(text).map_err(|e| ConfigError::Parse {
            origin: origin.clone(),
            message: e.to_string(),
        })?;
        if let Origin::File(p) = origin {
            cfg.base_dir = p.parent().map(|d| d.to_path_buf());
        }
        cfg.origin = Some(origin.clone());
        Ok(cfg)
    }

    /// [`Self::check`], its message placed at `origin`.
    fn checked(mut self, origin: Origin) -> Result<Self, ConfigError> {
        self.check()
            .map_err(|message| ConfigError::Invalid { origin, message })?;
        Ok(self)
    }

    /// A user's ccl.yaml layered over the embedded one, as the CLI reads
    /// `--ccl`: its entries are added to the built-in ones (an entry of the
    /// same name replaces the built-in), so `--algorithm` still finds
    /// every built-in algorithm. Its `defaults` win where it gives them;
    /// a file of exactly one entry and no `defaults.algorithm` makes that
    /// entry the default (as the seed's snippets do), and a file of
    /// several entries must name its default, as a file read alone must.
    pub fn from_yaml_over_builtins(text: &str, origin: Origin) -> Result<Self, ConfigError> {
        let mut user = Self::parse(text, &origin)?;
        if user.defaults.algorithm.is_empty() && user.algorithms.len() > 1 {
            // The file alone says what is missing.
            user = user.checked(origin.clone())?;
        }
        let mut merged: CclConfig =
            serde_yaml::from_str(super::DEFAULT_CCL_YAML).expect("the embedded ccl.yaml parses");
        let default = match (
            user.defaults.algorithm.is_empty(),
            user.algorithms.keys().next(),
        ) {
            (false, _) => Some(user.defaults.algorithm.clone()),
            (true, Some(only)) => Some(only.clone()),
            (true, None) => None,
        };
        if let Some(d) = default {
            merged.defaults.algorithm = d;
        }
        merged.defaults.algorithms.extend(user.defaults.algorithms);
        merged.defaults.world_size = user.defaults.world_size.or(merged.defaults.world_size);
        merged.defaults.n_elem = user.defaults.n_elem.or(merged.defaults.n_elem);
        merged.algorithms.extend(user.algorithms);
        merged.base_dir = user.base_dir;
        merged.origin = user.origin;
        merged.checked(origin)
    }

    /// Add an entry `{module: NAME}` for each algorithm name of an
    /// `--algorithm` spec (`NAME` or `collective=NAME,...`) that has no
    /// entry but names a component `found` finds (an installed one, say):
    /// it runs with its own defaults. Names neither known nor found are
    /// left for the usual "no such entry" error.
    pub fn add_component_entries(&mut self, spec: Option<&str>, found: impl Fn(&str) -> bool) {
        // A spec that does not parse is reported when the run reads it.
        let Ok(choice) = AlgorithmChoice::parse(spec) else {
            return;
        };
        for name in choice.plain.iter().chain(choice.per_collective.values()) {
            if self.algorithms.contains_key(name) || !found(name) {
                continue;
            }
            let entry: AlgorithmEntry = serde_yaml::from_str(&format!("module: {name:?}"))
                .expect("an entry of a module alone parses");
            self.algorithms.insert(name.clone(), entry);
        }
    }

    /// The names of the algorithm entries, for messages.
    fn known(&self) -> String {
        let names: Vec<&str> = self.algorithms.keys().map(String::as_str).collect();
        names.join(", ")
    }

    /// Pick the default algorithm when left out, then check every entry;
    /// the message says what is wrong and where.
    fn check(&mut self) -> Result<(), String> {
        if self.defaults.world_size == Some(0) {
            return Err(
                "defaults.world_size must be > 0 (leave it out for one rank per SIP)".into(),
            );
        }
        if self.defaults.algorithm.is_empty() {
            match self.algorithms.keys().collect::<Vec<_>>().as_slice() {
                [only] => self.defaults.algorithm = only.to_string(),
                names => {
                    return Err(format!(
                        "no defaults.algorithm and {} algorithm entries ({}): add `defaults: {{algorithm: <name>}}`",
                        names.len(),
                        self.known()
                    ))
                }
            }
        }
        if !self.algorithms.contains_key(&self.defaults.algorithm) {
            return Err(format!(
                "defaults.algorithm is {:?}, but algorithms has no such entry (known: {})",
                self.defaults.algorithm,
                self.known()
            ));
        }
        for (coll, name) in &self.defaults.algorithms {
            if Collective::from_name(coll).is_none() {
                return Err(format!(
                    "defaults.algorithms has the key '{coll}', which is not a collective (known: {})",
                    Collective::names()
                ));
            }
            if !self.algorithms.contains_key(name) {
                return Err(format!(
                    "defaults.algorithms.{coll} is {name:?}, but algorithms has no such entry (known: {})",
                    self.known()
                ));
            }
        }
        for (name, a) in &self.algorithms {
            if let Some(n) = a.n_slots {
                check_n_slots(n).map_err(|e| format!("algorithms.{name}.n_slots {e}"))?;
            }
            if a.slot_kib.is_some() && a.slot_size.is_some() {
                return Err(format!(
                    "algorithms.{name} gives both slot_kib and slot_size: give one (slot_size is in bytes)"
                ));
            }
            if let Some(k) = a.slot_kib {
                if k == 0 || k > MAX_SLOT_BYTES / 1024 {
                    return Err(format!(
                        "algorithms.{name}.slot_kib must be in 1..={}, got {k}",
                        MAX_SLOT_BYTES / 1024
                    ));
                }
            }
            if let Some(b) = a.slot_size {
                check_slot_size(b).map_err(|e| format!("algorithms.{name}.slot_size {e}"))?;
            }
            if let Some(ns) = a.poll_interval_ns {
                if !(ns > 0.0 && ns.is_finite()) {
                    return Err(format!(
                        "algorithms.{name}.poll_interval_ns must be a positive number of ns, got {ns}"
                    ));
                }
                if a.backpressure != Some(Backpressure::Poll) {
                    return Err(format!(
                        "algorithms.{name} gives poll_interval_ns without backpressure: poll"
                    ));
                }
            }
            if let Some(key) = a.params.keys().find(|k| !is_param(k)) {
                return Err(format!(
                    "algorithms.{name} has an unknown key '{key}': known keys are module, topology, buffer_kind, \
                     n_slots, slot_kib, slot_size, mapper, validator, strict_validation, backpressure, \
                     poll_interval_ns, world_size, n_elem, and algorithm \
                     parameters chunk_size, reduce_op and kernel_*"
                ));
            }
            if a.world_size == Some(0) {
                return Err(format!("algorithms.{name}.world_size must be > 0"));
            }
            a.param_values()
                .map_err(|e| format!("algorithms.{name}.{e}"))?;
        }
        Ok(())
    }

    pub fn default_embedded() -> Self {
        Self::from_yaml(super::DEFAULT_CCL_YAML, Origin::Embedded("ccl.yaml"))
            .expect("the embedded ccl.yaml is valid")
    }

    /// The entry for `name` (or the default algorithm).
    pub fn resolve(&self, name: Option<&str>) -> Result<(&str, &AlgorithmEntry), ConfigError> {
        let name = name.unwrap_or(&self.defaults.algorithm);
        self.algorithms
            .get_key_value(name)
            .map(|(k, v)| (k.as_str(), v))
            .ok_or_else(|| ConfigError::Invalid {
                origin: self.origin.clone().unwrap_or(Origin::Embedded("ccl.yaml")),
                message: format!(
                    "no algorithm {name:?} in ccl.yaml (known: {})",
                    self.known()
                ),
            })
    }

    /// The entries that may serve collective `c`, in priority order, for
    /// the command line's `choice` and the algorithm the bench `wanted`:
    /// `--algorithm c=NAME`, then a plain `--algorithm NAME`, then the
    /// bench's, then `defaults.algorithms.c`, then `defaults.algorithm`.
    /// A plain name (the command line's, the bench's, `defaults.algorithm`)
    /// is binding for `all_reduce` (the seed's meaning) and otherwise
    /// serves only if its component implements `c`.
    pub fn candidates(
        &self,
        c: Collective,
        choice: &AlgorithmChoice,
        wanted: Option<&str>,
    ) -> Vec<Candidate> {
        let plain = c == Collective::AllReduce;
        let mut out = Vec::new();
        let mut push = |name: &str, binding: bool, source: String| {
            out.push(Candidate {
                name: name.to_string(),
                binding,
                source,
            })
        };
        if let Some(n) = choice.per_collective.get(&c) {
            push(n, true, format!("--algorithm {c}={n}"));
        }
        if let Some(n) = &choice.plain {
            push(n, plain, format!("--algorithm {n}"));
        }
        if let Some(n) = wanted {
            push(
                n,
                plain,
                format!("the bench's process-group option algorithm={n}"),
            );
        }
        if let Some(n) = self.defaults.algorithms.get(c.name()) {
            push(n, true, format!("ccl.yaml defaults.algorithms.{c}"));
        }
        push(
            &self.defaults.algorithm,
            plain,
            "ccl.yaml defaults.algorithm".to_string(),
        );
        out
    }

    /// World size (ADR-0047 D2): algorithm entry > defaults > SIP count.
    pub fn world_size(&self, entry: &AlgorithmEntry, n_sips: u32) -> u32 {
        entry
            .world_size
            .or(self.defaults.world_size)
            .unwrap_or(n_sips)
    }
}

/// One entry that may serve a collective ([`CclConfig::candidates`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub name: String,
    /// True: it must serve (its component must implement the collective);
    /// false: it serves only if it does.
    pub binding: bool,
    /// Where the choice came from, for messages.
    pub source: String,
}

/// The command line's `--algorithm` values: `NAME` (the seed's: the
/// all-reduce algorithm, and any other collective its component
/// implements) and `COLLECTIVE=NAME`. Several are given comma-separated
/// or by repeating the flag.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AlgorithmChoice {
    pub plain: Option<String>,
    pub per_collective: BTreeMap<Collective, String>,
}

impl AlgorithmChoice {
    /// Parse `ring_rsag` or `all_gather=ring_rsag,all_reduce=tree_allreduce`.
    pub fn parse(spec: Option<&str>) -> Result<AlgorithmChoice, String> {
        let mut choice = AlgorithmChoice::default();
        for part in spec.unwrap_or("").split(',').map(str::trim) {
            if part.is_empty() {
                continue;
            }
            match part.split_once('=') {
                Some((coll, name)) => {
                    let c = Collective::from_name(coll.trim()).ok_or_else(|| {
                        format!(
                            "--algorithm {part}: '{coll}' is not a collective (known: {})",
                            Collective::names()
                        )
                    })?;
                    if choice
                        .per_collective
                        .insert(c, name.trim().to_string())
                        .is_some()
                    {
                        return Err(format!("--algorithm gives {c} twice"));
                    }
                }
                None if choice.plain.is_some() => {
                    return Err(format!(
                        "--algorithm gives two plain names ({} and {part}): name the collective, e.g. all_gather={part}",
                        choice.plain.as_deref().unwrap_or_default()
                    ))
                }
                None => choice.plain = Some(part.to_string()),
            }
        }
        Ok(choice)
    }

    pub fn is_empty(&self) -> bool {
        self.plain.is_none() && self.per_collective.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_file_adds_to_the_builtin_algorithms() {
        let o = || Origin::File("/x/ccl.yaml".into());
        let one = "algorithms:\n  bidir_ring: {module: bidir_ring.wasm}\n";
        let cfg = CclConfig::from_yaml_over_builtins(one, o()).unwrap();
        assert_eq!(cfg.defaults.algorithm, "bidir_ring");
        assert!(cfg.algorithms.contains_key("ring_rsag_allreduce"));
        assert_eq!(cfg.defaults.algorithms["all_gather"], "ring_allgather");
        assert_eq!(cfg.base_dir.as_deref(), Some(std::path::Path::new("/x")));
        // The same name replaces the built-in entry; the defaults win.
        let over = "defaults: {algorithm: ring_rsag_allreduce, algorithms: {all_gather: mine}}\n\
                    algorithms:\n  mine: {module: m.wasm}\n  ring_allreduce: {module: r.wasm}\n";
        let cfg = CclConfig::from_yaml_over_builtins(over, o()).unwrap();
        assert_eq!(cfg.defaults.algorithm, "ring_rsag_allreduce");
        assert_eq!(cfg.defaults.algorithms["all_gather"], "mine");
        assert_eq!(cfg.algorithms["ring_allreduce"].module, "r.wasm");
        // Several entries and no default: the file must say which.
        let two = "algorithms:\n  a: {module: a.wasm}\n  b: {module: b.wasm}\n";
        let e = CclConfig::from_yaml_over_builtins(two, o())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no defaults.algorithm and 2 algorithm entries (a, b)"),
            "{e}"
        );
        // A default naming nothing lists the built-in names too.
        let bad = "defaults: {algorithm: nope}\nalgorithms:\n  a: {module: a.wasm}\n";
        let e = CclConfig::from_yaml_over_builtins(bad, o())
            .unwrap_err()
            .to_string();
        assert!(e.contains("ring_rsag_allreduce") && e.contains("a,"), "{e}");
    }

    #[test]
    fn candidates_follow_the_documented_priority() {
        let text = "defaults: {algorithm: a, algorithms: {all_gather: b}}
algorithms:
  a: {module: m}
  b: {module: m}
  c: {module: m}
";
        let cfg = CclConfig::from_yaml(text, Origin::Embedded("t")).unwrap();
        let none = AlgorithmChoice::default();
        let names = |v: Vec<Candidate>| -> Vec<(String, bool)> {
            v.into_iter().map(|c| (c.name, c.binding)).collect()
        };
        assert_eq!(
            names(cfg.candidates(Collective::AllReduce, &none, None)),
            [("a".into(), true)]
        );
        assert_eq!(
            names(cfg.candidates(Collective::AllGather, &none, None)),
            [("b".into(), true), ("a".into(), false)]
        );
        let choice = AlgorithmChoice::parse(Some("c, all_gather=a")).unwrap();
        assert_eq!(
            names(cfg.candidates(Collective::AllGather, &choice, Some("b"))),
            [
                ("a".into(), true),
                ("c".into(), false),
                ("b".into(), false),
                ("b".into(), true),
                ("a".into(), false)
            ]
        );
        assert_eq!(
            names(cfg.candidates(Collective::AllReduce, &choice, None))[0],
            ("c".into(), true)
        );
        let c = cfg.candidates(Collective::AllGather, &choice, None);
        assert_eq!(c[0].source, "--algorithm all_gather=a");
    }

    #[test]
    fn algorithm_choices_parse_and_refuse_clearly() {
        let c = AlgorithmChoice::parse(Some("all-gather=x,reduce_scatter = y")).unwrap();
        assert_eq!(c.per_collective[&Collective::AllGather], "x");
        assert_eq!(c.per_collective[&Collective::ReduceScatter], "y");
        assert!(c.plain.is_none());
        assert!(AlgorithmChoice::parse(None).unwrap().is_empty());
        let e = AlgorithmChoice::parse(Some("allgather=x")).unwrap_err();
        assert!(e.contains("'allgather' is not a collective"), "{e}");
        let e = AlgorithmChoice::parse(Some("a,b")).unwrap_err();
        assert!(e.contains("two plain names"), "{e}");
        let e = AlgorithmChoice::parse(Some("broadcast=a,broadcast=b")).unwrap_err();
        assert!(e.contains("broadcast twice"), "{e}");
    }

    #[test]
    fn defaults_algorithms_are_checked() {
        let bad = |t: &str| {
            CclConfig::from_yaml(t, Origin::Embedded("t"))
                .unwrap_err()
                .to_string()
        };
        let e = bad("defaults: {algorithm: a, algorithms: {allgather: a}}
algorithms:
  a: {module: m}
");
        assert!(e.contains("'allgather', which is not a collective"), "{e}");
        let e = bad("defaults: {algorithm: a, algorithms: {all_gather: z}}
algorithms:
  a: {module: m}
");
        assert!(e.contains("defaults.algorithms.all_gather is \"z\""), "{e}");
    }

    #[test]
    fn a_file_of_defaults_alone_goes_over_the_built_ins_and_zero_ranks_is_refused() {
        let c = CclConfig::from_yaml_over_builtins(
            "defaults: {world_size: 2}\n",
            Origin::Embedded("t.yaml"),
        )
        .unwrap();
        assert_eq!(c.defaults.world_size, Some(2));
        assert!(c.algorithms.contains_key("ring_allreduce"));
        let e = CclConfig::from_yaml_over_builtins(
            "defaults: {world_size: 0}\n",
            Origin::Embedded("t.yaml"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("defaults.world_size must be > 0"), "{e}");
    }

    #[test]
    fn world_size_priority_algorithm_then_defaults_then_sips() {
        let text = "defaults: {algorithm: a, world_size: 3}\nalgorithms:\n  a: {module: m, topology: ring_1d, world_size: 2}\n  b: {module: m, topology: ring_1d}\n";
        let c = CclConfig::from_yaml(text, Origin::Embedded("t")).unwrap();
        assert_eq!(c.world_size(c.resolve(Some("a")).unwrap().1, 8), 2);
        assert_eq!(c.world_size(c.resolve(Some("b")).unwrap().1, 8), 3);
        let text = "defaults: {algorithm: b}\nalgorithms:\n  b: {module: m, topology: ring_1d}\n";
        let c = CclConfig::from_yaml(text, Origin::Embedded("t")).unwrap();
        assert_eq!(c.world_size(c.resolve(None).unwrap().1, 8), 8);
    }

    #[test]
    fn unknown_default_algorithm_is_named() {
        let e = CclConfig::from_yaml(
            "defaults: {algorithm: zz}\nalgorithms: {}\n",
            Origin::Embedded("t"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("\"zz\""), "{e}");
    }

    #[test]
    fn seed_keys_parse_and_unknown_keys_are_named() {
        let text = "defaults: {algorithm: a}\nalgorithms:\n  a: {module: m, mapper: all_pes, validator: multi_pe_sip_local, slot_size: 4096, chunk_size: 4, kernel_rounds: 2}\n";
        let c = CclConfig::from_yaml(text, Origin::Embedded("t")).unwrap();
        let a = &c.algorithms["a"];
        assert_eq!(a.topology, None, "absent topology");
        assert_eq!(
            a.param_values().unwrap(),
            [
                ("chunk_size".to_string(), ParamValue::Int(4)),
                ("kernel_rounds".to_string(), ParamValue::Int(2))
            ]
        );
        assert_eq!(a.slot_bytes(), Some(4096));
        assert_eq!(
            (a.mapper, a.validator),
            (Some(Mapper::AllPes), Some(Validator::MultiPeSipLocal))
        );
        assert_eq!(
            a.params.keys().collect::<Vec<_>>(),
            ["chunk_size", "kernel_rounds"]
        );
        let bad = |entry: &str| {
            let text =
                format!("defaults: {{algorithm: a}}\nalgorithms:\n  a: {{module: m, {entry}}}\n");
            CclConfig::from_yaml(&text, Origin::Embedded("t"))
                .unwrap_err()
                .to_string()
        };
        assert!(bad("slot_kib: 4, slot_size: 4096").contains("both slot_kib and slot_size"));
        assert!(bad("slot_sise: 4096").contains("unknown key 'slot_sise'"));
        assert!(bad("mapper: everyone").contains("unknown variant `everyone`"));
        assert!(bad("slot_size: 0").contains("slot_size must be in 1.."));
    }

    #[test]
    fn install_keys_come_from_ccl_yaml_then_the_algorithm_then_the_host() {
        let text = "algorithms:\n  a: {module: m, buffer_kind: hbm, slot_kib: 2}\n";
        let c = CclConfig::from_yaml(text, Origin::Embedded("t")).unwrap();
        let a = &c.algorithms["a"];
        let host = a.install_keys(&EntryDefaults::default());
        assert_eq!(
            host,
            InstallKeys {
                topology: NeighbourTopology::Ring1d,
                mapper: Mapper::LeaderOnly,
                buffer_kind: BufferKind::Hbm,
                n_slots: 4,
                slot_size: 2048,
                validator: None,
                strict_validation: false,
                poll_interval_ns: None,
            }
        );
        let algo = EntryDefaults::parse(&EntryDefaultNames {
            topology: Some("intercube_multisip"),
            mapper: Some("cube_leaders"),
            buffer_kind: Some("sram"),
            n_slots: Some(2),
            slot_size: Some(4096),
            validator: Some("one_shard_per_cube"),
        })
        .unwrap();
        let keys = a.install_keys(&algo);
        assert_eq!(
            (keys.topology, keys.mapper, keys.n_slots),
            (NeighbourTopology::IntercubeMultisip, Mapper::CubeLeaders, 2)
        );
        assert_eq!(
            (keys.buffer_kind, keys.slot_size),
            (BufferKind::Hbm, 2048),
            "ccl.yaml wins"
        );
        assert_eq!(keys.validator, Some(Validator::OneShardPerCube));
        let e = EntryDefaults::parse(&EntryDefaultNames {
            topology: Some("ring"),
            ..Default::default()
        })
        .unwrap_err();
        assert!(
            e.starts_with("topology \"ring\": unknown variant `ring`"),
            "{e}"
        );
        let e = EntryDefaults::parse(&EntryDefaultNames {
            n_slots: Some(0),
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(e, "n_slots must be in 1..=1024, got 0");
    }

    #[test]
    fn a_parameter_must_be_a_scalar() {
        let e = CclConfig::from_yaml(
            "algorithms:\n  a: {module: m, kernel_list: [1, 2]}\n",
            Origin::Embedded("t"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("algorithms.a.kernel_list must be a number, a string or true/false"),
            "{e}"
        );
    }

    #[test]
    fn every_example_ccl_yaml_of_the_seeds_parses() {
        let examples = [
            // seed 001 ADR-0050 D6
            "defaults:\n  algorithm: lrab_hierarchical_allreduce\n  n_elem: 8\n\nalgorithms:\n  lrab_hierarchical_allreduce:\n    module: kernbench.ccl.algorithms.lrab_hierarchical_allreduce\n",
            // seed 003 §1 step 2
            "algorithms:\n  hello_send:\n    module: kernbench.ccl.algorithms.hello_send\n    topology: ring_1d\n    buffer_kind: tcm\n    world_size: 8\n",
            // seed 004 D4
            "algorithms:\n  ring_allreduce_tcm:\n    module: kernbench.ccl.algorithms.ring_allreduce\n    topology: ring_1d\n    mapper: leader_only\n    validator: single_shard_per_rank\n    buffer_kind: tcm\n    n_elem: 8\n",
        ];
        let defaults = [
            "lrab_hierarchical_allreduce",
            "hello_send",
            "ring_allreduce_tcm",
        ];
        for (text, want) in examples.iter().zip(defaults) {
            let c = CclConfig::from_yaml(text, Origin::Embedded("seed"))
                .unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(c.defaults.algorithm, want);
        }
        let e = CclConfig::from_yaml(
            "algorithms:\n  a: {module: m}\n  b: {module: m}\n",
            Origin::Embedded("t"),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("no defaults.algorithm and 2 algorithm entries (a, b)"),
            "{e}"
        );
    }

    #[test]
    fn embedded_default_parses() {
        let c = CclConfig::default_embedded();
        assert_eq!(c.defaults.algorithm, "ring_allreduce");
    }
}
