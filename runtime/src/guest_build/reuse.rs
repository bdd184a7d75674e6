//! Reuse of guest builds: the component each set of build inputs made.
//!
//! componentize-py and componentize-js pre-initialise the interpreter and
//! snapshot its heap, and that heap depends on build-time randomness and
//! clocks: the same source builds to different bytes each time
//! (bytecodealliance/componentize-py#247, ComponentizeJS#321). A new digest
//! means a new compile (seconds for a 18–38 MiB component) and a new entry
//! in the compiled-code cache on every rebuild. So `kernbench-host build`
//! keys the component it made for a Python or JavaScript source by the
//! SHA-256 of everything that goes into the build — the sources the tool
//! can import, the project manifest, the embedded SDK and WIT, the tool's
//! version and the `kernbench-host` release — and gives the same bytes back
//! when the inputs have not changed. On one machine the same source then
//! builds to the same bytes; another machine still builds its own.
//!
//! C guests are not kept: clang is reproducible, and a C source's headers
//! may live anywhere.
//!
//! An entry is `MAGIC`, the key, the SHA-256 of the component, then the
//! component. Nothing in it is trusted: an entry whose key or hash does not
//! match (damaged, or another entry copied over it) is deleted and the
//! source built again. At most [`MAX_ENTRIES`] entries are kept, least
//! recently used evicted first.

use super::{io, BuildError, Kind, Lang};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"KBBUILD1";
const HASH_LEN: usize = 32;
const EXT: &str = "kbbuild";
/// Entries kept (a Python component is 18–38 MiB).
pub const MAX_ENTRIES: usize = 16;
/// Past this many source files, or bytes of them, under the source's
/// directory, the build is not kept (hashing them would cost more than the
/// reuse saves, and such a directory is not a guest project).
const MAX_INPUT_FILES: usize = 10_000;
const MAX_INPUT_BYTES: u64 = 64 << 20;

/// The inputs of one build, hashed: the cache key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key([u8; HASH_LEN]);

impl Key {
    fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The files of the project around `source` that the build can read: for
/// Python every `.py` below its directory and `pyproject.toml` (componentize
/// -py is given the directory as a module path); for JavaScript the `.js`
/// and `.mjs` files beside it and `package.json` (what the builder copies).
/// Hidden directories, `__pycache__`, `node_modules` and `target` are not
/// searched. None when the directory is too large to hash.
fn project_files(source: &Path, lang: Lang) -> Result<Option<Vec<PathBuf>>, BuildError> {
    let dir = source.parent().unwrap_or(Path::new("."));
    let wanted = |p: &Path| -> bool {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let ext = p.extension().and_then(|e| e.to_str());
        match lang {
            Lang::Python => ext == Some("py") || name == "pyproject.toml",
            Lang::JavaScript => matches!(ext, Some("js" | "mjs")) || name == "package.json",
            Lang::C => false,
        }
    };
    let mut found = Vec::new();
    let mut bytes = 0u64;
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&d)
            .map_err(io(&d))?
            .collect::<Result<_, _>>()
            .map_err(io(&d))?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let ty = e.file_type().map_err(io(&p))?;
            let name = e.file_name();
            let name = name.to_string_lossy();
            if ty.is_dir() {
                let skip = name.starts_with('.')
                    || matches!(name.as_ref(), "__pycache__" | "node_modules" | "target");
                if lang == Lang::Python && !skip {
                    dirs.push(p);
                }
            } else if ty.is_file() && wanted(&p) {
                bytes = bytes.saturating_add(e.metadata().map_err(io(&p))?.len());
                found.push(p);
                if found.len() > MAX_INPUT_FILES || bytes > MAX_INPUT_BYTES {
                    return Ok(None);
                }
            }
        }
    }
    found.sort();
    Ok(Some(found))
}

