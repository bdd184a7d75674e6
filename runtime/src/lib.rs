//! KernBench: a simulator of the AHBM multi-device AI accelerator on which
//! collective algorithms and kernels run as WebAssembly components.
//!
//! The simulator core (config, topology, routing, engine, hw, verify, …)
//! is the `kernbench-sim` crate, re-exported here under the same paths.
//! Above it (DESIGN §2), lower never imports upper: `runtime` (wasmtime:
//! the guests and the run driver) → `report`; `components` (what a
//! component is and where it comes from) beside `runtime`, which applies
//! it; `sweep` (many runs, their table and their Slurm array) above
//! `runtime` and `report`.

pub use kernbench_sim::{
    address, bounds, budget, ccl, config, cores, digest, engine, error, files, hw, placement,
    routing, topology, units, verify,
};

pub mod components;
pub mod guest_build;
pub mod heap;
pub mod kernel_report;
pub mod plot;
pub mod report;
pub mod runtime;
pub mod sweep;
