//! The host functions of the bench world, one file per WIT interface,
//! each implementing its interface's `Host` trait on
//! [`super::BenchHost`] (wasmtime's WASI keeps its hosts the same way).

mod accelerator;
mod ahbm;
mod distributed;
mod multiprocessing;
mod report;
mod torch;
