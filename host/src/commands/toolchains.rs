//! `kernbench-host toolchains`: install the guest toolchains of Python,
//! JavaScript and C, or show where `build` finds them.

use anyhow::{Context, Result};
use clap::Subcommand;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum ToolchainsCmd {
    /// Install the toolchain of each language given (idempotent): Python's
    /// componentize-py in a venv, JavaScript's componentize-js with npm;
    /// for C, check the system's clang builds wasm32-wasi and say how to
    /// get it if not. Rust guests need only `rustup target add
    /// wasm32-wasip2`.
    Install {
        #[arg(long, value_enum, required = true, num_args = 1..)]
        lang: Vec<kernbench::guest_build::toolchains::ToolLang>,
        /// Install here [default: $KERNBENCH_TOOLCHAINS, else the per-user
        /// directory, e.g. ~/.local/share/kernbench/toolchains].
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Where `build` looks for the toolchains, in order, and what it finds.
    Show,
}

pub fn run(cmd: ToolchainsCmd) -> Result<()> {
    use kernbench::guest_build::toolchains as tc;
    match cmd {
        ToolchainsCmd::Install { lang, dir } => {
            let dir = dir.or_else(tc::install_dir).context(
                "no per-user directory (no HOME): pass --dir or set KERNBENCH_TOOLCHAINS",
            )?;
            for l in lang {
                println!("{}", tc::install(l, &dir)?);
            }
        }
        ToolchainsCmd::Show => {
            println!("searched in this order (the first that has a tool wins):");
            for d in tc::search_dirs() {
                println!("  {}", d.display());
            }
            let found = |r: Result<PathBuf, _>| match r {
                Ok(p) => p.display().to_string(),
                Err(e) => format!("not found ({e})"),
            };
            println!("componentize-py: {}", found(tc::componentize_py()));
            println!("componentize-js: {}", found(tc::componentize_js()));
            println!("C compiler: {} (KERNBENCH_CC)", tc::c_compiler());
        }
    }
    Ok(())
}
