//! The wasmtime runtime — the only module that touches wasmtime.
//!
//! * [`loader`]: finds, checks, compiles and pre-instantiates components.
//! * [`kernel`]: the `tl.*` host functions and kernel launches (one Store
//!   per PE kernel instance).
//! * [`bench`]: the `torch.*` surface for bench instances (one Store per
//!   rank).
//! * [`session`]: one run — process group, spawn, epoch barrier, reports.
//! * [`wasi`]: the guest sandbox.
//! * [`sim`]: drives a whole run on the executor and reports deadlocks.

pub mod bench;
pub mod bindings;
pub mod kernel;
pub mod limits;
pub mod loader;
pub mod session;
pub mod sim;
pub mod wasi;

mod trap;

pub use loader::{Loader, LoaderOptions};
pub use session::{ReportRecord, Session};
pub use sim::{run_bench, RowObserver, RunRequest, RunResult};
pub use trap::{describe_guest_error, describe_wasm_error};
