//! The collective backend's plans, independent of how kernels run: which
//! PEs take part in a collective and how their IPCQ ports are wired (seed
//! 004 D5/D6, seed 003 §3), and what each collective is.

pub mod collective;

pub mod ranks;
pub mod tables;
