//! The host functions of the bench world, one file per WIT interface,
//! each implementing its interface's `Host` trait on the context of its
//! capability ([`super::capabilities`]), as wasmtime's WASI keeps its
//! hosts.

mod accelerator;
mod ahbm;
mod distributed;
mod multiprocessing;
mod report;
mod torch;
