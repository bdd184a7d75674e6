//! The subcommands of `kernbench-host`, one file each; `main.rs` parses
//! the command line (clap) and calls the one asked for.

pub mod build;
pub mod components;
pub mod list;
pub mod new;
pub mod plot;
pub mod run;
pub mod sweep;
pub mod toolchains;
pub mod topology;

use anyhow::{bail, Context, Result};
use kernbench::config::{CclConfig, Origin};
use std::path::Path;

pub fn read(path: &Path) -> Result<String> {
    Ok(kernbench::files::read_text(path)?)
}

pub fn load_ccl(path: Option<&Path>) -> Result<CclConfig> {
    Ok(match path {
        Some(p) => CclConfig::from_yaml_over_builtins(&read(p)?, Origin::File(p.to_path_buf()))?,
        None => CclConfig::default_embedded(),
    })
}

/// Whether the file `path` can be written: its directory exists and a
/// file can be created there (an existing file is left as it is; one
/// made to find out is removed).
pub fn writable(path: &std::path::Path) -> Result<()> {
    if path.is_dir() {
        bail!("is a directory; give a file name");
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    if !dir.is_dir() {
        bail!("no such directory: {} (create it first)", dir.display());
    }
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .context("cannot be written")?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}