/// The key of building `source` (a `lang` guest) as a `kind` component
/// with the tool at `tool`, or None when the build is not kept (C, or a
/// directory too large to hash).
pub fn key(source: &Path, lang: Lang, kind: Kind, tool: &Path) -> Result<Option<Key>, BuildError> {
    if lang == Lang::C {
        return Ok(None);
    }
    let source = std::fs::canonicalize(source).map_err(io(source))?;
    let Some(files) = project_files(&source, lang)? else {
        return Ok(None);
    };
    let dir = source.parent().unwrap_or(Path::new("."));
    let mut h = Sha256::new();
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(env!("CARGO_PKG_VERSION").as_bytes());
    field(format!("{lang:?} {}", kind.name()).as_bytes());
    field(super::WIT.as_bytes());
    match lang {
        Lang::Python => {
            field(super::python::COMPONENTIZE_PY.as_bytes());
            for (name, text) in super::python::SDK {
                field(name.as_bytes());
                field(text.as_bytes());
            }
        }
        Lang::JavaScript => {
            field(super::js::COMPONENTIZE_JS.as_bytes());
            field(super::js::SDK.as_bytes());
        }
        Lang::C => unreachable!("C builds are not kept"),
    }
    // The tool as installed: another install of it is another build.
    field(tool.to_string_lossy().as_bytes());
    if let Ok(m) = std::fs::metadata(tool) {
        field(&m.len().to_le_bytes());
        let mtime = m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        field(&mtime.to_le_bytes());
    }
    field(source.file_name().unwrap_or_default().as_encoded_bytes());
    for f in files {
        let rel = f.strip_prefix(dir).unwrap_or(&f);
        field(rel.as_os_str().as_encoded_bytes());
        field(
            &crate::files::read_bounded(&f, MAX_INPUT_BYTES).map_err(|e| BuildError::Io {
                path: f.clone(),
                source: std::io::Error::other(e.to_string()),
            })?,
        );
    }
    Ok(Some(Key(h.finalize().into())))
}

/// The kept builds, in one directory.
#[derive(Debug, Clone)]
pub struct BuildCache {
    dir: PathBuf,
}

