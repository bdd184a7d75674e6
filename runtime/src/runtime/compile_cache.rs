//! The precompiled-component cache: compiled code of each component, keyed
//! by the component's content hash and the engine's compatibility hash,
//! in the user's cache directory (`$KERNBENCH_CACHE_DIR`, else
//! `$XDG_CACHE_HOME/kernbench/compiled`), under a size cap
//! (`$KERNBENCH_CACHE_MAX_MIB`, default 1024) that evicts the least
//! recently used entries.
//!
//! An entry is `MAGIC`, the SHA-256 of the component it was compiled
//! from, the SHA-256 of the code, then the code as `Component::serialize`
//! wrote it. Nothing in an entry is trusted: a wrong magic or code hash (a
//! truncated or corrupt file), a component digest other than the one being
//! loaded (another component's sound entry copied over this one's name),
//! or code that wasmtime refuses (another engine, another wasmtime) is
//! deleted and the component compiled again. The key makes a stale entry
//! unreachable: a changed component or engine configuration looks up
//! another file.

use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;
use wasmtime::component::Component;
use wasmtime::Engine;

const MAGIC: &[u8; 8] = b"KBCWASM2";
/// The entries of kernbench-host releases that did not record the
/// component's digest: replaced quietly.
const OLD_MAGIC: &[u8; 8] = b"KBCWASM1";
const HASH_LEN: usize = 32;
/// The cap when `KERNBENCH_CACHE_MAX_MIB` does not say.
pub const DEFAULT_MAX_MIB: u64 = 1024;
const EXT: &str = "cwasm";

/// Where compiled components live and how much room they may take.
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: PathBuf,
    max_bytes: u64,
}

/// What one lookup found (the loader reports it at debug level; `inspect`
/// shows whether an entry exists).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    Hit,
    Miss,
    /// The entry existed but failed its checks; it was removed.
    Rejected(String),
}

/// One file of the cache (`cache show`).
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: PathBuf,
    pub bytes: u64,
    pub last_used: SystemTime,
}

/// The files of `dir` ending in `.ext`, most recently used (modified)
/// first: the entries of a cache directory kept under an LRU cap (this
/// one's, and the kept guest builds').
pub fn entries_in(dir: &Path, ext: &str) -> Vec<Entry> {
    let mut v: Vec<Entry> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == ext))
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            Some(Entry {
                path: e.path(),
                bytes: m.len(),
                last_used: m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            })
        })
        .collect();
    v.sort_by(|a, b| b.last_used.cmp(&a.last_used).then(a.path.cmp(&b.path)));
    v
}

/// A 64-bit digest of everything about the engine that decides whether
/// compiled code can be reused (wasmtime version, target, settings).
fn engine_hash(engine: &Engine) -> String {
    // SipHash with fixed keys: stable for a given build of the binary,
    // which is all a cache key needs.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    env!("CARGO_PKG_VERSION").hash(&mut h);
    format!("{:016x}", h.finish())
}

impl CompileCache {
    /// The cache at its configured place, or None when no cache directory
    /// can be named (no `$HOME`).
    pub fn from_env() -> Option<Self> {
        let dir = match std::env::var_os("KERNBENCH_CACHE_DIR") {
            Some(d) if !d.is_empty() => PathBuf::from(d),
            _ => directories::ProjectDirs::from("", "", "kernbench")?
                .cache_dir()
                .join("compiled"),
        };
        let max_mib = std::env::var("KERNBENCH_CACHE_MAX_MIB")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(DEFAULT_MAX_MIB);
        Some(CompileCache::new(dir, max_mib.saturating_mul(1 << 20)))
    }

