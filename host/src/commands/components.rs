//! The component-management commands of the CLI: `inspect` (what a
//! component is and whether this host runs it) and `cache {show,clear}`
//! (the precompiled-component cache, `runtime::compile_cache`).

use anyhow::{Context, Result};
use clap::Subcommand;
use kernbench::budget::human_bytes;
use kernbench::components::compat::{self, Accepted};
use kernbench::components::metadata;
use kernbench::components::registry::{self, Registry};
use kernbench::components::store::{Installed, Origin, Store};
use kernbench::components::Kind;
use kernbench::runtime::compile_cache::CompileCache;
use kernbench::runtime::describe::AlgorithmCapabilities;
use kernbench::runtime::{Loader, LoaderOptions};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(clap::Args)]
pub struct InspectArgs {
    /// The component: a .wasm path, or a name (looked up in the components
    /// directory, then among the built-in components).
    component: String,
    /// Directory searched for <name>.wasm before the built-in components.
    #[arg(long, env = "KERNBENCH_COMPONENTS_DIR")]
    components_dir: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// `inspect`: everything a component says about itself, whether this host
/// runs it, and whether its compiled code is cached.
pub fn inspect(args: InspectArgs) -> Result<()> {
    let loader = Arc::new(Loader::new(LoaderOptions {
        components_dir: args.components_dir,
        ..LoaderOptions::default()
    })?);
    let found = find(&loader, &args.component)?;
    let info = metadata::read(&found.wasm)
        .with_context(|| format!("{} ({})", found.name, found.origin))?;
    // The version names are a first check; the verdict is the linker's:
    // every import type-checked against what this host serves.
    let linked = match (info.kind, &info.verdict) {
        (Some(Kind::Algorithm), Ok(Some(_))) => loader
            .load_algorithm(&found.spec, None)
            .map(|a| a.snapshot)
            .map_err(|e| e.to_string()),
        (Some(Kind::Bench), Ok(Some(_))) => loader
            .load_bench(&found.spec)
            .map(|b| b.snapshot)
            .map_err(|e| e.to_string()),
        _ => Ok(None),
    };
    let verdict = match (&info.verdict, &linked) {
        (Ok(Some(_)), Err(e)) => format!("refused: {e}"),
        (Ok(Some(_)), Ok(Some(snapshot))) => format!(
            "runs here: built against {snapshot}, an earlier state of the interface that this \
             host serves by adapters over {} (compatible: every import type-checks)",
            host_wit()
        ),
        (Ok(Some(Accepted::Current)), Ok(None)) => {
            format!("runs here (this host implements {})", host_wit())
        }
        (Ok(Some(Accepted::Older(v))), Ok(None)) => format!(
            "runs here: built against {}@{v}, an earlier version of this host's {}, its imports \
             served with the types it was built with (adapters where they differ; compatible: \
             every import type-checks)",
            compat::WIT_PACKAGE,
            host_wit()
        ),
        (Ok(None), _) => format!("names no {} interface", compat::WIT_PACKAGE),
        (Err(e), _) => format!("refused: {e}"),
    };
    let accepted = matches!(info.verdict, Ok(Some(_))) && linked.is_ok();
    // What an algorithm implements, asked of the component itself.
    let caps = match (info.kind, accepted) {
        (Some(Kind::Algorithm), true) => Some(capabilities(&loader, &found.spec)),
        _ => None,
    };
    let cached = loader.cached_code(&found.wasm);
    if args.json {
        let mut v = serde_json::json!({
            "name": info.name().unwrap_or(&found.name),
            "found": found.origin,
            "bytes": info.bytes,
            "digest": info.digest(),
            "kind": info.kind.map(Kind::name),
            "wit": info.wit_versions.iter().map(|v| compat::package_at(v)).collect::<Vec<_>>(),
            "host_wit": host_wit(),
            "accepted": accepted,
            "verdict": verdict,
            "metadata": info.standard,
            "kernbench": info.kernbench,
            "producers": info.producers.iter().map(|(f, n, v)| serde_json::json!({"field": f, "name": n, "version": v})).collect::<Vec<_>>(),
            "imports": info.imports,
            "exports": info.exports,
            "annotations": info.annotations(),
            "compiled_cache": cached.as_ref().map(|p| p.display().to_string()),
        });
        if let Some(c) = &caps {
            v["capabilities"] = match c {
                Ok(c) => serde_json::json!({
                    "collectives": c.collectives.iter().map(|c| c.name()).collect::<Vec<_>>(),
                    "ipcq_topology": c.defaults.topology.map(|t| t.name()),
                }),
                Err(e) => serde_json::json!({ "error": e }),
            };
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let row = |k: &str, v: &str| println!("  {k:<13} {v}");
    println!("{}", info.name().unwrap_or(&found.name));
    row("found", &found.origin);
    row(
        "size",
        &format!("{} ({} bytes)", human_bytes(info.bytes), info.bytes),
    );
    row("digest", &info.digest());
    row(
        "world",
        info.kind.map(Kind::name).unwrap_or(
            "neither algorithm nor bench (exports kernel + kernel-args, or run + worker)",
        ),
    );
    row(
        "built for",
        &if info.wit_versions.is_empty() {
            "-".to_string()
        } else {
            info.wit_versions
                .iter()
                .map(|v| compat::package_at(v))
                .collect::<Vec<_>>()
                .join(", ")
        },
    );
    row("this host", &verdict);
    if let Some(k) = &info.kernbench {
        if let Some(sdk) = &k.sdk {
            row("sdk", sdk);
        }
    }
    if let Some(v) = info.version() {
        row("version", v);
    }
    for (k, v) in &info.standard {
        if k != "version" {
            row(k, v);
        }
    }
    match &caps {
        Some(Ok(c)) => {
            row(
                "collectives",
                &c.collectives
                    .iter()
                    .map(|c| c.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            );
            row(
                "IPCQ topology",
                &c.defaults
                    .topology
                    .map(|t| t.name().to_string())
                    .unwrap_or_else(|| "host default (ring_1d); any a ccl.yaml entry names".into()),
            );
        }
        Some(Err(e)) => row("collectives", &format!("(its setup exports failed: {e})")),
        None => {}
    }
    let mut fields: Vec<&str> = info.producers.iter().map(|(f, _, _)| f.as_str()).collect();
    fields.dedup();
    for f in fields {
        let tools: Vec<String> = info
            .producers
            .iter()
            .filter(|(g, _, _)| g == f)
            .map(|(_, n, v)| {
                if v.is_empty() {
                    n.clone()
                } else {
                    format!("{n} {v}")
                }
            })
            .collect();
        row(f, &tools.join(", "));
    }
    row(
        "compiled",
        &match &cached {
            Some(p) => format!("cached ({})", p.display()),
            None => "not cached (compiled on first use)".into(),
        },
    );
    println!("  imports:");
    for i in &info.imports {
        println!("    {i}");
    }
    println!("  exports:");
    for e in &info.exports {
        println!("    {e}");
    }
    Ok(())
}

/// A component to describe: its bytes, where they came from, and how
/// the loader finds it again (for its capabilities).
struct Found {
    name: String,
    origin: String,
    wasm: Vec<u8>,
    /// A path or name `load_algorithm` resolves to the same bytes.
    spec: String,
    /// Keeps a pulled component on disk while it is asked.
    _tmp: Option<tempfile::TempDir>,
}

/// A path, an OCI reference (pulled, checked, not installed) or a name.
fn find(loader: &Loader, spec: &str) -> Result<Found> {
    if registry::looks_like_reference(spec) && !std::path::Path::new(spec).exists() {
        let pulled = Registry::new()?.pull(spec)?;
        let tmp = tempfile::tempdir()?;
        let path = tmp.path().join("pulled.wasm");
        std::fs::write(&path, &pulled.wasm)?;
        return Ok(Found {
            name: ref_name(spec),
            origin: format!("{spec} (manifest {})", pulled.manifest_digest),
            wasm: pulled.wasm,
            spec: path.display().to_string(),
            _tmp: Some(tmp),
        });
    }
    let l = loader.locate(spec, None)?;
    Ok(Found {
        spec: l.origin_spec(),
        name: l.name,
        origin: l.origin,
        wasm: l.wasm.into_owned(),
        _tmp: None,
    })
}

/// The last segment of a reference's repository (`ring_allreduce` of
/// `ghcr.io/me/ring_allreduce:1.0`).
fn ref_name(reference: &str) -> String {
    registry::parse_reference(reference)
        .map(|r| {
            r.repository()
                .rsplit('/')
                .next()
                .unwrap_or("component")
                .to_string()
        })
        .unwrap_or_else(|_| "component".into())
}

/// What the algorithm `spec` (a name or path) implements, on the default
/// machine.
fn capabilities(
    loader: &Arc<Loader>,
    spec: &str,
) -> std::result::Result<AlgorithmCapabilities, String> {
    let (topo, _) = super::topology::load(
        None,
        &super::topology::LayoutArgs {
            layout_cache: None,
            no_layout_cache: true,
        },
    )
    .map_err(|e| e.to_string())?;
    kernbench::runtime::describe::algorithm_capabilities(loader, spec, topo)
        .map_err(|e| e.to_string())
}

fn host_wit() -> String {
    compat::package_at(compat::WIT_VERSION)
}

#[derive(Subcommand)]
pub enum CacheCmd {
    /// Where compiled components are kept, how many and how big.
    Show,
    /// Remove every compiled component (they are compiled again on use)
    /// and every kept build.
    Clear,
}

fn cache() -> Result<CompileCache> {
    CompileCache::from_env().context(
        "no cache directory: set KERNBENCH_CACHE_DIR (there is no home directory to put it in)",
    )
}

pub fn run_cache(cmd: CacheCmd) -> Result<()> {
    let cache = cache()?;
    match cmd {
        CacheCmd::Show => {
            let entries = cache.entries();
            let total: u64 = entries.iter().map(|e| e.bytes).sum();
            println!("compiled-component cache: {}", cache.dir().display());
            println!(
                "{} entr{} | {} of a {} cap (KERNBENCH_CACHE_MAX_MIB) | least recently used evicted first",
                entries.len(),
                if entries.len() == 1 { "y" } else { "ies" },
                human_bytes(total),
                human_bytes(cache.max_bytes())
            );
            let memo = kernbench::runtime::split_memo::SplitMemo::under(cache.dir());
            println!(
                "{} run(s) remembered not to split (their split gave up; `cache clear` forgets them)",
                memo.len()
            );
            let builds = kernbench::guest_build::reuse::BuildCache::under(cache.dir()).entries();
            println!(
                "{} kept build(s) of Python/JavaScript sources, {} (`build` gives them back \
                 while the inputs are unchanged; at most {})",
                builds.len(),
                human_bytes(builds.iter().map(|(_, n)| n).sum()),
                kernbench::guest_build::reuse::MAX_ENTRIES
            );
            for e in &entries {
                let age = e
                    .last_used
                    .elapsed()
                    .map(|d| format!("{} ago", human_age(d.as_secs())))
                    .unwrap_or_else(|_| "just now".into());
                println!(
                    "  {:>10}  used {age:<10}  {}",
                    human_bytes(e.bytes),
                    e.path.file_name().unwrap_or_default().to_string_lossy()
                );
            }
        }
        CacheCmd::Clear => {
            let (n, bytes) = cache
                .clear()
                .with_context(|| format!("cannot clear {}", cache.dir().display()))?;
            let memo = kernbench::runtime::split_memo::SplitMemo::under(cache.dir());
            let runs = memo
                .clear()
                .with_context(|| format!("cannot clear {}", cache.dir().display()))?;
            let builds = kernbench::guest_build::reuse::BuildCache::under(cache.dir());
            let (kept, kept_bytes) = builds
                .clear()
                .with_context(|| format!("cannot clear {}", builds.dir().display()))?;
            println!(
                "removed {n} compiled component(s), {}, {kept} kept build(s), {} and {runs} \
                 remembered split give-up(s) from {}",
                human_bytes(bytes),
                human_bytes(kept_bytes),
                cache.dir().display()
            );
        }
    }
    Ok(())
}

fn human_age(secs: u64) -> String {
    match secs {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s if s < 2 * 86400 => format!("{} h", s / 3600),
        s => format!("{} d", s / 86400),
    }
}

fn store() -> Result<Store> {
    Store::from_env().context(
        "no components directory: set KERNBENCH_DATA_DIR (there is no home directory to put it in)",
    )
}

/// The OCI annotations that only running the component tells: what an
/// algorithm implements.
fn capability_annotations(
    loader: &Arc<Loader>,
    spec: &str,
) -> std::collections::BTreeMap<String, String> {
    let mut a = std::collections::BTreeMap::new();
    if let Ok(c) = capabilities(loader, spec) {
        a.insert(
            "dev.kernbench.collectives".into(),
            c.collectives
                .iter()
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .join(","),
        );
        if let Some(t) = c.defaults.topology {
            a.insert("dev.kernbench.ipcq-topology".into(), t.name().into());
        }
    }
    a
}

/// `publish FILE REF`.
pub fn publish(file: &std::path::Path, reference: &str) -> Result<()> {
    let wasm = kernbench::files::read_bounded(file, kernbench::components::MAX_COMPONENT_BYTES)?;
    let info = metadata::read(&wasm).with_context(|| file.display().to_string())?;
    let kind = info.kind.with_context(|| {
        format!(
            "{} is not a KernBench algorithm or bench: it exports neither kernel + kernel-args nor run + worker",
            file.display()
        )
    })?;
    if let Err(e) = &info.verdict {
        eprintln!("# warning: this host would not run it: {e}");
    }
    let loader = Arc::new(Loader::new(LoaderOptions {
        installed: None,
        ..LoaderOptions::default()
    })?);
    let extra = if kind == Kind::Algorithm && info.verdict.is_ok() {
        capability_annotations(&loader, &file.display().to_string())
    } else {
        Default::default()
    };
    let pushed = Registry::new()?.push(reference, wasm, &info, extra)?;
    let repo = pushed
        .reference
        .rsplit_once(['@', ':'])
        .filter(|(repo, _)| repo.contains('/'))
        .map_or(pushed.reference.as_str(), |(r, _)| r);
    println!(
        "published {} {} ({}, sha256:{}) to {}",
        info.name()
            .map(String::from)
            .unwrap_or_else(|| file_stem(file)),
        info.version().unwrap_or("(no version)"),
        kind.name(),
        info.sha256,
        pushed.reference
    );
    println!(
        "manifest {} (pull exactly these bytes with {repo}@{})",
        pushed.manifest_digest, pushed.manifest_digest
    );
    Ok(())
}

fn file_stem(p: &std::path::Path) -> String {
    p.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "component".into())
}

/// `pull REF [-o FILE]`.
pub fn pull(reference: &str, output: Option<PathBuf>) -> Result<()> {
    let pulled = Registry::new()?.pull(reference)?;
    let info = metadata::read(&pulled.wasm).with_context(|| reference.to_string())?;
    let out = output.unwrap_or_else(|| {
        PathBuf::from(format!(
            "{}.wasm",
            info.name()
                .map(String::from)
                .unwrap_or_else(|| ref_name(reference))
        ))
    });
    std::fs::write(&out, &pulled.wasm)
        .with_context(|| format!("cannot write {}", out.display()))?;
    println!(
        "pulled {reference} ({}, {} bytes, {}) -> {}",
        pulled.layer_digest,
        pulled.wasm.len(),
        pulled.manifest_digest,
        out.display()
    );
    Ok(())
}

/// `install FILE|REF [--name N]`.
pub fn install(source: &str, name: Option<&str>) -> Result<()> {
    let store = store()?;
    let path = std::path::Path::new(source);
    let (wasm, origin, fallback) = if registry::looks_like_reference(source) && !path.exists() {
        let pulled = Registry::new()?.pull(source)?;
        (
            pulled.wasm,
            Origin::Oci {
                reference: source.to_string(),
                manifest: pulled.manifest_digest,
            },
            ref_name(source),
        )
    } else {
        let wasm =
            kernbench::files::read_bounded(path, kernbench::components::MAX_COMPONENT_BYTES)?;
        let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        (
            wasm,
            Origin::File {
                path: abs.display().to_string(),
            },
            file_stem(path),
        )
    };
    let done = store
        .install(&wasm, name, &fallback, origin, source)
        .with_context(|| format!("cannot install {source}"))?;
    let show = |r: &kernbench::components::store::Record| {
        format!(
            "{} {} {} ({})",
            r.kind,
            r.name,
            r.version.as_deref().unwrap_or("(no version)"),
            r.digest
        )
    };
    match done {
        Installed::New(r) => println!("installed {} from {}", show(&r), r.origin),
        Installed::Unchanged(r) => println!("{} is already installed (same digest)", show(&r)),
        Installed::Replaced { old, new } => println!(
            "replaced {} with {} from {}",
            show(&old),
            show(&new),
            new.origin
        ),
    }
    println!("run it by name ({})", store.root().display());
    Ok(())
}

/// `list --installed`.
pub fn list_installed() -> Result<()> {
    let store = store()?;
    let all = store.list();
    println!("Installed components ({}):", store.root().display());
    if all.is_empty() {
        println!("  (none: kernbench-host install FILE|REF)");
    }
    for r in all {
        match r {
            Ok(r) => println!(
                "  {:<9} {:<28} {:<10} {:<20} {}  {}",
                r.kind,
                r.name,
                r.version.as_deref().unwrap_or("-"),
                r.wit.as_deref().unwrap_or("-"),
                &r.digest[..r.digest.len().min(19)],
                r.origin
            ),
            Err(e) => println!("  (damaged) {e}"),
        }
    }
    Ok(())
}

/// `remove NAME`.
pub fn remove(name: &str) -> Result<()> {
    for r in store()?.remove(name)? {
        println!(
            "removed {} {} {} ({})",
            r.kind,
            r.name,
            r.version.as_deref().unwrap_or(""),
            r.digest
        );
    }
    Ok(())
}
