//! The integration tests: real components through the real host, as one
//! binary with a module per area (wasmtime's `tests/all/`), so the suite
//! links wasmtime once instead of once per file. Run one area with
//! `cargo test -p kernbench-host --test all <module>::`, e.g.
//! `--test all fidelity:: -- --nocapture`. tests/README.md names every
//! class of test and where it lives.

mod common;

mod algorithms;
mod async_calls;
mod cli;
mod collectives;
mod components;
mod compute_benches;
mod contention;
mod coverage;
mod docs;
mod errors;
mod every_collective;
mod fidelity;
mod groups;
mod hostile;
mod languages;
mod oplog;
mod overrides;
mod setup_hooks;
mod slurm;
mod split;
mod sweep;
mod timing;
mod timing_only;
mod topology;
mod verify;
