//! What an algorithm component does, asked of the component itself: its
//! `collectives` and `entry-defaults` exports, called on one instance
//! outside any run (for `inspect` and the OCI annotations of `publish`).
//! These are the same answers the host enforces when it maps a collective
//! to the algorithm, so what is shown cannot drift from what runs.

use super::loader::Loader;
use crate::ccl::collective::Collective;
use crate::config::ccl::EntryDefaults;
use crate::engine::Executor;
use crate::error::SimError;
use crate::hw::Machine;
use crate::topology::Topology;
use std::path::Path;
use std::sync::Arc;

/// What an algorithm implements and the install keys it asks for.
#[derive(Debug, Clone)]
pub struct AlgorithmCapabilities {
    pub collectives: Vec<Collective>,
    pub defaults: EntryDefaults,
}

/// Ask the algorithm `module` (a name or path) what it implements, on a
/// machine of topology `topo`.
pub fn algorithm_capabilities(
    loader: &Arc<Loader>,
    module: &str,
    topo: Arc<Topology>,
) -> Result<AlgorithmCapabilities, SimError> {
    let limits = loader.run_limits(crate::budget::MemoryBudget::default_limit());
    let machine = Machine::with_options(topo, false, limits.budget.clone());
    let algo = loader.load_algorithm(module, None::<&Path>)?;
    let ex = Executor::new();
    let task = ex.spawn(async move {
        let mut hooks = algo.hooks(&machine, &limits).await?;
        Ok::<_, SimError>(AlgorithmCapabilities {
            collectives: hooks.collectives().await?,
            defaults: hooks.entry_defaults().await?,
        })
    });
    ex.run();
    task.try_take().unwrap_or_else(|| {
        Err(SimError::Component {
            name: module.to_string(),
            message: "its setup exports did not return (they waited on something)".into(),
        })
    })
}
