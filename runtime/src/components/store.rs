//! Installed components: the per-user components directory
//! (`$KERNBENCH_DATA_DIR/components`, else
//! `$XDG_DATA_HOME/kernbench/components`), one folder per kind, each
//! component as `<name>.wasm` beside `<name>.json`, its record (version,
//! digest, where it came from). `kernbench-host install` writes here,
//! `list --installed` and `remove` read and delete, and the loader
//! resolves names here after `--components-dir` and before the built-in
//! components.
//!
//! Nothing installed is trusted blindly: `install` refuses what is not a
//! KernBench component this host runs, and every load checks the file
//! against the digest its record holds.

use super::metadata::{self, ComponentInfo};
use super::Kind;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where an installed component came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// A file on this machine.
    File { path: String },
    /// An OCI registry: the reference asked for and the manifest digest
    /// it resolved to.
    Oci { reference: String, manifest: String },
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::File { path } => write!(f, "{path}"),
            Origin::Oci {
                reference,
                manifest,
            } => write!(f, "{reference} ({manifest})"),
        }
    }
}

/// The record beside an installed component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub name: String,
    pub kind: String,
    pub version: Option<String>,
    /// `sha256:<hex>` of the .wasm.
    pub digest: String,
    pub bytes: u64,
    /// `kernbench:sim@X.Y.Z` it was built against.
    pub wit: Option<String>,
    pub origin: Origin,
}

/// What `install` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installed {
    New(Record),
    /// The same bytes were already installed under that name.
    Unchanged(Record),
    /// Another build was installed under that name; it was replaced.
    Replaced {
        old: Record,
        new: Record,
    },
}

/// Why a component cannot be installed, found or loaded.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Metadata(#[from] metadata::MetadataError),
    #[error("{what} is not a KernBench algorithm or bench: it exports neither kernel + kernel-args nor run + worker")]
    NotKernbench { what: String },
    #[error("{what} cannot run on this host: {why}")]
    Incompatible { what: String, why: String },
    #[error("'{name}' is not a usable component name (letters, digits, '_' and '-', starting with a letter)")]
    BadName { name: String },
    #[error("no installed component named '{name}' (see `kernbench-host list --installed`)")]
    NotInstalled { name: String },
    #[error(
        "the installed {kind} '{name}' ({path}) does not match the digest recorded when it was \
         installed ({want}, file has {got}): it was changed or damaged since; reinstall it \
         (`kernbench-host install ...`) or remove it (`kernbench-host remove {name}`)"
    )]
    Tampered {
        kind: &'static str,
        name: String,
        path: String,
        want: String,
        got: String,
    },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Read(#[from] crate::files::ReadError),
    #[error("{path}: a damaged install record: {message}")]
    BadRecord { path: String, message: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// A name a component may be installed (and resolved) under.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && name.len() <= 128
}

/// The per-user components directory.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

fn folder(kind: Kind) -> &'static str {
    match kind {
        Kind::Algorithm => "algorithms",
        Kind::Bench => "benches",
    }
}

/// The per-user data directory: `$KERNBENCH_DATA_DIR`, else the
/// platform's (`~/.local/share/kernbench` on Linux); None without either.
/// It holds the installed components and the guest toolchains.
pub fn data_dir() -> Option<PathBuf> {
    match std::env::var_os("KERNBENCH_DATA_DIR") {
        Some(d) if !d.is_empty() => Some(PathBuf::from(d)),
        _ => Some(
            directories::ProjectDirs::from("", "", "kernbench")?
                .data_dir()
                .to_path_buf(),
        ),
    }
}

impl Store {
    /// The store at its configured place (None: no home directory and no
    /// `KERNBENCH_DATA_DIR`).
    pub fn from_env() -> Option<Self> {
        Some(Store::at(data_dir()?.join("components")))
    }

