//! Component loading (DESIGN §6): resolution by name or path, WIT version
//! check, compilation (with wasmtime's on-disk cache, keyed by content hash
//! and engine compatibility) and pre-instantiation.
//!
//! Resolution order: explicit path → `--components-dir` /
//! `KERNBENCH_COMPONENTS_DIR` → installed components (`kernbench-host
//! install`, `components::store`) → components built into the binary.

use super::bench::{BenchComponent, BenchHost};
use super::bindings::algorithm::AlgorithmPre;
use super::bindings::bench::BenchPre;
use super::compile_cache::CompileCache;
use super::describe_wasm_error;
use super::eager::EagerHost;
use super::kernel::{AlgorithmComponent, KernelHost};
use super::limits::{InstanceLimits, RunLimits, Ticker};
use super::shapes::Shapes;
use crate::budget::MemoryBudget;
use crate::components::store::Store;
use crate::error::SimError;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

pub use crate::components::compat::{WIT_PACKAGE, WIT_VERSION};

/// Component files larger than this are refused before they are read.
use crate::components::MAX_COMPONENT_BYTES;

/// What world a component implements.
pub use crate::components::Kind as ComponentKind;

/// A component embedded in the binary by build.rs.
#[derive(Debug)]
pub struct BuiltinComponent {
    pub name: &'static str,
    pub kind: ComponentKind,
    pub wasm: &'static [u8],
    /// Where build.rs found it (used by tests).
    pub path: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/builtin_components.rs"));

/// Knobs of the runtime.
#[derive(Debug, Clone)]
pub struct LoaderOptions {
    pub components_dir: Option<PathBuf>,
    /// The installed components (None: do not look for any).
    pub installed: Option<Store>,
    /// Fuel per instance (≈ wasm instructions); exceeding it is a clean
    /// error instead of a hang.
    pub fuel: u64,
    /// Fuel charged for each host call (so that a loop around a cheap host
    /// call burns fuel like any other loop).
    pub host_call_fuel: u64,
    /// Host calls per instance.
    pub max_host_calls: u64,
    /// Linear-memory cap per instance.
    pub max_memory_mib: u64,
    /// Wall-clock deadline of a run (None: none).
    pub deadline: Option<Duration>,
    /// Keep compiled code in the precompiled-component cache
    /// (`runtime::compile_cache`).
    pub cache: bool,
    /// Instance slots of the pooling allocator.
    pub pool_instances: u32,
    /// Run kernels ahead of simulated time and replay their calls
    /// (`runtime::eager`); off: every kernel runs in step with simulated
    /// time, as kernels that read the clock always do.
    pub record_kernels: bool,
}

impl Default for LoaderOptions {
    fn default() -> Self {
        LoaderOptions {
            components_dir: std::env::var_os("KERNBENCH_COMPONENTS_DIR").map(PathBuf::from),
            installed: Store::from_env(),
            fuel: 20_000_000_000,
            host_call_fuel: 1_000,
            max_host_calls: 100_000_000,
            max_memory_mib: 256,
            deadline: Some(Duration::from_secs(1800)),
            cache: std::env::var_os("KERNBENCH_NO_CACHE").is_none(),
            pool_instances: 1000,
            record_kernels: true,
        }
    }
}

/// A component found by name or path, not compiled.
pub struct Located {
    pub name: String,
    /// Where it was found, in words (a path, or "built into ...").
    pub origin: String,
    pub wasm: std::borrow::Cow<'static, [u8]>,
    /// How to name it to `load_algorithm` / `load_bench` again.
    spec: String,
}

impl Located {
    /// The name or path that finds this component again.
    pub fn origin_spec(&self) -> String {
        self.spec.clone()
    }
}

/// Where a component's bytes come from.
enum Source {
    Builtin(&'static BuiltinComponent),
    File(PathBuf),
    /// An installed component, read and checked against its record.
    Installed(PathBuf, Vec<u8>),
}

/// Loads and pre-instantiates components.
pub struct Loader {
    pub engine: Engine,
    /// The interface shapes a kernel is linked in (see [`super::shapes`]).
    kernel: Shapes<KernelHost>,
    /// Kernels recorded ahead of simulated time (plain host calls).
    eager: Shapes<EagerHost>,
    bench: Shapes<BenchHost>,
    opts: LoaderOptions,
    algorithms: Mutex<HashMap<String, AlgorithmComponent>>,
    ticker: Ticker,
    /// Instances come from a fixed pool (else: allocated on demand).
    pooled: bool,
    /// Compiled code kept across runs (None: `--no-cache`, or no cache
    /// directory).
    cache: Option<CompileCache>,
}

fn wasmtime_err(e: wasmtime::Error) -> SimError {
    SimError::Wasmtime(describe_wasm_error(&e))
}

/// The most of a freed instance's written memory (and table) bytes kept
/// resident for the next instance in its slot; see [`engine_config`].
const KEEP_RESIDENT: usize = 1 << 20;

fn engine_config(opts: &LoaderOptions, pooling: bool) -> Result<Config, SimError> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.consume_fuel(true);
    config.epoch_interruption(true);
    config.wasm_backtrace_details(wasmtime::WasmBacktraceDetails::Enable);
    if std::env::var_os("KERNBENCH_PERF_MAP").is_some() {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    let max_mem = opts.max_memory_mib << 20;
    if pooling {
        let mut pool = PoolingAllocationConfig::default();
        let n = opts.pool_instances;
        pool.total_component_instances(n)
            .total_core_instances(n * 4)
            .total_memories(n * 2)
            .total_tables(n * 4)
            .total_stacks(n)
            .max_memory_size(max_mem as usize)
            .max_core_instances_per_component(32)
            .max_memories_per_component(4)
            .max_tables_per_component(32)
            // A freed instance's memory is given back with `madvise`, and
            // with the recording thread alive each call is a TLB
            // shootdown on the other core; every kernel launch frees one
            // (64 ranks x 60 all-reduces: 11.7 K calls and ~16 % of the
            // engine thread in the kernel's IPI path). In batches of 64
            // (one `process_madvise`) that run took ~10 % less wall time.
            .decommit_batch_size(64);
        if PoolingAllocationConfig::is_pagemap_scan_available() {
            // Where Linux can list a memory's written pages (PAGEMAP_SCAN,
            // 6.7 and later), a freed instance's written pages are reset
            // in place and stay resident: the next kernel instantiated in
            // the slot (a kernel launch takes a slot its component used
            // before) faults none of them in again. A 1024-rank 16 B
            // all-reduce records 1024 kernels, each writing ~100 pages:
            // 172 K page faults became 70 K and the run 1.54-1.63 s ->
            // 1.42-1.46 s, for 13 MB more peak RSS. Without the scan,
            // wasmtime would `memset` the first `KEEP_RESIDENT` bytes of
            // every freed slot whether written or not (an earlier trial
            // of that held ~200 MB more at 1024 ranks), so it stays off.
            pool.pagemap_scan(wasmtime::Enabled::Yes)
                .linear_memory_keep_resident(KEEP_RESIDENT)
                .table_keep_resident(KEEP_RESIDENT);
        }
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    } else {
        config.memory_reservation(max_mem);
    }
    Ok(config)
}

impl Loader {
    pub fn new(opts: LoaderOptions) -> Result<Self, SimError> {
        // Pooling first (fast instantiation); fall back to on-demand
        // allocation when virtual address space is short.
        let (engine, pooled) = match Engine::new(&engine_config(&opts, true)?) {
            Ok(e) => (e, true),
            Err(e) => {
                tracing::warn!("pooling allocator unavailable ({e}); using on-demand allocation");
                let e = Engine::new(&engine_config(&opts, false)?).map_err(wasmtime_err)?;
                (e, false)
            }
        };
        let kernel = super::shapes::kernel(|| {
            let mut l = Linker::<KernelHost>::new(&engine);
            wasmtime_wasi::p2::add_to_linker_async(&mut l)?;
            super::wasi::add_simulated_waiting(&mut l)?;
            super::bindings::algorithm::Algorithm::add_to_linker::<KernelHost, HasSelf<KernelHost>>(
                &mut l,
                |s| s,
            )?;
            Ok(l)
        })
        .map_err(wasmtime_err)?;
        let eager = super::shapes::eager(|| {
            let mut l = Linker::<EagerHost>::new(&engine);
            wasmtime_wasi::p2::add_to_linker_sync(&mut l)?;
            super::wasi::refuse_clocks(&mut l)?;
            super::bindings::algorithm_eager::Algorithm::add_to_linker::<
                EagerHost,
                HasSelf<EagerHost>,
            >(&mut l, |s| s)?;
            Ok(l)
        })
        .map_err(wasmtime_err)?;
        let bench = super::shapes::bench(|| {
            let mut l = Linker::<BenchHost>::new(&engine);
            wasmtime_wasi::p2::add_to_linker_async(&mut l)?;
            super::wasi::add_simulated_waiting(&mut l)?;
            super::bench::add_to_linker(&mut l)?;
            Ok(l)
        })
        .map_err(wasmtime_err)?;
        let ticker = Ticker::start(&engine);
        let cache = if opts.cache {
            CompileCache::from_env()
        } else {
            None
        };
        Ok(Loader {
            cache,
            pooled,
            ticker,
            engine,
            kernel,
            eager,
            bench,
            opts,
            algorithms: Mutex::new(HashMap::new()),
        })
    }

