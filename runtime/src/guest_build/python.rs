//! Python guests: componentize-py (PyPI, pinned in
//! `scripts/guest-toolchains.sh`) over the module, the Python SDK
//! (`guest-sdk/python/kernbench`, embedded) and a glue module that exports
//! the module's seed-style functions as the world.

use super::{io, succeeded, write_wit, BuildError, Kind};
use std::path::Path;
use std::process::Command;

pub use super::toolchains::COMPONENTIZE_PY;

/// The Python SDK package, file by file.
pub(crate) const SDK: &[(&str, &str)] = &[
    (
        "__init__.py",
        include_str!("../../../guest-sdk/python/kernbench/__init__.py"),
    ),
    (
        "_wit.py",
        include_str!("../../../guest-sdk/python/kernbench/_wit.py"),
    ),
    (
        "algorithm.py",
        include_str!("../../../guest-sdk/python/kernbench/algorithm.py"),
    ),
    (
        "bench.py",
        include_str!("../../../guest-sdk/python/kernbench/bench.py"),
    ),
    (
        "contract.py",
        include_str!("../../../guest-sdk/python/kernbench/contract.py"),
    ),
    (
        "mock.py",
        include_str!("../../../guest-sdk/python/kernbench/mock.py"),
    ),
    (
        "placement.py",
        include_str!("../../../guest-sdk/python/kernbench/placement.py"),
    ),
    (
        "tl.py",
        include_str!("../../../guest-sdk/python/kernbench/tl.py"),
    ),
    (
        "topo.py",
        include_str!("../../../guest-sdk/python/kernbench/topo.py"),
    ),
];

/// Build the Python module `source` as a `kind` component into `out`.
pub fn build(source: &Path, kind: Kind, out: &Path) -> Result<(), BuildError> {
    let source = std::fs::canonicalize(source).map_err(io(source))?;
    let name = source
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or_else(|| BuildError::UnknownLanguage(source.clone()))?;
    let tmp = tempfile::tempdir().map_err(io(Path::new("(temporary directory)")))?;
    let dir = tmp.path();
    let wit = write_wit(dir)?;
    let pkg = dir.join("kernbench");
    std::fs::create_dir_all(&pkg).map_err(io(&pkg))?;
    for (file, text) in SDK {
        let p = pkg.join(file);
        std::fs::write(&p, text).map_err(io(&p))?;
    }
    let (world, export) = match kind {
        Kind::Algorithm => ("algorithm-outputs", "export_algorithm"),
        Kind::Bench => ("bench", "export_bench"),
    };
    let glue = dir.join("kernbench_app.py");
    std::fs::write(
        &glue,
        format!(
            "from kernbench.{} import {export}\nimport {name} as _user\nWitWorld = {export}(_user)\n",
            kind.name()
        ),
    )
    .map_err(io(&glue))?;
    let tool = super::toolchains::componentize_py()?;
    let r = Command::new(&tool)
        .arg("--wit-path")
        .arg(&wit)
        .args(["--world", world, "componentize", "kernbench_app", "-p"])
        .arg(dir)
        .arg("-p")
        .arg(source.parent().unwrap_or(Path::new(".")))
        .arg("-o")
        .arg(out)
        // A caller's venv would add its site-packages to the component.
        .env_remove("VIRTUAL_ENV")
        .output()
        .map_err(|_| BuildError::MissingToolchain {
            what: format!("componentize-py (`{}`)", tool.display()),
            install: format!(
                "fix: kernbench-host toolchains install --lang python \
                 (or `pip install componentize-py=={COMPONENTIZE_PY}`)"
            ),
        })?;
    succeeded(r, &tool.display().to_string(), &source)
}
