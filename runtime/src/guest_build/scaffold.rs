//! `kernbench-host new algorithm|bench NAME --lang rust|python|c|js`: a
//! project that builds and runs as it is — the seed's ring all-reduce (or,
//! for a bench, the seed's ccl_hello), a ccl.yaml naming it, and a README
//! with its build, run and test commands.

use super::{io, BuildError, Kind};
use std::path::{Path, PathBuf};

/// A language a project can be created in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NewLang {
    Rust,
    Python,
    C,
    Js,
}

impl NewLang {
    /// The language's name, as a reader writes it.
    pub fn name(self) -> &'static str {
        match self {
            NewLang::Rust => "Rust",
            NewLang::Python => "Python",
            NewLang::C => "C",
            NewLang::Js => "JavaScript",
        }
    }
}

include!(concat!(env!("OUT_DIR"), "/rust_sdk.rs"));

/// Where a new Rust project keeps its copy of the Rust guest SDK.
const SDK_DIR: &str = "kernbench-sdk";

/// The Rust guest SDK this binary was built with, as files of a new
/// project (under [`SDK_DIR`]): the manifests' workspace inheritance is
/// written out, so that the copy builds on its own, wherever the project
/// is (no path of the tree this binary was built from).
fn rust_sdk() -> Vec<(String, String)> {
    let inherited = |key: &str| {
        RUST_SDK_INHERITED
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
            .unwrap_or_default()
    };
    RUST_SDK
        .iter()
        .map(|(path, text)| {
            let text = if path.ends_with("Cargo.toml") {
                text.lines()
                    .map(|l| match l.trim() {
                        "version.workspace = true" => {
                            format!("version = {:?}", inherited("version"))
                        }
                        "edition.workspace = true" => {
                            format!("edition = {:?}", inherited("edition"))
                        }
                        "license.workspace = true" => {
                            format!("license = {:?}", inherited("license"))
                        }
                        "wit-bindgen = { workspace = true }" => {
                            format!("wit-bindgen = {:?}", inherited("wit-bindgen"))
                        }
                        "kernbench-guest-macros = { workspace = true }" => {
                            "kernbench-guest-macros = { path = \"macros\" }".to_string()
                        }
                        "kernbench-wire = { workspace = true }" => {
                            "kernbench-wire = { path = \"wire\" }".to_string()
                        }
                        _ => l.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
                    + "\n"
            } else {
                text.to_string()
            };
            (format!("{SDK_DIR}/{path}"), text)
        })
        .collect()
}

const PY_RING: &str = include_str!("../../../algorithms/python/ring_allreduce/ring_allreduce.py");
const PY_BENCH: &str = include_str!("../../../benches/python/ccl_hello/ccl_hello.py");
const C_RING: &str = include_str!("../../../algorithms/c/ring_allreduce/ring_allreduce.c");
const JS_RING: &str = include_str!("../../../algorithms/js/ring_allreduce/ring_allreduce.js");
const RS_RING: &str = include_str!("../../../algorithms/ring_allreduce/src/lib.rs");

/// The C SDK's header and native mock, as `kernbench/` beside a new C
/// project's source (`build` compiles with the header embedded in this
/// binary, the same file), and the project's mock test.
const C_SDK: &[(&str, &str)] = &[
    (
        "kernbench.h",
        include_str!("../../../guest-sdk/c/kernbench.h"),
    ),
    ("kernbench_common.c", super::c::COMMON),
    (
        "mock/algorithm_outputs.h",
        include_str!("../../../guest-sdk/c/mock/algorithm_outputs.h"),
    ),
    (
        "mock/kernbench_mock.h",
        include_str!("../../../guest-sdk/c/mock/kernbench_mock.h"),
    ),
    (
        "mock/kernbench_mock.c",
        include_str!("../../../guest-sdk/c/mock/kernbench_mock.c"),
    ),
];
const C_TEST: &str = include_str!("../../../guest-sdk/c/mock/test_template.c");

/// The JavaScript SDK's native mock, as `kernbench/mock.mjs` beside a new
/// JavaScript project's module, and the project's mock test (`__NAME__`
/// the project's name).
const JS_MOCK: &str = include_str!("../../../guest-sdk/js/mock.mjs");
const JS_TEST: &str = include_str!("../../../guest-sdk/js/test_template.mjs");

/// The shadow stack, in bytes, every Rust guest is linked with: this
/// tree's (its `.cargo/config.toml`, which cannot name this constant; a
/// test holds the two equal) and a new project's.
pub const GUEST_STACK: u64 = 128 << 10;

/// The initial heap, in bytes, every Rust kernel is linked with: this
/// tree's algorithms (`algorithms/kernel_heap.rs`, a build script of the
/// guests, which cannot name this constant; a test holds the two equal)
/// and a new algorithm project's `.cargo/config.toml`. It holds the SDK's
/// batch of calls, so that a launch does not grow the kernel's memory.
pub const KERNEL_INITIAL_HEAP: u64 = 192 << 10;

/// The Python SDK, as `kernbench/` beside a new project's module: its
/// tests import it natively (`build` compiles with the SDK embedded in
/// this binary, the same files).
fn python_sdk() -> Vec<(String, String)> {
    super::python::SDK
        .iter()
        .map(|(f, text)| (format!("kernbench/{f}"), text.to_string()))
        .collect()
}

/// A new Python algorithm's unit test: the kernel in the mock on several
/// world sizes, every rank's result against the sum.
fn py_test(name: &str) -> String {
    format!(
        r#""""{name} in the KernBench mock, natively: python3 -m unittest"""

import unittest

import {name}
from kernbench import contract
from kernbench.mock import run_kernel_in_mock


class AllReduce(unittest.TestCase):
    def test_every_rank_gets_the_sum(self):
        for ws in (1, 2, 3, 4, 8):
            n = 16
            inputs = [[(r * 7 + i % 5) for i in range(n)] for r in range(ws)]
            want = [sum(v[i] for v in inputs) for i in range(n)]
            args = contract.call_kernel_args({name}.kernel_args, ws, n, 1, 1, {{}})
            out = run_kernel_in_mock({name}.kernel, ws, "ring_1d", inputs, args, module={name})
            self.assertEqual(out, [want] * ws, ws)


if __name__ == "__main__":
    unittest.main()
"#
    )
}

/// The files of a new project: (relative path, contents).
fn files(kind: Kind, lang: NewLang, name: &str) -> Result<Vec<(String, String)>, BuildError> {
    let unsupported = |lang| {
        Err(BuildError::Unsupported {
            lang,
            kind: kind.name(),
        })
    };
    let ccl = |module: &str| {
        format!(
            "# ccl.yaml for {name}: run it with\n#   kernbench-host run ccl_allreduce --ccl ccl.yaml\n\
             defaults: {{algorithm: {name}}}\nalgorithms:\n  {name}:\n    module: {module}\n    topology: ring_1d\n\
             \x20   buffer_kind: tcm\n    n_slots: 4\n    slot_kib: 1024\n"
        )
    };
    let readme = |build: &str, test: &str, run: &str| {
        format!(
            "# {name}\n\nA KernBench {} in {}, started from the seed's {}.\n\n\
             Build:\n\n    {build}\n\nRun:\n\n    {run}\n\nTest:\n\n    {test}\n",
            kind.name(),
            lang.name(),
            if kind == Kind::Algorithm {
                "ring all-reduce"
            } else {
                "ccl_hello bench"
            },
        )
    };
    let wasm = format!("{name}.wasm");
    // What `build` writes into the component's metadata (name, version,
    // description, licence): edit them here.
    let pyproject = format!(
        "[project]\nname = \"{name}\"\nversion = \"0.1.0\"\ndescription = \"A KernBench {}\"\nlicense = \"Apache-2.0\"\n",
        kind.name()
    );
    // "type": "module": the algorithm is an ES module, and its test imports
    // it under plain Node.
    let package_json = format!(
        "{{\n  \"name\": \"{name}\",\n  \"version\": \"0.1.0\",\n  \"description\": \"A KernBench {}\",\n  \"license\": \"Apache-2.0\",\n  \"private\": true,\n  \"type\": \"module\"\n}}\n",
        kind.name()
    );
    Ok(match (kind, lang) {
        (Kind::Algorithm, NewLang::Python) => {
            let mut v = vec![
                (format!("{name}.py"), PY_RING.to_string()),
                (format!("test_{name}.py"), py_test(name)),
                ("pyproject.toml".into(), pyproject),
                ("ccl.yaml".into(), ccl(&wasm)),
                (
                    "README.md".into(),
                    readme(
                        &format!("kernbench-host build {name}.py -o {wasm}"),
                        "python3 -m unittest  # the kernel on 1 to 8 ranks in the SDK's mock (kernbench/mock.py)",
                        "kernbench-host run ccl_allreduce --ccl ccl.yaml",
                    ),
                ),
            ];
            v.extend(python_sdk());
            v
        }
        (Kind::Bench, NewLang::Python) => vec![
            (format!("{name}.py"), PY_BENCH.to_string()),
            ("pyproject.toml".into(), pyproject),
            (
                "README.md".into(),
                readme(
                    &format!("kernbench-host build {name}.py --kind bench -o {wasm}"),
                    &format!(
                        "kernbench-host run {wasm} | grep 'Out of bounds values : 0 OK'  \
                         # the bench checks its own results (no mock for benches yet)"
                    ),
                    &format!("kernbench-host run {wasm}"),
                ),
            ),
        ],
        (Kind::Algorithm, NewLang::C) => vec![
            (format!("{name}.c"), C_RING.to_string()),
            (format!("test_{name}.c"), C_TEST.to_string()),
            ("ccl.yaml".into(), ccl(&wasm)),
            (
                "README.md".into(),
                readme(
                    &format!("kernbench-host build {name}.c -o {wasm}"),
                    &format!(
                        "cc -std=c11 -O1 -Wall -pthread -I kernbench/mock -I kernbench {name}.c \
                         kernbench/mock/kernbench_mock.c test_{name}.c -o test_{name} && ./test_{name}  \
                         # the kernel on 1 to 8 ranks in the SDK's native mock"
                    ),
                    "kernbench-host run ccl_allreduce --ccl ccl.yaml",
                ),
            ),
        ]
        .into_iter()
        .chain(
            C_SDK
                .iter()
                .map(|(f, text)| (format!("kernbench/{f}"), text.to_string())),
        )
        .collect(),
        (Kind::Algorithm, NewLang::Js) => vec![
            (format!("{name}.js"), JS_RING.to_string()),
            (format!("test_{name}.mjs"), JS_TEST.replace("__NAME__", name)),
            ("kernbench/mock.mjs".into(), JS_MOCK.to_string()),
            ("package.json".into(), package_json),
            ("ccl.yaml".into(), ccl(&wasm)),
            (
                "README.md".into(),
                readme(
                    &format!("kernbench-host build {name}.js -o {wasm}"),
                    &format!(
                        "node --test test_{name}.mjs  # the kernel on 1 to 8 ranks in the SDK's mock (Node.js 18 or later)"
                    ),
                    "kernbench-host run ccl_allreduce --ccl ccl.yaml",
                ),
            ),
        ],
        (Kind::Algorithm, NewLang::Rust) => {
            let crate_name = name.replace('-', "_");
            let out = format!("target/wasm32-wasip2/release/{crate_name}.wasm");
            vec![
                (
                    "Cargo.toml".into(),
                    format!(
                        "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
                         [lib]\ncrate-type = [\"cdylib\", \"rlib\"]\n\n[dependencies]\n\
                         kernbench-guest = {{ path = \"{SDK_DIR}/guest-sdk\", features = [\"algorithm\"] }}\n\n\
                         [workspace]\n"
                    ),
                ),
                (
                    "src/lib.rs".into(),
                    RS_RING.replace("RingAllreduce", "Algo"),
                ),
                ("ccl.yaml".into(), ccl(&out)),
                (
                    ".cargo/config.toml".into(),
                    format!(
                        "# A {} KiB stack, as KernBench's own guests: every instance's memory\n\
                         # is charged to the run's budget at its declared size. A {} KiB\n\
                         # initial heap, as KernBench's own kernels: it holds the SDK's batch\n\
                         # of calls, so a launch does not grow the kernel's memory.\n\
                         [target.wasm32-wasip2]\nrustflags = [\"-C\", \"link-arg=-zstack-size={}\", \
                         \"-C\", \"link-arg=--initial-heap={}\"]\n",
                        GUEST_STACK >> 10,
                        KERNEL_INITIAL_HEAP >> 10,
                        GUEST_STACK,
                        KERNEL_INITIAL_HEAP
                    ),
                ),
                (
                    "README.md".into(),
                    readme(
                        "cargo build --release --target wasm32-wasip2",
                        "cargo test  # the mock runner, natively",
                        "kernbench-host run ccl_allreduce --ccl ccl.yaml",
                    ),
                ),
            ]
            .into_iter()
            .chain(rust_sdk())
            .collect()
        }
        (Kind::Bench, NewLang::C) => return unsupported("C"),
        (Kind::Bench, NewLang::Js) => return unsupported("JavaScript"),
        (Kind::Bench, NewLang::Rust) => {
            return Err(BuildError::BadName(
                "`new` has no Rust bench template yet (Rust benches work): copy the crate \
                 benches/ccl_hello of the KernBench sources, or start in Python with `--lang python`"
                    .into(),
            ))
        }
    })
}

/// Create the project `name` in `dir/name`; the files written.
pub fn create(dir: &Path, kind: Kind, lang: NewLang, name: &str) -> Result<PathBuf, BuildError> {
    let valid = !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if !valid {
        return Err(BuildError::BadName(format!(
            "{name:?} is not a usable name: letters, digits and _ only, not starting with a digit \
             (it becomes a module and a ccl.yaml entry)"
        )));
    }
    let root = dir.join(name);
    if root.exists() {
        return Err(BuildError::Io {
            path: root,
            source: std::io::Error::new(std::io::ErrorKind::AlreadyExists, "already exists"),
        });
    }
    for (rel, text) in files(kind, lang, name)? {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).map_err(io(&p))?;
        std::fs::write(&p, text).map_err(io(&p))?;
    }
    Ok(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This tree's guests and a new Rust project are linked with the same
    /// stack.
    #[test]
    fn this_trees_guests_link_the_stack_a_new_project_gets() {
        let config = include_str!("../../../.cargo/config.toml");
        let want = format!("link-arg=-zstack-size={GUEST_STACK}\"");
        assert!(config.contains(&want), ".cargo/config.toml lacks {want}");
    }

    /// This tree's kernels (their build script) and a new Rust algorithm
    /// project are linked with the same initial heap.
    #[test]
    fn the_kernels_build_script_links_the_initial_heap_a_new_project_gets() {
        let script = include_str!("../../../algorithms/kernel_heap.rs");
        let want = format!("cargo:rustc-link-arg-cdylib=--initial-heap={KERNEL_INITIAL_HEAP}\"");
        assert!(
            script.contains(&want),
            "kernel_heap.rs does not print {want}"
        );
    }
}