    /// The budgets of a run that starts now, with a host-memory budget of
    /// `memory_budget` bytes.
    pub fn run_limits(&self, memory_budget: u64) -> RunLimits {
        RunLimits {
            instance: InstanceLimits {
                fuel: self.opts.fuel,
                host_call_fuel: self.opts.host_call_fuel,
                max_host_calls: self.opts.max_host_calls,
                max_memory: self.opts.max_memory_mib << 20,
            },
            budget: Arc::new(MemoryBudget::new(memory_budget)),
            deadline: self.ticker.deadline(self.opts.deadline),
            console: Default::default(),
        }
    }

    /// How many instances can be alive at once (None: no fixed pool).
    pub fn pool_instances(&self) -> Option<u32> {
        self.pooled.then_some(self.opts.pool_instances)
    }

    /// Built-in components of one kind.
    pub fn builtins(kind: ComponentKind) -> impl Iterator<Item = &'static BuiltinComponent> {
        BUILTIN.iter().filter(move |b| b.kind == kind)
    }

    /// Whether `name` (a bare name) is an algorithm component this loader
    /// finds: in `--components-dir`, installed, or built in.
    pub fn finds_algorithm(&self, name: &str) -> bool {
        super::super::components::store::valid_name(name)
            && self.resolve(name, None, ComponentKind::Algorithm).is_ok()
    }

