//! JavaScript guests: componentize-js (npm, pinned in
//! `scripts/guest-toolchains.sh`) over an entry module that exports the
//! module's seed-style functions as the world (`exportAlgorithm` of the
//! JavaScript SDK, `guest-sdk/js/kernbench.js`, embedded). componentize-js
//! reads modules from the entry's directory only, so the module and the
//! `.js` files beside it (its relative imports) are copied there.

use super::{io, succeeded, write_wit, BuildError, Kind};
use std::path::Path;
use std::process::Command;

pub use super::toolchains::COMPONENTIZE_JS;

pub(crate) const SDK: &str = include_str!("../../../guest-sdk/js/kernbench.js");

const ENTRY_EXPORTS: &[&str] = &[
    "kernel",
    "kernelArgs",
    "kernelArgsWith",
    "topoNameToKind",
    "entryDefaults",
    "neighbors",
    "collectives",
    "kernelArgsFor",
    "outOfPlace",
];

fn missing(what: String) -> BuildError {
    BuildError::MissingToolchain {
        what,
        install: format!(
            "fix: kernbench-host toolchains install --lang js (or `npm install \
             @bytecodealliance/componentize-js@{COMPONENTIZE_JS}` and set $KERNBENCH_COMPONENTIZE_JS \
             to its src/cli.js; needs Node.js 18 or later)"
        ),
    }
}

/// Build the JavaScript module `source` as a `kind` component into `out`.
pub fn build(source: &Path, kind: Kind, out: &Path) -> Result<(), BuildError> {
    if kind != Kind::Algorithm {
        return Err(BuildError::Unsupported {
            lang: "JavaScript",
            kind: kind.name(),
        });
    }
    let cli = super::toolchains::componentize_js()?;
    if !cli.exists() {
        return Err(missing(format!("componentize-js (`{}`)", cli.display())));
    }
    let source = std::fs::canonicalize(source).map_err(io(source))?;
    let tmp = tempfile::tempdir().map_err(io(Path::new("(temporary directory)")))?;
    let dir = tmp.path();
    let wit = write_wit(dir)?;
    let user = dir.join("user");
    std::fs::create_dir_all(&user).map_err(io(&user))?;
    let src_dir = source.parent().unwrap_or(Path::new("."));
    for e in std::fs::read_dir(src_dir).map_err(io(src_dir))? {
        let p = e.map_err(io(src_dir))?.path();
        if matches!(p.extension().and_then(|x| x.to_str()), Some("js" | "mjs")) {
            let to = user.join(p.file_name().unwrap());
            std::fs::copy(&p, &to).map_err(io(&p))?;
        }
    }
    let sdk = dir.join("kernbench.js");
    std::fs::write(&sdk, SDK).map_err(io(&sdk))?;
    let mut entry = format!(
        "import * as user from \"./user/{}\";\nimport {{ exportAlgorithm }} from \"./kernbench.js\";\nconst w = exportAlgorithm(user);\n",
        source.file_name().unwrap().to_string_lossy()
    );
    for e in ENTRY_EXPORTS {
        entry.push_str(&format!("export const {e} = w.{e};\n"));
    }
    let entry_file = dir.join("entry.js");
    std::fs::write(&entry_file, entry).map_err(io(&entry_file))?;
    let r = Command::new("node")
        .arg(&cli)
        .arg(&entry_file)
        .arg("-w")
        .arg(&wit)
        .args(["-n", "algorithm-outputs", "-d", "http", "fetch-event", "-o"])
        .arg(out)
        .output()
        .map_err(|_| missing("Node.js (`node`)".into()))?;
    succeeded(r, "componentize-js", &source)
}