    pub fn new(dir: PathBuf, max_bytes: u64) -> Self {
        CompileCache { dir, max_bytes }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The file that holds (or would hold) `wasm` compiled by `engine`.
    pub fn path_for(&self, engine: &Engine, wasm: &[u8]) -> PathBuf {
        self.dir.join(format!(
            "{}-{}.{EXT}",
            crate::digest::sha256_hex(wasm),
            engine_hash(engine)
        ))
    }

    /// `wasm` compiled by `engine`: from the cache when a sound entry
    /// exists, else compiled (by `compile`) and stored. Cache failures
    /// (unwritable directory, full disk) only cost the store: the compiled
    /// component is returned all the same.
    pub fn get_or_compile(
        &self,
        engine: &Engine,
        wasm: &[u8],
        compile: impl FnOnce() -> wasmtime::Result<Component>,
    ) -> wasmtime::Result<(Component, Lookup)> {
        let path = self.path_for(engine, wasm);
        let digest: [u8; HASH_LEN] = Sha256::digest(wasm).into();
        let lookup = match self.load(engine, &path, &digest) {
            Ok(Some(c)) => return Ok((c, Lookup::Hit)),
            Ok(None) => Lookup::Miss,
            Err(why) => {
                tracing::warn!(
                    "compiled-code cache: {} {why}; removed it and compiling again",
                    path.display()
                );
                let _ = std::fs::remove_file(&path);
                Lookup::Rejected(why)
            }
        };
        let component = compile()?;
        match component.serialize() {
            Ok(code) => {
                if let Err(e) = self.store(&path, &digest, &code) {
                    tracing::warn!("compiled-code cache: cannot write {}: {e}", path.display());
                } else {
                    self.evict_to_cap(&path);
                }
            }
            Err(e) => tracing::warn!("compiled-code cache: cannot serialise: {e}"),
        }
        Ok((component, lookup))
    }

    /// A sound entry at `path`, None when there is none, Err(why) when the
    /// entry fails a check.
    fn load(
        &self,
        engine: &Engine,
        path: &Path,
        component: &[u8; HASH_LEN],
    ) -> Result<Option<Component>, String> {
        use crate::files::{read_bounded, ReadError};
        // Compiled code is a few times its component, which is at most
        // MAX_COMPONENT_BYTES.
        let limit = crate::components::MAX_COMPONENT_BYTES.saturating_mul(8);
        let bytes = match read_bounded(path, limit) {
            Ok(b) => b,
            Err(ReadError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Ok(None)
            }
            Err(e) => return Err(format!("cannot be read ({e})")),
        };
        if bytes.starts_with(OLD_MAGIC) {
            // Written by an older kernbench-host: not an error, a miss.
            tracing::debug!("compiled-code cache: {} is an older entry", path.display());
            let _ = std::fs::remove_file(path);
            return Ok(None);
        }
        let code = verify_entry(&bytes, component)?;
        // SAFETY: `code` is exactly what `Component::serialize` wrote when
        // it compiled this component (its SHA-256 matches the one stored
        // beside it, and so does the component's), in a directory of the
        // user's own; wasmtime further checks that it was compiled by a
        // compatible engine.
        let component = unsafe { Component::deserialize(engine, code) }
            .map_err(|e| format!("was refused by wasmtime ({e})"))?;
        // Mark it used (for the LRU cap); failing to is harmless.
        if let Ok(f) = std::fs::File::options().append(true).open(path) {
            let _ = f.set_modified(SystemTime::now());
        }
        Ok(Some(component))
    }

    fn store(&self, path: &Path, component: &[u8; HASH_LEN], code: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir)?;
        tmp.write_all(MAGIC)?;
        tmp.write_all(component)?;
        tmp.write_all(&Sha256::digest(code))?;
        tmp.write_all(code)?;
        tmp.as_file().sync_all()?;
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(())
    }

    /// Every entry, most recently used first.
    pub fn entries(&self) -> Vec<Entry> {
        entries_in(&self.dir, EXT)
    }

    /// Remove least recently used entries until the cache fits its cap
    /// (never `keep`, the entry just written).
    fn evict_to_cap(&self, keep: &Path) {
        let entries = self.entries();
        let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
        for e in entries.iter().rev() {
            if total <= self.max_bytes {
                break;
            }
            if e.path == keep {
                continue;
            }
            if std::fs::remove_file(&e.path).is_ok() {
                total -= e.bytes;
            }
        }
    }

    /// Remove every entry; returns (files, bytes) removed.
    pub fn clear(&self) -> std::io::Result<(usize, u64)> {
        let mut n = (0, 0);
        for e in self.entries() {
            std::fs::remove_file(&e.path)?;
            n.0 += 1;
            n.1 += e.bytes;
        }
        Ok(n)
    }
}

