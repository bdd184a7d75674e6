//! The guest toolchains: where `build` finds componentize-py,
//! componentize-js and a C compiler for wasm32-wasi, and how
//! `kernbench-host toolchains install` puts the first two there.
//!
//! A toolchain directory holds `venv/` (componentize-py in a Python venv)
//! and `node/` (componentize-js in an npm project). They are searched in
//! this order, and the first that has the tool wins:
//!
//! 0. the directory a program embedding the builder gave
//!    ([`search_first`]);
//! 1. `$KERNBENCH_TOOLCHAINS`;
//! 2. the per-user directory, `$KERNBENCH_DATA_DIR/toolchains`, else the
//!    platform's data directory (`~/.local/share/kernbench/toolchains` on
//!    Linux) — where `toolchains install` puts them;
//! 3. `.toolchains/` of the current directory (a KernBench checkout, where
//!    `scripts/guest-toolchains.sh` puts them);
//!
//! and then `PATH` (componentize-py only). A tool that is found nowhere is
//! an error naming every place tried and the command that installs it.

use super::BuildError;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The componentize-py release the Python SDK is tested with.
pub const COMPONENTIZE_PY: &str = "0.25.1";
/// The componentize-js release the JavaScript SDK is tested with.
pub const COMPONENTIZE_JS: &str = "0.23.0";
/// Debian's packages that give clang for wasm32-wasi with wasi-libc.
pub const C_PACKAGES: &str = "clang lld wasi-libc libclang-rt-dev-wasm32";

/// A guest language whose toolchain can be installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ToolLang {
    Python,
    Js,
    C,
}

/// The per-user toolchain directory (None: no home directory and no
/// `KERNBENCH_DATA_DIR`).
pub fn user_dir() -> Option<PathBuf> {
    crate::components::store::data_dir().map(|d| d.join("toolchains"))
}

/// A directory searched before all others, set by a program that embeds
/// the builder (a test binary, whose threads make `set_var` unsound).
static FIRST: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Search `dir` first, before `$KERNBENCH_TOOLCHAINS`, for the rest of
/// the process; false if a first directory was already set.
pub fn search_first(dir: PathBuf) -> bool {
    FIRST.set(dir).is_ok()
}

/// The toolchain directories, in the order they are searched.
pub fn search_dirs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = FIRST.get().cloned().into_iter().collect();
    if let Some(d) = std::env::var_os("KERNBENCH_TOOLCHAINS").filter(|d| !d.is_empty()) {
        v.push(PathBuf::from(d));
    }
    v.extend(user_dir());
    v.push(PathBuf::from(".toolchains"));
    v
}

/// Where `toolchains install` writes: `$KERNBENCH_TOOLCHAINS` when set,
/// else the per-user directory.
pub fn install_dir() -> Option<PathBuf> {
    match std::env::var_os("KERNBENCH_TOOLCHAINS").filter(|d| !d.is_empty()) {
        Some(d) => Some(PathBuf::from(d)),
        None => user_dir(),
    }
}

const PY_IN_DIR: &str = "venv/bin/componentize-py";
const JS_IN_DIR: &str = "node/node_modules/@bytecodealliance/componentize-js/src/cli.js";

fn not_found(what: &str, tried: Vec<String>, fix: &str) -> BuildError {
    BuildError::MissingToolchain {
        what: what.into(),
        install: format!("tried {}.\n  fix: {fix}", tried.join(", ")),
    }
}

/// `rel` in the first toolchain directory that has it, else the paths
/// tried.
fn in_search_dirs(rel: &str) -> Result<PathBuf, Vec<String>> {
    let mut tried = Vec::new();
    for d in search_dirs() {
        let p = d.join(rel);
        if p.exists() {
            return Ok(p);
        }
        tried.push(p.display().to_string());
    }
    Err(tried)
}

/// componentize-py: `$KERNBENCH_COMPONENTIZE_PY`, else the one in the
/// first toolchain directory that has it, else on `PATH`.
pub fn componentize_py() -> Result<PathBuf, BuildError> {
    if let Some(p) = std::env::var_os("KERNBENCH_COMPONENTIZE_PY") {
        return Ok(p.into());
    }
    let mut tried = match in_search_dirs(PY_IN_DIR) {
        Ok(p) => return Ok(p),
        Err(tried) => tried,
    };
    if Command::new("componentize-py")
        .arg("--version")
        .output()
        .is_ok()
    {
        return Ok("componentize-py".into());
    }
    tried.push("componentize-py on PATH".into());
    Err(not_found(
        "componentize-py (the Python guests' compiler)",
        tried,
        "kernbench-host toolchains install --lang python",
    ))
}

/// componentize-js's CLI script: `$KERNBENCH_COMPONENTIZE_JS`, else the
/// one in the first toolchain directory that has it.
pub fn componentize_js() -> Result<PathBuf, BuildError> {
    if let Some(p) = std::env::var_os("KERNBENCH_COMPONENTIZE_JS") {
        return Ok(p.into());
    }
    let tried = match in_search_dirs(JS_IN_DIR) {
        Ok(p) => return Ok(p),
        Err(tried) => tried,
    };
    Err(not_found(
        "componentize-js (the JavaScript guests' compiler)",
        tried,
        "kernbench-host toolchains install --lang js (needs Node.js 18 or later with npm)",
    ))
}

