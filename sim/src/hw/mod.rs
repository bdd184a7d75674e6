//! The hardware model: links shared under contention, per-PE DMA and MATH
//! engines and the matrix (GEMM) unit, the memory store of real bytes, PE_IPCQ ring buffers, and the
//! [`Machine`] that issues commands on them in simulated time.

pub mod alloc;
pub mod blocked;
pub mod compute_op;
pub mod data_plane;
pub mod dtype;
pub mod gemm_ops;
pub mod ipcq;
pub mod link;
pub mod machine;
pub mod mail;
pub mod math_ops;
pub mod memory;
pub mod oplog;
pub mod page_table;
mod routes;
pub mod tensor;
pub mod trace;
pub mod vmap;

pub use dtype::Dtype;
pub use machine::{Machine, TensorRef};