    fn resolve(
        &self,
        spec: &str,
        base_dir: Option<&Path>,
        kind: ComponentKind,
    ) -> Result<(String, Source), SimError> {
        let looks_like_path = spec.ends_with(".wasm") || spec.contains('/') || spec.contains('\\');
        if looks_like_path {
            let p = PathBuf::from(spec);
            let candidates: Vec<PathBuf> = match (p.is_relative(), base_dir) {
                (true, Some(b)) => vec![b.join(&p), p.clone()],
                _ => vec![p.clone()],
            };
            let found = candidates
                .iter()
                .find(|c| c.is_file())
                .cloned()
                .ok_or_else(|| SimError::Component {
                    name: spec.to_string(),
                    message: match candidates.iter().find(|c| c.exists()) {
                        Some(c) if c.is_dir() => format!(
                            "{} is a directory, not a .wasm component file",
                            c.display()
                        ),
                        Some(c) => format!(
                            "{} is not a regular file (a device or socket?); give the path of a .wasm component",
                            c.display()
                        ),
                        None if crate::components::registry::looks_like_reference(spec) => format!(
                            "no such file, and an OCI reference is not run directly: \
                             `kernbench-host install {spec}`, then name it by its installed name"
                        ),
                        None => format!(
                            "no such file (looked at {})",
                            candidates
                                .iter()
                                .map(|c| c.display().to_string())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    },
                })?;
            let name = found
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| spec.to_string());
            return Ok((name, Source::File(found)));
        }
        // The seed's dotted module path: its last segment names the component.
        let name = spec.rsplit('.').next().unwrap_or(spec).to_string();
        if let Some(dir) = &self.opts.components_dir {
            let f = dir.join(format!("{name}.wasm"));
            if f.is_file() {
                return Ok((name, Source::File(f)));
            }
        }
        if let Some(store) = &self.opts.installed {
            match store.find(kind, &name) {
                Ok(Some((path, wasm))) => return Ok((name, Source::Installed(path, wasm))),
                Ok(None) => {}
                Err(e) => {
                    return Err(SimError::Component {
                        name,
                        message: e.to_string(),
                    })
                }
            }
        }
        if let Some(b) = BUILTIN.iter().find(|b| b.name == name && b.kind == kind) {
            return Ok((name, Source::Builtin(b)));
        }
        let known: Vec<&str> = Self::builtins(kind).map(|b| b.name).collect();
        Err(SimError::Component {
            name: spec.to_string(),
            message: format!(
                "no {} component named '{name}' (built in: {}{})",
                if kind == ComponentKind::Algorithm {
                    "algorithm"
                } else {
                    "bench"
                },
                known.join(", "),
                self.opts
                    .components_dir
                    .iter()
                    .cloned()
                    .chain(self.opts.installed.as_ref().map(|s| s.root().to_path_buf()))
                    .map(|d| format!("; searched {}", d.display()))
                    .collect::<String>()
            ),
        })
    }

