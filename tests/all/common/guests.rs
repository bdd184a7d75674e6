//! Guests in other languages, built on demand from their sources with the
//! toolchains `scripts/guest-toolchains.sh` installs (in `.toolchains/` or
//! `$KERNBENCH_TOOLCHAINS`). A component is rebuilt only when its sources
//! change (a stamp of their hash beside it); a missing toolchain fails the
//! test with the command that installs it.

use kernbench::guest_build::{BuildError, Kind};
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The guest toolchains: $KERNBENCH_TOOLCHAINS, else the checkout's
/// `.toolchains/` (where `scripts/guest-toolchains.sh` puts them).
pub fn toolchains() -> PathBuf {
    std::env::var_os("KERNBENCH_TOOLCHAINS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".toolchains"))
}

fn missing(what: &str) -> ! {
    panic!(
        "{what}\n(`bash scripts/guest-toolchains.sh` installs every guest toolchain: \
         Python into .toolchains/ or $KERNBENCH_TOOLCHAINS, C from Debian's packages)"
    )
}

/// Every file under `dir` (sorted), for the stamp.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if p.file_name()
                .is_some_and(|n| n != "__pycache__" && n != "tests")
            {
                files(&p, out);
            }
        } else {
            out.push(p);
        }
    }
}

fn stamp(inputs: &[PathBuf]) -> String {
    let mut all = Vec::new();
    for i in inputs {
        if i.is_dir() {
            files(i, &mut all);
        } else {
            all.push(i.clone());
        }
    }
    let mut h = DefaultHasher::new();
    for f in all {
        f.hash(&mut h);
        std::fs::read(&f).unwrap().hash(&mut h);
    }
    format!("{:016x}", h.finish())
}

static BUILDING: Mutex<()> = Mutex::new(());

/// `out`, built by `build` unless the stamp of `inputs` says it is current.
fn cached(out: PathBuf, inputs: &[PathBuf], build: impl FnOnce(&Path)) -> PathBuf {
    let _one_at_a_time = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    let stamp_file = out.with_extension("stamp");
    let want = stamp(inputs);
    if out.exists() && std::fs::read_to_string(&stamp_file).ok().as_deref() == Some(&want) {
        return out;
    }
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let tmp = out.with_extension(format!("tmp{}", std::process::id()));
    build(&tmp);
    std::fs::rename(&tmp, &out).unwrap();
    std::fs::write(&stamp_file, want).unwrap();
    out
}

/// The component of the source `src` (relative to the repository: a
/// Python module or a C file), `kind` "algorithm" or "bench", built with
/// `kernbench::guest_build` (as `kernbench-host build` does).
fn component(lang: &str, kind: &str, src: &str, sdk: &str) -> String {
    // The builder looks in $KERNBENCH_TOOLCHAINS, else .toolchains/ of the
    // working directory, but the tests run in host/: the checkout's
    // .toolchains/ is searched first (not through the environment, which
    // the test threads read).
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if std::env::var_os("KERNBENCH_TOOLCHAINS").is_none() {
            kernbench::guest_build::toolchains::search_first(toolchains());
        }
    });
    let src = root().join(src);
    let name = src.file_stem().unwrap().to_str().unwrap().to_string();
    let out = root()
        .join("target/guests")
        .join(lang)
        .join(format!("{kind}-{name}.wasm"));
    let inputs = [src.clone(), root().join(sdk), root().join("wit")];
    let kind = match kind {
        "algorithm" => Kind::Algorithm,
        _ => Kind::Bench,
    };
    let built = cached(out, &inputs, |tmp| {
        if let Err(e) = kernbench::guest_build::build(&src, kind, tmp) {
            match e {
                BuildError::MissingToolchain { .. } => missing(&e.to_string()),
                e => panic!("building {}: {e}", src.display()),
            }
        }
    });
    built.to_str().unwrap().to_string()
}

/// A Python algorithm or bench (`src` relative to the repository).
pub fn python(kind: &str, src: &str) -> String {
    component("python", kind, src, "guest-sdk/python/kernbench")
}

/// A JavaScript algorithm (`src` relative to the repository).
pub fn js(src: &str) -> String {
    component("js", "algorithm", src, "guest-sdk/js")
}

/// A C algorithm (`src` relative to the repository).
pub fn c(src: &str) -> String {
    component("c", "algorithm", src, "guest-sdk/c")
}
