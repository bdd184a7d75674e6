//! Typed errors of the library. The binary wraps them with `anyhow`.

use crate::config::Origin;

/// A config file could not be read, parsed or validated.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read { path: std::path::PathBuf, source: std::io::Error },
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
    OutOfRange { addr: u64, len: u64, space: String, size: u64 },
    #[error("direction {dir:?} is not installed on {pe} (installed: {installed})")]
    InvalidDirection { pe: String, dir: String, installed: String },
    #[error("no IPCQ is installed on {pe}: call dist.init_process_group first or run this kernel as a collective")]
    NoIpcq { pe: String },
    #[error("{what}")]
    Mismatch { what: String },
    #[error("message of {nbytes} bytes does not fit an IPCQ slot of {slot_size} bytes")]
    SlotTooSmall { nbytes: u64, slot_size: u64 },
    #[error("{space} is full: cannot allocate {len} bytes ({free} free)")]
    OutOfMemory { space: String, len: u64, free: u64 },
    #[error("unknown tensor handle")]
    StaleHandle,
}
