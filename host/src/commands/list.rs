//! `kernbench-host list`: the built-in benches and algorithms and the
//! ccl.yaml entries (`list --installed` is [`super::components`]').

use anyhow::Result;
use kernbench::runtime::loader::ComponentKind;
use kernbench::runtime::Loader;
use std::path::Path;

pub fn run(ccl: Option<&Path>) -> Result<()> {
    let ccl = super::load_ccl(ccl)?;
    println!("Benches (built in):");
    for b in Loader::builtins(ComponentKind::Bench) {
        println!("  {}", b.name);
    }
    println!("Algorithms and kernels (built in; benches launch the kernels gemm and va_probe):");
    for a in Loader::builtins(ComponentKind::Algorithm) {
        println!("  {}", a.name);
    }
    println!("ccl.yaml entries (default: {}):", ccl.defaults.algorithm);
    for (name, e) in &ccl.algorithms {
        // A key the entry leaves out is the algorithm's default
        // (its entry-defaults export), else the host's.
        let or_algo = |v: Option<&str>| v.unwrap_or("(default)").to_string();
        println!(
            "  {name:<28} module {} | topology {} | mapper {} | buffer {} x{} slots of {}",
            e.module,
            or_algo(e.topology.map(|t| t.name())),
            or_algo(e.mapper.map(|m| m.name())),
            or_algo(e.buffer_kind.map(|b| b.name())),
            or_algo(e.n_slots.map(|n| n.to_string()).as_deref()),
            or_algo(
                e.slot_bytes()
                    .map(kernbench::budget::human_bytes)
                    .as_deref()
            )
        );
    }
    Ok(())
}
