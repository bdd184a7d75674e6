//! `kernbench-host new`: a new algorithm or bench project that builds and
//! runs as it is.

use anyhow::Result;
use kernbench::guest_build::scaffold::NewLang;
use kernbench::guest_build::Kind;
use std::path::Path;

pub fn run(kind: Kind, name: &str, lang: NewLang, dir: &Path) -> Result<()> {
    let root = kernbench::guest_build::scaffold::create(dir, kind, lang, name)?;
    println!(
        "created {} ({} in {}); its README.md says how to build, run and test it",
        root.display(),
        kind.name(),
        lang.name()
    );
    Ok(())
}
