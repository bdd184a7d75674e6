//! KernBench's simulator core: the AHBM machine and everything needed to
//! run it, with no WebAssembly, no CLI and no async runtime in its
//! dependency tree (kernbench-host adds those).
//!
//! Layers (DESIGN §2), lower never imports upper:
//! `config` → `topology` / `placement` / `ccl` (rank mapping, IPCQ tables)
//! → `routing` / `bounds` → `engine` / `hw` → `tl` (a kernel's calls as
//! commands, and the one interpreter that runs them on the machine);
//! `verify` checks what a run wrote. `units`, `budget`, `address`, `cores`, `digest`, `files` and
//! `error` serve them all.

pub mod address;
pub mod bounds;
pub mod budget;
pub mod ccl;
pub mod config;
pub mod cores;
pub mod digest;
pub mod engine;
pub mod error;
pub mod files;
pub mod hw;
pub mod placement;
pub mod routing;
pub mod tl;
pub mod topology;
pub mod units;
pub mod verify;