    /// Find a component by name or path (`kind` None: either kind) and
    /// read its bytes, without compiling it (`inspect`).
    pub fn locate(&self, spec: &str, kind: Option<ComponentKind>) -> Result<Located, SimError> {
        let (name, src) = match kind {
            Some(k) => self.resolve(spec, None, k)?,
            None => self
                .resolve(spec, None, ComponentKind::Algorithm)
                .or_else(|_| self.resolve(spec, None, ComponentKind::Bench))?,
        };
        Ok(match src {
            Source::Builtin(b) => Located {
                spec: b.name.to_string(),
                name,
                origin: format!("built into kernbench-host ({} {})", b.kind.name(), b.name),
                wasm: std::borrow::Cow::Borrowed(b.wasm),
            },
            Source::Installed(p, wasm) => Located {
                spec: name.clone(),
                name,
                origin: format!("installed ({})", p.display()),
                wasm: std::borrow::Cow::Owned(wasm),
            },
            Source::File(p) => {
                let wasm = read_component_file(&name, &p)?;
                Located {
                    spec: p.display().to_string(),
                    name,
                    origin: p.display().to_string(),
                    wasm: std::borrow::Cow::Owned(wasm),
                }
            }
        })
    }

    /// The compiled-code cache entry of `wasm` for this engine, if one
    /// exists (it is checked only when used).
    /// Whether kernels are recorded ahead of simulated time (else they
    /// run in step with it: `--in-step-kernels`).
    pub fn records_kernels(&self) -> bool {
        self.opts.record_kernels
    }

    /// The memo of splits that gave up, beside the compiled code (None
    /// with no cache: `--no-cache`, or no cache directory).
    pub fn split_memo(&self) -> Option<super::split_memo::SplitMemo> {
        let cache = self.cache.as_ref()?;
        Some(super::split_memo::SplitMemo::under(cache.dir()))
    }

    pub fn cached_code(&self, wasm: &[u8]) -> Option<PathBuf> {
        let path = self.cache.as_ref()?.path_for(&self.engine, wasm);
        path.is_file().then_some(path)
    }

    fn compile(
        &self,
        name: &str,
        src: &Source,
        kind: ComponentKind,
    ) -> Result<Component, SimError> {
        let comp_err = |message: String| SimError::Component {
            name: name.to_string(),
            message,
        };
        let file_bytes;
        let wasm: &[u8] = match src {
            Source::Builtin(b) => b.wasm,
            Source::Installed(_, wasm) => wasm,
            Source::File(p) => {
                file_bytes = read_component_file(name, p)?;
                &file_bytes
            }
        };
        let compile = || Component::new(&self.engine, wasm);
        let component = match &self.cache {
            Some(cache) => cache
                .get_or_compile(&self.engine, wasm, compile)
                .map(|(c, lookup)| {
                    tracing::debug!("{name}: compiled-code cache {lookup:?}");
                    c
                }),
            None => compile(),
        }
        .map_err(|e| {
            comp_err(format!(
                "not a valid WebAssembly component: {}",
                describe_wasm_error(&e)
            ))
        })?;
        check_contract(&self.engine, &component, kind).map_err(comp_err)?;
        Ok(component)
    }

