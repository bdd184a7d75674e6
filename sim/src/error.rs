//! Typed errors of the library. The binary wraps them with `anyhow`.

use crate::config::Origin;

/// A config file could not be read, parsed or validated.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{origin}: {message}")]
    Parse { origin: Origin, message: String },
    #[error("{origin}: invalid config: {message}")]
    Invalid { origin: Origin, message: String },
}

/// An error raised by the simulated hardware on behalf of a kernel: the
/// kernel asked for something the machine cannot do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HwError {
    #[error("address {addr:#x} is not mapped: {reason}")]
    BadAddress { addr: u64, reason: String },
    #[error("access of {len} bytes at {addr:#x} runs past the end of {space} (size {size:#x})")]
    OutOfRange {
        addr: u64,
        len: u64,
        space: String,
        size: u64,
    },
    #[error("direction {dir:?} is not installed on {pe} (installed: {installed})")]
    InvalidDirection {
        pe: String,
        dir: String,
        installed: String,
    },
    #[error("no IPCQ is installed on {pe}: call dist.init_process_group first or run this kernel as a collective")]
    NoIpcq { pe: String },
    #[error("{what}")]
    Mismatch { what: String },
    #[error("IPCQ direction {dir} of {pe}: {why}")]
    IpcqConflict {
        pe: String,
        dir: String,
        why: String,
    },
    #[error("the kernel ended without waiting for {count} recv_async future(s): call tl.wait on each (a message it claimed would be left in its slot)")]
    FutureNotWaited { count: usize },
    #[error("message of {nbytes} bytes does not fit an IPCQ slot of {slot_size} bytes (raise the algorithm's `slot_kib` or `slot_size` in ccl.yaml)")]
    SlotTooSmall { nbytes: u64, slot_size: u64 },
    #[error("{space} is full: cannot allocate {len} bytes ({free} free)")]
    OutOfMemory { space: String, len: u64, free: u64 },
    #[error("routing: {0}")]
    NoRoute(String),
    #[error(transparent)]
    SizeOverflow(#[from] crate::units::SizeOverflow),
    #[error("{what}: {source}")]
    TimeOverflow {
        what: String,
        source: crate::units::TimeOverflow,
    },
    #[error(transparent)]
    Budget(#[from] crate::budget::BudgetExceeded),
}

/// A `tl.*` call that the machine refused; becomes a trap in the kernel.
#[derive(Debug, thiserror::Error)]
#[error("{call} on {pe}: {source}")]
pub struct TlCallError {
    pub call: String,
    pub pe: String,
    #[source]
    pub source: HwError,
}

/// Errors of a simulation run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("component {name}: {message}")]
    Component { name: String, message: String },
    #[error("kernel of algorithm '{algorithm}' (component {component}) on {pe} failed: {message}")]
    KernelFailed {
        algorithm: String,
        component: String,
        pe: String,
        message: String,
    },
    #[error("bench '{bench}' {who} failed: {message}")]
    BenchFailed {
        bench: String,
        who: String,
        message: String,
    },
    #[error("the simulation stopped at t={time_us:.3} us: {message}")]
    Fault { time_us: f64, message: String },
    #[error("deadlock at t={time_us:.3} us: no PE or rank can make progress.\n{report}")]
    Deadlock { time_us: f64, report: String },
    #[error(transparent)]
    Budget(#[from] crate::budget::BudgetExceeded),
    #[error("wasmtime: {0}")]
    Wasmtime(String),
    /// A command-line value the run cannot use (the message names the flag).
    #[error("{0}")]
    Usage(String),
    /// A run on a machine split into partitions could not give the
    /// one-partition run's results (see `hw::machine::crossings`); run on
    /// one partition, it does.
    #[error("the run on a machine split into partitions was given up: {0}")]
    SplitGivenUp(String),
}
