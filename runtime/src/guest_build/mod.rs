//! The guest builder: turns an algorithm or bench written in another
//! language into a KernBench component (`kernbench-host build`). C goes
//! through clang for wasm32-wasi with wasi-libc, bindings generated from
//! our WIT and the C SDK ([`c`]); Python through componentize-py and the
//! Python SDK ([`python`]); JavaScript through componentize-js and the
//! JavaScript SDK ([`js`]). The WIT and the SDKs are embedded, so a build
//! needs no KernBench checkout, only the language's toolchain. What a
//! Python or JavaScript build made is kept for its inputs ([`reuse`]), so
//! the same source gives the same bytes.

pub mod c;
pub mod js;
pub mod metadata;
pub mod python;
pub mod reuse;
pub mod scaffold;
pub mod toolchains;

use std::path::{Path, PathBuf};

/// The world a component implements.
pub use crate::components::Kind;

/// A source language, from the file's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    C,
    Python,
    JavaScript,
}

/// Why a guest could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{0}: don't know how to build it (C: .c, Python: .py, JavaScript: .js / .mjs)")]
    UnknownLanguage(PathBuf),
    #[error("{what} not found: {install}")]
    MissingToolchain { what: String, install: String },
    #[error("{lang} guests cannot be a {kind} yet (algorithms only)")]
    Unsupported {
        lang: &'static str,
        kind: &'static str,
    },
    #[error("{tool} failed for {source_file}:\n{output}")]
    ToolFailed {
        tool: String,
        source_file: PathBuf,
        output: String,
    },
    #[error("{0}")]
    Wit(String),
    #[error("{0}")]
    BadName(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BuildError + '_ {
    move |source| BuildError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `Ok` if the tool's run `r` succeeded, else its output as the error.
pub(crate) fn succeeded(
    r: std::process::Output,
    tool: &str,
    source: &Path,
) -> Result<(), BuildError> {
    if r.status.success() {
        return Ok(());
    }
    Err(BuildError::ToolFailed {
        tool: tool.to_string(),
        source_file: source.to_path_buf(),
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&r.stdout),
            String::from_utf8_lossy(&r.stderr)
        ),
    })
}

/// The embedded WIT package the host implements.
pub const WIT: &str = include_str!("../../../wit/kernbench.wit");

/// Write the embedded WIT into `dir/wit/` and return that directory.
pub(crate) fn write_wit(dir: &Path) -> Result<PathBuf, BuildError> {
    let wit = dir.join("wit");
    std::fs::create_dir_all(&wit).map_err(io(&wit))?;
    let f = wit.join("kernbench.wit");
    std::fs::write(&f, WIT).map_err(io(&f))?;
    Ok(wit)
}

/// The language of `source`.
pub fn lang_of(source: &Path) -> Result<Lang, BuildError> {
    match source.extension().and_then(|e| e.to_str()) {
        Some("c") => Ok(Lang::C),
        Some("py") => Ok(Lang::Python),
        Some("js" | "mjs") => Ok(Lang::JavaScript),
        _ => Err(BuildError::UnknownLanguage(source.to_path_buf())),
    }
}

/// Build `source` (its language from its extension) as a `kind` component
/// into `out`.
pub fn build(source: &Path, kind: Kind, out: &Path) -> Result<(), BuildError> {
    let lang = lang_of(source)?;
    let sdk = match lang {
        Lang::C => {
            c::build(source, kind, out)?;
            "kernbench C SDK (wit-bindgen-c, clang)".to_string()
        }
        Lang::Python => {
            python::build(source, kind, out)?;
            format!(
                "kernbench Python SDK (componentize-py {})",
                python::COMPONENTIZE_PY
            )
        }
        Lang::JavaScript => {
            js::build(source, kind, out)?;
            format!(
                "kernbench JavaScript SDK (componentize-js {})",
                js::COMPONENTIZE_JS
            )
        }
    };
    metadata::stamp(out, source, kind, lang, &sdk)
}

/// Whether [`build_reusing`] built the source or gave back a kept build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Built {
    Fresh,
    Reused,
}

/// [`build`], giving back the component the same inputs built before when
/// `cache` keeps one ([`reuse`]: the same source, SDK, WIT and tool give the
/// same bytes), and keeping what it builds.
pub fn build_reusing(
    source: &Path,
    kind: Kind,
    out: &Path,
    cache: Option<&reuse::BuildCache>,
) -> Result<Built, BuildError> {
    let lang = lang_of(source)?;
    let key = match (cache, lang) {
        (Some(_), Lang::Python) => reuse::key(source, lang, kind, &toolchains::componentize_py()?)?,
        (Some(_), Lang::JavaScript) => {
            reuse::key(source, lang, kind, &toolchains::componentize_js()?)?
        }
        _ => None,
    };
    let kept = cache.zip(key.as_ref());
    if let Some((cache, key)) = kept {
        if let Some(wasm) = cache.get(key) {
            std::fs::write(out, wasm).map_err(io(out))?;
            return Ok(Built::Reused);
        }
    }
    build(source, kind, out)?;
    if let Some((cache, key)) = kept {
        let wasm = std::fs::read(out).map_err(io(out))?;
        if let Err(e) = cache.put(key, &wasm) {
            tracing::warn!(
                "could not keep the build in {}: {e} (the next build of the same source \
                 will give other bytes)",
                cache.dir().display()
            );
        }
    }
    Ok(Built::Fresh)
}