    /// Load the algorithm named by a ccl.yaml `module` entry.
    pub fn load_algorithm(
        &self,
        module: &str,
        base_dir: Option<&Path>,
    ) -> Result<AlgorithmComponent, SimError> {
        let (name, src) = self.resolve(module, base_dir, ComponentKind::Algorithm)?;
        let key = match &src {
            Source::Builtin(b) => format!("builtin:{}", b.name),
            Source::File(p) => format!("file:{}", p.display()),
            Source::Installed(p, _) => format!("installed:{}", p.display()),
        };
        if let Some(a) = self.algorithms.lock().unwrap().get(&key) {
            return Ok(a.clone());
        }
        let component = self.compile(&name, &src, ComponentKind::Algorithm)?;
        let (pre, shape) = self
            .kernel
            .instantiate_pre(&component)
            .and_then(|(pre, shape)| Ok((AlgorithmPre::new(pre)?, shape)))
            .map_err(|e| link_failed(&name, &e))?;
        tracing::debug!("{name}: linked as {}", shape.unwrap_or("today's interface"));
        let eager = self
            .eager
            .instantiate_pre(&component)
            .and_then(|(pre, _)| super::bindings::algorithm_eager::AlgorithmPre::new(pre))
            .map_err(|e| link_failed(&name, &e))?;
        let a = AlgorithmComponent {
            name,
            snapshot: shape,
            pre,
            eager: self.opts.record_kernels.then_some(eager),
        };
        self.algorithms.lock().unwrap().insert(key, a.clone());
        Ok(a)
    }

