//! The kernel language on the host side, without WebAssembly: every `tl`
//! call a kernel makes becomes a [`commands::Command`] in one place
//! ([`recorder::Recorder`]) and is run on the machine by one interpreter
//! ([`commands::execute`]), whether the kernel runs in step with
//! simulated time or was recorded ahead and is replayed. kernbench-host's
//! runtime translates the WIT's calls into these.

pub mod command_codec;
pub mod commands;
pub mod futures;
pub mod recorder;
pub mod slots;