/// The code of a cache file, if its magic and hash hold and it was
/// compiled from `component` (its SHA-256).
fn verify_entry<'a>(bytes: &'a [u8], component: &[u8; HASH_LEN]) -> Result<&'a [u8], String> {
    let head = MAGIC.len() + 2 * HASH_LEN;
    if bytes.len() < head || &bytes[..MAGIC.len()] != MAGIC {
        return Err("is not a KernBench cache entry (bad header)".into());
    }
    let (from, rest) = bytes[MAGIC.len()..].split_at(HASH_LEN);
    if from != component {
        return Err(
            "was compiled from another component (an entry copied over this one's name)".into(),
        );
    }
    let (want, code) = rest.split_at(HASH_LEN);
    if Sha256::digest(code).as_slice() != want {
        return Err("is corrupt or truncated (its hash does not match)".into());
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> Engine {
        let mut c = wasmtime::Config::new();
        c.wasm_component_model(true);
        Engine::new(&c).unwrap()
    }

    /// The smallest component there is, made distinct by a custom
    /// section holding `n`.
    fn tiny(n: u8) -> Vec<u8> {
        let mut w = vec![0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
        w.extend_from_slice(&[0x00, 0x03, 0x01, b'n', n]);
        w
    }

    fn age(cache: &CompileCache, e: &Engine, wasm: &[u8], secs: u64) {
        let f = std::fs::File::options()
            .append(true)
            .open(cache.path_for(e, wasm))
            .unwrap();
        f.set_modified(SystemTime::now() - std::time::Duration::from_secs(secs))
            .unwrap();
    }

    fn compile(e: &Engine, wasm: &[u8], cache: &CompileCache) -> Lookup {
        cache
            .get_or_compile(e, wasm, || Component::new(e, wasm))
            .unwrap()
            .1
    }

    #[test]
    fn miss_then_hit_and_a_corrupt_entry_is_recompiled() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CompileCache::new(dir.path().join("c"), 1 << 30);
        let e = engine();
        let wasm = tiny(0);
        assert_eq!(compile(&e, &wasm, &cache), Lookup::Miss);
        assert_eq!(compile(&e, &wasm, &cache), Lookup::Hit);
        let path = cache.path_for(&e, &wasm);
        // Flip one byte of the code: the hash catches it.
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        assert!(matches!(compile(&e, &wasm, &cache), Lookup::Rejected(w) if w.contains("corrupt")));
        assert_eq!(compile(&e, &wasm, &cache), Lookup::Hit, "rewritten");
        // Truncated to nothing.
        std::fs::write(&path, b"KB").unwrap();
        assert!(
            matches!(compile(&e, &wasm, &cache), Lookup::Rejected(w) if w.contains("bad header"))
        );
        // A sound hash over code wasmtime does not accept.
        let mut forged = MAGIC.to_vec();
        forged.extend_from_slice(&Sha256::digest(&wasm));
        forged.extend_from_slice(&Sha256::digest(b"not code"));
        forged.extend_from_slice(b"not code");
        std::fs::write(&path, &forged).unwrap();
        assert!(
            matches!(compile(&e, &wasm, &cache), Lookup::Rejected(w) if w.contains("refused by wasmtime"))
        );
        assert_eq!(compile(&e, &wasm, &cache), Lookup::Hit);
    }

    #[test]
    fn another_component_s_sound_entry_under_this_name_is_not_run() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CompileCache::new(dir.path().join("c"), 1 << 30);
        let e = engine();
        let (one, two) = (tiny(1), tiny(2));
        assert_eq!(compile(&e, &one, &cache), Lookup::Miss);
        assert_eq!(compile(&e, &two, &cache), Lookup::Miss);
        // two's entry (sound: magic, hash, code wasmtime accepts) copied
        // over one's: it would run two's code for one.
        std::fs::copy(cache.path_for(&e, &two), cache.path_for(&e, &one)).unwrap();
        assert!(
            matches!(compile(&e, &one, &cache), Lookup::Rejected(w) if w.contains("another component")),
        );
        assert_eq!(
            compile(&e, &one, &cache),
            Lookup::Hit,
            "recompiled and stored"
        );
        assert_eq!(compile(&e, &two, &cache), Lookup::Hit);
    }

    #[test]
    fn keys_differ_by_content_and_engine() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CompileCache::new(dir.path().to_path_buf(), 1 << 30);
        let e = engine();
        assert_ne!(cache.path_for(&e, &tiny(0)), cache.path_for(&e, &tiny(1)));
        let mut c = wasmtime::Config::new();
        c.wasm_component_model(true).consume_fuel(true);
        let fuel = Engine::new(&c).unwrap();
        assert_ne!(
            cache.path_for(&e, &tiny(0)),
            cache.path_for(&fuel, &tiny(0)),
            "an engine that instruments code for fuel cannot share it"
        );
    }

    #[test]
    fn the_cap_evicts_the_least_recently_used() {
        let dir = tempfile::tempdir().unwrap();
        let e = engine();
        let probe = CompileCache::new(dir.path().to_path_buf(), u64::MAX);
        compile(&e, &tiny(0), &probe);
        let one = probe.entries()[0].bytes;
        probe.clear().unwrap();
        // Room for two entries.
        let cache = CompileCache::new(dir.path().to_path_buf(), 2 * one + one / 2);
        compile(&e, &tiny(0), &cache);
        age(&cache, &e, &tiny(0), 30);
        compile(&e, &tiny(1), &cache);
        age(&cache, &e, &tiny(1), 20);
        // Use 0 again: 1 is now the least recently used.
        assert_eq!(compile(&e, &tiny(0), &cache), Lookup::Hit);
        compile(&e, &tiny(2), &cache);
        let left: Vec<PathBuf> = cache.entries().into_iter().map(|x| x.path).collect();
        assert_eq!(left.len(), 2);
        assert!(left.contains(&cache.path_for(&e, &tiny(0))));
        assert!(left.contains(&cache.path_for(&e, &tiny(2))));
        assert_eq!(cache.clear().unwrap().0, 2);
        assert!(cache.entries().is_empty());
    }
}
