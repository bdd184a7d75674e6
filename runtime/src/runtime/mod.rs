//! The wasmtime runtime — the only module that touches wasmtime.
//!
//! * [`loader`]: finds, checks, compiles and pre-instantiates components.
//! * [`kernel`]: kernel launches, and the `tl.*` host functions of a
//!   kernel run in step with simulated time (one Store per PE kernel).
//! * [`eager`]: a kernel run ahead of simulated time, its `tl.*` calls
//!   recorded; [`commands`]: the recorded list and its replay on the
//!   machine (how most kernels run: no Store alive while simulated);
//!   [`prerecord`]: recording them ahead on a helper thread;
//!   [`recording_memo`]: recordings kept for the next equal launch.
//! * [`bench`]: the `torch.*` surface for bench instances (one Store per
//!   rank).
//! * [`session`]: one run — the bench's instances, spawn, reports;
//!   [`comms`]: the run's process group and every call on it;
//!   [`process_group`]: the group, its backends and epochs;
//!   [`collective`]: choosing a backend and running one call;
//!   [`dist_calls`]: the `torch.distributed` forms; [`p2p`]: send / recv.
//! * [`wasi`]: the guest sandbox.
//! * [`sim`]: drives a whole run on the executor and reports deadlocks.

// The kernel language as commands and its one interpreter live in the
// simulator core (`kernbench_sim::tl`); the hosts here translate the WIT.
pub use kernbench_sim::tl::{command_codec, commands, futures, recorder, slots};
pub mod batch;
pub mod batch_bytes;
pub mod bench;
pub mod bindings;
pub mod collective;
pub mod comms;
pub mod compile_cache;
pub mod console;
pub mod describe;
pub mod dist_calls;
pub mod eager;
pub mod epochs;
pub mod fail;
pub mod groups;
pub mod hooks;
pub mod kernel;
pub mod launch;
pub mod limits;
pub mod loader;
pub mod p2p;
pub mod prerecord;
pub mod process_group;
pub mod recording_memo;
pub mod session;
pub mod shapes;
pub mod sim;
pub mod split_memo;
pub mod split_run;
pub mod timeline;
pub mod wasi;
pub mod works;

mod trap;

pub use loader::{Loader, LoaderOptions};
pub use session::{ReportRecord, Session};
pub use sim::{run_bench, RowObserver, RunRequest, RunResult};
pub use trap::{describe_guest_error, describe_wasm_error};