impl BuildCache {
    /// The kept builds under `cache_dir` (the compiled-code cache's
    /// directory), in `builds/`.
    pub fn under(cache_dir: &Path) -> Self {
        BuildCache {
            dir: cache_dir.join("builds"),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &Key) -> PathBuf {
        self.dir.join(format!("{}.{EXT}", key.hex()))
    }

    /// The component built from the inputs `key`, if one is kept and
    /// intact (a damaged or swapped entry is deleted).
    pub fn get(&self, key: &Key) -> Option<Vec<u8>> {
        let path = self.path(key);
        let limit = crate::components::MAX_COMPONENT_BYTES + 80;
        let bytes = crate::files::read_bounded(&path, limit).ok()?;
        let head = MAGIC.len() + 2 * HASH_LEN;
        let intact = bytes.len() > head
            && bytes.starts_with(MAGIC)
            && bytes[MAGIC.len()..MAGIC.len() + HASH_LEN] == key.0
            && bytes[MAGIC.len() + HASH_LEN..head] == *Sha256::digest(&bytes[head..]);
        if !intact {
            tracing::warn!(
                "{}: a damaged kept build (not the one its name says): deleted, building again",
                path.display()
            );
            let _ = std::fs::remove_file(&path);
            return None;
        }
        // Mark it used, for eviction.
        if let Ok(f) = std::fs::File::options().append(true).open(&path) {
            let _ = f.set_modified(std::time::SystemTime::now());
        }
        Some(bytes[head..].to_vec())
    }

    /// Keep `wasm` as the build of `key`, then evict past [`MAX_ENTRIES`].
    pub fn put(&self, key: &Key, wasm: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        std::fs::create_dir_all(&self.dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir)?;
        tmp.write_all(MAGIC)?;
        tmp.write_all(&key.0)?;
        tmp.write_all(&Sha256::digest(wasm))?;
        tmp.write_all(wasm)?;
        let path = self.path(key);
        tmp.persist(&path).map_err(|e| e.error)?;
        self.evict(MAX_ENTRIES, &path);
        Ok(())
    }

    /// Every entry and its size, most recently used first.
    pub fn entries(&self) -> Vec<(PathBuf, u64)> {
        crate::runtime::compile_cache::entries_in(&self.dir, EXT)
            .into_iter()
            .map(|e| (e.path, e.bytes))
            .collect()
    }

    /// Remove the least recently used entries past `keep` (never `newest`,
    /// the entry just written, whatever the clock's resolution).
    fn evict(&self, keep: usize, newest: &Path) {
        let mut entries = self.entries();
        entries.retain(|(p, _)| p != newest);
        for (p, _) in entries.into_iter().skip(keep.saturating_sub(1)) {
            let _ = std::fs::remove_file(p);
        }
    }

    /// Remove every entry: (count, bytes).
    pub fn clear(&self) -> std::io::Result<(usize, u64)> {
        let entries = self.entries();
        let bytes = entries.iter().map(|(_, n)| n).sum();
        for (p, _) in &entries {
            std::fs::remove_file(p)?;
        }
        Ok((entries.len(), bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let p = d.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        d
    }

    fn py_key(d: &tempfile::TempDir) -> Key {
        key(
            &d.path().join("algo.py"),
            Lang::Python,
            Kind::Algorithm,
            Path::new("/nonexistent/componentize-py"),
        )
        .unwrap()
        .unwrap()
    }

    #[test]
    fn the_key_follows_what_the_build_can_read_and_nothing_else() {
        let d = project(&[("algo.py", "x = 1\n"), ("lib/helper.py", "y = 2\n")]);
        let k = py_key(&d);
        assert_eq!(k, py_key(&d), "same inputs, same key");
        // Outputs, caches and other files do not change it.
        std::fs::write(d.path().join("algo.wasm"), [0u8; 10]).unwrap();
        std::fs::write(d.path().join("notes.txt"), "n").unwrap();
        std::fs::create_dir_all(d.path().join("__pycache__")).unwrap();
        std::fs::write(d.path().join("__pycache__/algo.pyc"), "c").unwrap();
        std::fs::create_dir_all(d.path().join(".venv")).unwrap();
        std::fs::write(d.path().join(".venv/x.py"), "v").unwrap();
        assert_eq!(k, py_key(&d));
        // A module it could import, the manifest or the source does.
        std::fs::write(d.path().join("lib/helper.py"), "y = 3\n").unwrap();
        let k2 = py_key(&d);
        assert_ne!(k, k2);
        std::fs::write(d.path().join("pyproject.toml"), "[project]\n").unwrap();
        let k3 = py_key(&d);
        assert_ne!(k2, k3);
        let bench = key(
            &d.path().join("algo.py"),
            Lang::Python,
            Kind::Bench,
            Path::new("/nonexistent/componentize-py"),
        )
        .unwrap()
        .unwrap();
        assert_ne!(k3, bench, "the kind is an input");
        // C is not kept.
        let c = key(
            &d.path().join("algo.py"),
            Lang::C,
            Kind::Algorithm,
            Path::new("cc"),
        );
        assert_eq!(c.unwrap(), None);
    }

    #[test]
    fn a_kept_build_comes_back_whole_and_a_swapped_one_does_not() {
        let d = project(&[("algo.py", "x = 1\n"), ("other.py", "")]);
        let cache = BuildCache::under(d.path());
        let k = py_key(&d);
        assert_eq!(cache.get(&k), None);
        cache.put(&k, b"\0asm component one").unwrap();
        assert_eq!(cache.get(&k).unwrap(), b"\0asm component one");
        // Another entry copied over this one: refused and deleted.
        std::fs::write(d.path().join("other.py"), "z = 1").unwrap();
        let k2 = py_key(&d);
        cache.put(&k2, b"\0asm component two").unwrap();
        std::fs::copy(cache.path(&k2), cache.path(&k)).unwrap();
        assert_eq!(cache.get(&k), None);
        assert!(!cache.path(&k).exists());
        // A flipped byte: refused.
        let mut bytes = std::fs::read(cache.path(&k2)).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        std::fs::write(cache.path(&k2), bytes).unwrap();
        assert_eq!(cache.get(&k2), None);
    }

    #[test]
    fn at_most_max_entries_are_kept() {
        let d = project(&[("algo.py", "")]);
        let cache = BuildCache::under(d.path());
        for i in 0..MAX_ENTRIES + 3 {
            let k = Key([i as u8; HASH_LEN]);
            cache.put(&k, &[i as u8; 4]).unwrap();
        }
        assert_eq!(cache.entries().len(), MAX_ENTRIES);
        let (n, bytes) = cache.clear().unwrap();
        assert_eq!(n, MAX_ENTRIES);
        assert!(bytes > 0);
        assert!(cache.entries().is_empty());
    }
}