    /// Load a bench by name or path.
    pub fn load_bench(&self, spec: &str) -> Result<BenchComponent, SimError> {
        let (name, src) = self.resolve(spec, None, ComponentKind::Bench)?;
        let component = self.compile(&name, &src, ComponentKind::Bench)?;
        let (pre, shape) = self
            .bench
            .instantiate_pre(&component)
            .and_then(|(pre, shape)| Ok((BenchPre::new(pre)?, shape)))
            .map_err(|e| link_failed(&name, &e))?;
        tracing::debug!("{name}: linked as {}", shape.unwrap_or("today's interface"));
        Ok(BenchComponent {
            name,
            snapshot: shape,
            pre,
        })
    }
}

/// The linker refused component `name`: wasmtime's words, explained for
/// the component's author when they say which import differs.
fn link_failed(name: &str, e: &wasmtime::Error) -> SimError {
    let raw = describe_wasm_error(e);
    SimError::Component {
        name: name.to_string(),
        message: crate::components::compat::explain_link_failure(&raw).unwrap_or(raw),
    }
}

/// A component file's bytes, refused unread when it is too large.
fn read_component_file(name: &str, p: &Path) -> Result<Vec<u8>, SimError> {
    let err = |message: String| SimError::Component {
        name: name.to_string(),
        message,
    };
    let bytes = crate::files::read_bounded(p, MAX_COMPONENT_BYTES).map_err(|e| match e {
        crate::files::ReadError::TooLarge { .. } => err(format!(
            "{} is over the {} MiB a component may have",
            p.display(),
            MAX_COMPONENT_BYTES >> 20
        )),
        e => err(e.to_string()),
    })?;
    if !bytes.starts_with(b"\0asm") {
        if let Some(fix) = source_not_component(p) {
            return Err(err(fix));
        }
    }
    Ok(bytes)
}

/// When `p` is the source of a guest rather than a component: what it is
/// and the command that builds it.
fn source_not_component(p: &Path) -> Option<String> {
    let ext = p.extension()?.to_str()?;
    let shown = p.display();
    let out = p.with_extension("wasm");
    let out = out.display();
    let build = |lang: &str, kind: &str| {
        format!(
            "{shown} is {lang} source, not a component: build it first with \
             `kernbench-host build {shown}{kind} -o {out}`, then give {out}"
        )
    };
    match ext {
        "py" => Some(build("Python", " --kind bench|algorithm")),
        "js" | "mjs" => Some(build("JavaScript", "")),
        "c" => Some(build("C", "")),
        "rs" => Some(format!(
            "{shown} is Rust source, not a component: build its crate with \
             `cargo build --release --target wasm32-wasip2` and run the .wasm under \
             target/wasm32-wasip2/release/"
        )),
        _ => None,
    }
}

/// Check the WIT package version and the world of a component.
fn check_contract(
    engine: &Engine,
    component: &Component,
    kind: ComponentKind,
) -> Result<(), String> {
    let ty = component.component_type();
    let imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
    let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
    let accepted = crate::components::compat::check_component(
        imports.iter().chain(&exports).map(String::as_str),
    )
    .map_err(|e| e.to_string())?;
    if let Some(crate::components::compat::Accepted::Older(v)) = accepted {
        tracing::debug!(
            "built against {WIT_PACKAGE}@{v}, an earlier version of this host's {WIT_PACKAGE}@{WIT_VERSION}: accepted"
        );
    }
    let world = kind.name();
    let missing: Vec<&str> = kind
        .required_exports()
        .iter()
        .copied()
        .filter(|w| !exports.iter().any(|e| e == w))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "is not a {world} component: it does not export {} (its exports: {})",
            missing.join(", "),
            if exports.is_empty() {
                "none".to_string()
            } else {
                exports.join(", ")
            }
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmparser::{DataKind, Operator, Parser, Payload};

    /// The bytes of a component's initial memory above its stack and data
    /// (Rust links the stack first, then the data): the heap its allocator
    /// has before the memory grows. `None` unless exactly one core module
    /// defines a memory.
    fn initial_heap_room(wasm: &[u8]) -> Option<u64> {
        let (mut memories, mut data_end) = (Vec::new(), 0u64);
        for payload in Parser::new(0).parse_all(wasm) {
            match payload.ok()? {
                Payload::MemorySection(s) => {
                    for m in s {
                        memories.push(m.ok()?.initial << 16);
                    }
                }
                Payload::DataSection(s) => {
                    for d in s {
                        let d = d.ok()?;
                        if let DataKind::Active { offset_expr, .. } = d.kind {
                            if let Ok(Operator::I32Const { value }) =
                                offset_expr.get_operators_reader().read()
                            {
                                data_end = data_end.max(value as u32 as u64 + d.data.len() as u64);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        match memories[..] {
            [initial] => Some(initial.saturating_sub(data_end)),
            _ => None,
        }
    }

    #[test]
    fn kernels_start_with_room_for_a_batch_and_benches_with_the_default() {
        // algorithms/kernel_heap.rs links every Rust algorithm with a
        // 192 KiB initial heap (`KERNEL_INITIAL_HEAP`), so that a launch
        // does not grow the kernel's memory (each growth is two
        // `mprotect`s a launch); the benches keep the default (charged at
        // their declared size for the whole run).
        let room = |b: &BuiltinComponent| {
            initial_heap_room(b.wasm).unwrap_or_else(|| panic!("{}: one memory", b.name))
        };
        for b in Loader::builtins(ComponentKind::Algorithm) {
            let r = room(b);
            assert!(
                r >= crate::guest_build::scaffold::KERNEL_INITIAL_HEAP,
                "algorithm {}: {r} bytes of heap",
                b.name
            );
        }
        for bench in ["ccl_allreduce", "ccl_hello"] {
            let b = Loader::builtins(ComponentKind::Bench)
                .find(|b| b.name == bench)
                .unwrap_or_else(|| panic!("built-in {bench}"));
            let r = room(b);
            assert!(r < 128 << 10, "bench {bench}: {r} bytes of heap");
        }
    }
}

#[cfg(test)]
mod source_tests {
    #[test]
    fn a_source_file_given_as_a_component_gets_the_build_command() {
        let dir = tempfile::tempdir().unwrap();
        let py = dir.path().join("b.py");
        std::fs::write(&py, "def run(torch): pass\n").unwrap();
        let e = super::read_component_file("b", &py)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is Python source, not a component"), "{e}");
        assert!(e.contains("kernbench-host build"), "{e}");
        assert!(e.contains("b.wasm"), "{e}");
        // Not source, not wasm: left to the parser's own message.
        let junk = dir.path().join("j.wasm");
        std::fs::write(&junk, "xx").unwrap();
        assert!(super::read_component_file("j", &junk).is_ok());
        let e = super::read_component_file("z", std::path::Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }
}
