//! KernBench: a simulator of the AHBM multi-device AI accelerator on which
//! collective algorithms and kernels run as WebAssembly components.
//!
//! Layers (DESIGN §2), lower never imports upper:
//! `config` → `topology` / `placement` / `ccl` (rank mapping, IPCQ tables)
//! → `routing` / `bounds` → `engine` / `hw` → `runtime` → `report`;
//! `components` (what a component is and where it comes from) beside
//! `runtime`, which applies it; `sweep` (many runs, their table and
//! their Slurm array) above `runtime` and `report`.

pub mod address;
pub mod bounds;
pub mod budget;
pub mod ccl;
#[cfg(feature = "wasm")]
pub mod components;
pub mod config;
pub mod cores;
pub mod digest;
pub mod engine;
pub mod error;
pub mod files;
#[cfg(all(feature = "guest-build", feature = "wasm"))]
pub mod guest_build;
#[cfg(feature = "wasm")]
pub mod heap;
pub mod hw;
#[cfg(feature = "wasm")]
pub mod kernel_report;
pub mod placement;
#[cfg(feature = "wasm")]
pub mod plot;
#[cfg(feature = "wasm")]
pub mod report;
pub mod routing;
#[cfg(feature = "wasm")]
pub mod runtime;
#[cfg(feature = "wasm")]
pub mod sweep;
pub mod topology;
pub mod units;
pub mod verify;
