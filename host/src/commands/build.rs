//! `kernbench-host build`: a C, Python or JavaScript source into a
//! component (reusing an earlier build of the same inputs).

use anyhow::Result;
use kernbench::guest_build::Kind;
use std::path::Path;

pub fn run(source: &Path, output: &Path, kind: Kind, no_cache: bool) -> Result<()> {
    use kernbench::guest_build::{reuse::BuildCache, Built};
    let keep = !no_cache && std::env::var_os("KERNBENCH_NO_CACHE").is_none();
    let cache = keep
        .then(kernbench::runtime::compile_cache::CompileCache::from_env)
        .flatten()
        .map(|c| BuildCache::under(c.dir()));
    let built = kernbench::guest_build::build_reusing(source, kind, output, cache.as_ref())?;
    println!(
        "built {} ({}) -> {}{}",
        source.display(),
        kind.name(),
        output.display(),
        match built {
            Built::Fresh => "",
            Built::Reused => " (the same inputs' earlier build; --no-cache builds afresh)",
        }
    );
    Ok(())
}
