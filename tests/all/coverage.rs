//! Every component the repository ships or keeps for tests is exercised:
//! each crate under `algorithms/`, `benches/` and `tests/components/`,
//! and each guest of another language under their `c/`, `js/` and
//! `python/` directories, is named by some test of this binary (a Rust
//! crate by its name in quotes, `"dist_probe"`; another language's guest
//! by its directory, `algorithms/c/ring_allreduce`; a kernel only a
//! built-in bench launches, by naming that bench). A new component
//! without a test fails here, naming it.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The subdirectories of `dir`, sorted.
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && !p.ends_with("__pycache__"))
        .collect();
    v.sort();
    v
}

/// Kernels that only a built-in bench launches (`torch.launch`): named
/// by naming that bench.
const LAUNCHED_BY: [(&str, &str); 2] =
    [("gemm", "gemm_single_pe"), ("va_probe", "va_offset_verify")];

/// Every component: (what a test must name, where it is).
fn components() -> Vec<(String, String)> {
    let root = root();
    let mut v = Vec::new();
    for area in ["algorithms", "benches", "tests/components"] {
        for dir in subdirs(&root.join(area)) {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            let here = format!("{area}/{name}");
            if dir.join("Cargo.toml").exists() {
                let named = LAUNCHED_BY
                    .iter()
                    .find(|(kernel, _)| area == "algorithms" && *kernel == name)
                    .map_or(name.as_str(), |(_, bench)| bench);
                v.push((format!("\"{named}\""), here));
            } else if matches!(name.as_str(), "c" | "js" | "python") {
                for guest in subdirs(&dir) {
                    let g = guest.file_name().unwrap().to_string_lossy().into_owned();
                    let path = format!("{here}/{g}");
                    v.push((path.clone(), path));
                }
            } else if area != "tests/components" {
                panic!("{here}: neither a crate nor a language directory; name it here");
            }
        }
    }
    v
}

/// The text of every test source of this binary.
fn test_sources() -> String {
    fn walk(dir: &Path, out: &mut String) {
        for e in std::fs::read_dir(dir).unwrap().filter_map(Result::ok) {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("coverage.rs") {
                out.push_str(&std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    let mut s = String::new();
    walk(&root().join("tests/all"), &mut s);
    s
}

#[test]
fn every_component_is_named_by_a_test() {
    let sources = test_sources();
    let all = components();
    assert!(all.len() > 40, "the components were not found: {all:?}");
    let untested: Vec<&str> = all
        .iter()
        .filter(|(needle, _)| !sources.contains(needle.as_str()))
        .map(|(_, at)| at.as_str())
        .collect();
    assert!(
        untested.is_empty(),
        "no test under tests/all names these components (a Rust crate by its name in \
         quotes, another language's guest by its directory): {untested:?}"
    );
}