/// The C compiler: `$KERNBENCH_CC`, else `clang`.
pub fn c_compiler() -> String {
    std::env::var("KERNBENCH_CC").unwrap_or_else(|_| "clang".into())
}

/// Whether the C compiler builds a wasm32-wasi reactor here.
fn c_works() -> bool {
    let Ok(tmp) = tempfile::tempdir() else {
        return false;
    };
    let src = tmp.path().join("probe.c");
    if std::fs::write(&src, "int f(void){return 1;}\n").is_err() {
        return false;
    }
    Command::new(c_compiler())
        .args(["--target=wasm32-wasi", "-mexec-model=reactor", "-O2"])
        .arg(&src)
        .arg("-o")
        .arg(tmp.path().join("probe.wasm"))
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Why an install did not complete.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("no place to install into: set KERNBENCH_TOOLCHAINS (or KERNBENCH_DATA_DIR, or HOME)")]
    NoDirectory,
    #[error("{what} failed ({status}); the command was: {command}\n{output}")]
    Failed {
        what: &'static str,
        status: String,
        command: String,
        output: String,
    },
    #[error("{0}")]
    Missing(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn run(what: &'static str, cmd: &mut Command) -> Result<(), InstallError> {
    let command = format!("{cmd:?}");
    let out = cmd.output().map_err(|e| InstallError::Failed {
        what,
        status: e.to_string(),
        command: command.clone(),
        output: String::new(),
    })?;
    if out.status.success() {
        return Ok(());
    }
    let mut output = String::from_utf8_lossy(&out.stderr).into_owned();
    // The end of a long pip or npm log says what went wrong.
    if output.len() > 4000 {
        output = format!("...{}", &output[output.len() - 4000..]);
    }
    Err(InstallError::Failed {
        what,
        status: out.status.to_string(),
        command,
        output,
    })
}

/// Install the toolchain of `lang` into `dir` (idempotent: a toolchain of
/// the pinned version already there is left as it is). What was done, in
/// one line.
pub fn install(lang: ToolLang, dir: &Path) -> Result<String, InstallError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| InstallError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    match lang {
        ToolLang::Python => {
            let tool = dir.join(PY_IN_DIR);
            let have = Command::new(&tool)
                .arg("--version")
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(COMPONENTIZE_PY));
            if have {
                return Ok(format!(
                    "componentize-py {COMPONENTIZE_PY} is already in {}",
                    tool.display()
                ));
            }
            let venv = dir.join("venv");
            run(
                "creating a Python venv (needs Python 3.10 or later with venv)",
                Command::new("python3").arg("-m").arg("venv").arg(&venv),
            )?;
            run(
                "pip install componentize-py",
                Command::new(venv.join("bin/pip"))
                    .args(["install", "--quiet", "--disable-pip-version-check"])
                    .arg(format!("componentize-py=={COMPONENTIZE_PY}"))
                    .env_remove("VIRTUAL_ENV"),
            )?;
            Ok(format!(
                "installed componentize-py {COMPONENTIZE_PY} into {}",
                tool.display()
            ))
        }
        ToolLang::Js => {
            let node = dir.join("node");
            let manifest = node.join("node_modules/@bytecodealliance/componentize-js/package.json");
            let have = std::fs::read_to_string(&manifest)
                .is_ok_and(|t| t.contains(&format!("\"version\": \"{COMPONENTIZE_JS}\"")));
            if have {
                return Ok(format!(
                    "componentize-js {COMPONENTIZE_JS} is already in {}",
                    node.display()
                ));
            }
            std::fs::create_dir_all(&node).map_err(io(&node))?;
            let pkg = node.join("package.json");
            if !pkg.exists() {
                std::fs::write(&pkg, "{\"private\": true}\n").map_err(io(&pkg))?;
            }
            run(
                "npm install componentize-js (needs Node.js 18 or later with npm)",
                Command::new("npm")
                    .current_dir(&node)
                    .args(["install", "--silent", "--no-audit", "--no-fund"])
                    .arg(format!(
                        "@bytecodealliance/componentize-js@{COMPONENTIZE_JS}"
                    )),
            )?;
            Ok(format!(
                "installed componentize-js {COMPONENTIZE_JS} into {}",
                node.display()
            ))
        }
        ToolLang::C => {
            if c_works() {
                Ok(format!(
                    "{} builds wasm32-wasi components: nothing to install",
                    c_compiler()
                ))
            } else {
                Err(InstallError::Missing(format!(
                    "C guests use the system's clang for wasm32-wasi with wasi-libc, which `{}` is not; \
                     install it with your package manager: on Debian/Ubuntu `sudo apt-get install {C_PACKAGES}` \
                     (or set KERNBENCH_CC to a clang that has them, e.g. wasi-sdk's, with WASI_SYSROOT)",
                    c_compiler()
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_compiler_names_every_place_tried_and_the_fix() {
        let tried = vec![
            "/a/venv/bin/componentize-py".to_string(),
            "componentize-py on PATH".into(),
        ];
        let e = not_found(
            "componentize-py",
            tried,
            "kernbench-host toolchains install --lang python",
        );
        let s = e.to_string();
        assert!(
            s.contains("/a/venv/bin/componentize-py, componentize-py on PATH"),
            "{s}"
        );
        assert!(
            s.ends_with("fix: kernbench-host toolchains install --lang python"),
            "{s}"
        );
    }
}
