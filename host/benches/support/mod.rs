//! What the benchmarks that run whole benches share: a loader with room
//! for `ranks` ranks and a run request on the embedded configs.

use kernbench::config::{CclConfig, Origin, TopologySpec, DEFAULT_CCL_YAML};
use kernbench::runtime::limits::instances_needed;
use kernbench::runtime::{Loader, LoaderOptions, RunRequest};
use std::sync::Arc;

/// A loader whose instance pool fits `ranks` ranks.
pub fn loader(ranks: u32) -> Arc<Loader> {
    Arc::new(
        Loader::new(LoaderOptions {
            pool_instances: instances_needed(ranks).max(100),
            ..LoaderOptions::default()
        })
        .expect("a loader"),
    )
}

/// `bench` with `args` on the embedded topology with `ranks` SIPs and the
/// embedded ccl.yaml: no trace, digest, op log or second pass.
pub fn request(ranks: u32, bench: &str, algorithm: Option<&str>, args: &[&str]) -> RunRequest {
    let mut spec = TopologySpec::default_embedded();
    spec.system.sips.count = ranks;
    RunRequest {
        algorithm: algorithm.map(str::to_string),
        args: args.iter().map(|s| s.to_string()).collect(),
        memory_budget: 16 << 30,
        ..RunRequest::new(
            bench,
            Arc::new(kernbench::topology::build(&spec).expect("a valid topology")),
            CclConfig::from_yaml(DEFAULT_CCL_YAML, Origin::Embedded("ccl.yaml")).unwrap(),
        )
    }
}