    pub fn at(root: PathBuf) -> Self {
        Store { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn paths(&self, kind: Kind, name: &str) -> (PathBuf, PathBuf) {
        let dir = self.root.join(folder(kind));
        (
            dir.join(format!("{name}.wasm")),
            dir.join(format!("{name}.json")),
        )
    }

    /// Install `wasm` (already read and, for a pull, digest-checked) under
    /// `name` (None: the name it gives itself, else `fallback_name`).
    pub fn install(
        &self,
        wasm: &[u8],
        name: Option<&str>,
        fallback_name: &str,
        origin: Origin,
        what: &str,
    ) -> Result<Installed, StoreError> {
        let info = metadata::read(wasm)?;
        let kind = info.kind.ok_or_else(|| StoreError::NotKernbench {
            what: what.to_string(),
        })?;
        match &info.verdict {
            Ok(_) => {}
            Err(e) => {
                return Err(StoreError::Incompatible {
                    what: what.to_string(),
                    why: e.to_string(),
                })
            }
        }
        let name = name
            .or(info.name())
            .unwrap_or(fallback_name)
            .replace('-', "_");
        if !valid_name(&name) {
            return Err(StoreError::BadName { name });
        }
        let record = record_of(&info, &name, kind, origin);
        let (wasm_path, json_path) = self.paths(kind, &name);
        let old = self.record(kind, &name).ok().flatten();
        if let Some(old) = &old {
            if old.digest == record.digest && wasm_path.is_file() {
                return Ok(Installed::Unchanged(old.clone()));
            }
        }
        let dir = wasm_path.parent().expect("a folder");
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        // The record last: a half-written install has no record, and a
        // file without a record is not resolved.
        write_atomic(&wasm_path, wasm)?;
        let json = serde_json::to_vec_pretty(&record).expect("a record serialises");
        write_atomic(&json_path, &json)?;
        Ok(match old {
            Some(old) => Installed::Replaced { old, new: record },
            None => Installed::New(record),
        })
    }

    /// The record of an installed component, None if there is none.
    pub fn record(&self, kind: Kind, name: &str) -> Result<Option<Record>, StoreError> {
        let (_, json) = self.paths(kind, name);
        // A record is a few hundred bytes; 1 MiB bounds a damaged one.
        let text = match crate::files::read_bounded(&json, 1 << 20) {
            Ok(t) => t,
            Err(crate::files::ReadError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                return Ok(None)
            }
            Err(e) => return Err(e.into()),
        };
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|e| StoreError::BadRecord {
                path: json.display().to_string(),
                message: e.to_string(),
            })
    }

    /// The installed `kind` component `name`: its file, checked against
    /// its record's digest. None when nothing of that name is installed.
    pub fn find(&self, kind: Kind, name: &str) -> Result<Option<(PathBuf, Vec<u8>)>, StoreError> {
        if !valid_name(name) {
            return Ok(None);
        }
        let Some(record) = self.record(kind, name)? else {
            return Ok(None);
        };
        let (wasm_path, _) = self.paths(kind, name);
        let wasm = crate::files::read_bounded(&wasm_path, super::MAX_COMPONENT_BYTES)?;
        let got = crate::digest::oci_digest(&wasm);
        if got != record.digest {
            return Err(StoreError::Tampered {
                kind: kind.name(),
                name: name.to_string(),
                path: wasm_path.display().to_string(),
                want: record.digest,
                got,
            });
        }
        Ok(Some((wasm_path, wasm)))
    }

    /// Every installed component, by kind then name.
    pub fn list(&self) -> Vec<Result<Record, StoreError>> {
        let mut out = Vec::new();
        for kind in [Kind::Algorithm, Kind::Bench] {
            let dir = self.root.join(folder(kind));
            let mut names: Vec<String> = std::fs::read_dir(&dir)
                .into_iter()
                .flatten()
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let p = e.path();
                    (p.extension()? == "json").then(|| p.file_stem()?.to_str().map(String::from))?
                })
                .collect();
            names.sort();
            for n in names {
                match self.record(kind, &n) {
                    Ok(Some(r)) => out.push(Ok(r)),
                    Ok(None) => {}
                    Err(e) => out.push(Err(e)),
                }
            }
        }
        out
    }

    /// Remove every installed component named `name` (of either kind);
    /// the records of what was removed.
    pub fn remove(&self, name: &str) -> Result<Vec<Record>, StoreError> {
        let mut removed = Vec::new();
        for kind in [Kind::Algorithm, Kind::Bench] {
            if !valid_name(name) {
                break;
            }
            let (wasm, json) = self.paths(kind, name);
            let record = self.record(kind, name).ok().flatten();
            let had = json.exists() || wasm.exists();
            for p in [&json, &wasm] {
                match std::fs::remove_file(p) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io(p)(e)),
                }
            }
            if had {
                removed.push(record.unwrap_or(Record {
                    name: name.to_string(),
                    kind: kind.name().to_string(),
                    version: None,
                    digest: "(no record)".into(),
                    bytes: 0,
                    wit: None,
                    origin: Origin::File {
                        path: wasm.display().to_string(),
                    },
                }));
            }
        }
        if removed.is_empty() {
            return Err(StoreError::NotInstalled {
                name: name.to_string(),
            });
        }
        Ok(removed)
    }
}

fn record_of(info: &ComponentInfo, name: &str, kind: Kind, origin: Origin) -> Record {
    Record {
        name: name.to_string(),
        kind: kind.name().to_string(),
        version: info.version().map(String::from),
        digest: info.digest(),
        bytes: info.bytes,
        wit: info
            .wit_versions
            .first()
            .map(|v| super::compat::package_at(v)),
        origin,
    }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    use std::io::Write;
    let dir = path.parent().expect("a folder");
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io(dir))?;
    tmp.write_all(bytes).map_err(io(path))?;
    tmp.persist(path).map_err(|e| io(path)(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_identifiers() {
        for ok in ["ring_allreduce", "a", "my-algo2"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "1ring", "../x", "a/b", "a.wasm", "a b"] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn what_is_not_a_kernbench_component_is_not_installed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::at(dir.path().to_path_buf());
        let empty = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
        let e = store
            .install(
                &empty,
                None,
                "x",
                Origin::File { path: "x".into() },
                "x.wasm",
            )
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("is not a KernBench algorithm or bench"),
            "{e}"
        );
        assert!(store.list().is_empty());
        assert!(matches!(
            store.remove("x"),
            Err(StoreError::NotInstalled { .. })
        ));
    }
}
