//! `ccl.yaml`: which collective algorithm runs and how its IPCQ is set up
//! (seed ADR-0047 D2/D3, ADR-0050 D6).

use super::Origin;
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
}

impl NeighbourTopology {
    /// The spelling used in ccl.yaml.
    pub fn name(self) -> &'static str {
        match self {
            NeighbourTopology::Ring1d => "ring_1d",
            NeighbourTopology::Ring1dUnidir => "ring_1d_unidir",
            NeighbourTopology::Mesh2d => "mesh_2d",
            NeighbourTopology::Torus2d => "torus_2d",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    pub algorithm: String,
    pub world_size: Option<u32>,
    /// Accepted for seed compatibility (the seed's default tile size).
    pub n_elem: Option<u64>,
}

/// One `algorithms.<name>` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlgorithmEntry {
    pub module: String,
    pub topology: NeighbourTopology,
    #[serde(default = "default_buffer_kind")]
    pub buffer_kind: BufferKind,
    #[serde(default = "default_n_slots")]
    pub n_slots: u32,
    /// Size of one IPCQ slot in KiB: the largest message a `send` may carry.
    #[serde(default = "default_slot_kib")]
    pub slot_kib: u64,
    pub world_size: Option<u32>,
    /// Accepted for seed compatibility.
    pub n_elem: Option<u64>,
}

fn default_buffer_kind() -> BufferKind {
    BufferKind::Tcm
}
fn default_n_slots() -> u32 {
    4
}
fn default_slot_kib() -> u64 {
    1024
}

/// The parsed ccl.yaml plus the directory relative paths resolve against.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CclConfig {
    pub defaults: Defaults,
    pub algorithms: BTreeMap<String, AlgorithmEntry>,
    #[serde(skip)]
    pub base_dir: Option<PathBuf>,
    #[serde(skip)]
    pub origin: Option<Origin>,
}

impl CclConfig {
    pub fn from_yaml(text: &str, origin: Origin) -> Result<Self, ConfigError> {
        let mut cfg: CclConfig = serde_yaml::from_str(text).map_err(|e| ConfigError::Parse {
            origin: origin.clone(),
            message: e.to_string(),
        })?;
        if let Origin::File(p) = &origin {
            cfg.base_dir = p.parent().map(|d| d.to_path_buf());
        }
        cfg.origin = Some(origin.clone());
        if !cfg.algorithms.contains_key(&cfg.defaults.algorithm) {
            return Err(ConfigError::Invalid {
                origin,
                message: format!(
                    "defaults.algorithm is {:?}, but algorithms has no such entry (known: {})",
                    cfg.defaults.algorithm,
                    cfg.algorithms
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        for (name, a) in &cfg.algorithms {
            if a.n_slots == 0 || a.n_slots > 1024 {
                return Err(ConfigError::Invalid {
                    origin,
                    message: format!(
                        "algorithms.{name}.n_slots must be in 1..=1024, got {}",
                        a.n_slots
                    ),
                });
            }
            if a.slot_kib == 0 || a.slot_kib > 1 << 20 {
                return Err(ConfigError::Invalid {
                    origin,
                    message: format!(
                        "algorithms.{name}.slot_kib must be in 1..=1048576, got {}",
                        a.slot_kib
                    ),
                });
            }
            if a.world_size == Some(0) {
                return Err(ConfigError::Invalid {
                    origin,
                    message: format!("algorithms.{name}.world_size must be > 0"),
                });
            }
        }
        Ok(cfg)
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
                    self.algorithms
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
    }

    /// World size (ADR-0047 D2): algorithm entry > defaults > SIP count.
    pub fn world_size(&self, entry: &AlgorithmEntry, n_sips: u32) -> u32 {
        entry
            .world_size
            .or(self.defaults.world_size)
            .unwrap_or(n_sips)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn embedded_default_parses() {
        let c = CclConfig::default_embedded();
        assert_eq!(c.defaults.algorithm, "ring_allreduce");
    }
}
