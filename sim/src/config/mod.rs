//! Configuration files: the typed topology spec and ccl.yaml, their
//! validation, and the embedded defaults.

pub mod ccl;
#[cfg(test)]
mod doc_check;
pub mod overrides;
pub mod topology;

pub use ccl::{AlgorithmEntry, CclConfig};
pub use topology::TopologySpec;

/// The default topology, embedded in the binary.
pub const DEFAULT_TOPOLOGY_YAML: &str = include_str!("../../../configs/topology.yaml");
/// The default ccl.yaml, embedded in the binary.
pub const DEFAULT_CCL_YAML: &str = include_str!("../../../configs/ccl.yaml");

/// Where a config came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Embedded(&'static str),
    File(std::path::PathBuf),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Embedded(name) => write!(f, "<embedded {name}>"),
            Origin::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Tests: the embedded topology.yaml with textual edits applied (each
/// must match), parsed and validated.
#[cfg(test)]
pub(crate) fn edited_default_topology(edits: &[(&str, &str)]) -> TopologySpec {
    let mut text = DEFAULT_TOPOLOGY_YAML.to_string();
    for (from, to) in edits {
        assert!(text.contains(from), "no {from:?} in topology.yaml");
        text = text.replace(from, to);
    }
    TopologySpec::from_yaml(&text, Origin::Embedded("edited topology.yaml")).unwrap()
}
