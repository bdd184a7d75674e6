//! `kernbench-host`: run benches on the simulated AHBM machine.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
mod components_cmd;
mod progress;
mod sweep_cmd;
mod topology_cmd;

use kernbench::config::{CclConfig, Origin};
use kernbench::report;
use kernbench::runtime::loader::ComponentKind;
use kernbench::runtime::{run_bench, Loader, LoaderOptions, RunRequest};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use topology_cmd::{LayoutArgs, TopoCmd};

#[global_allocator]
static HEAP: kernbench::heap::SplitHeap = kernbench::heap::SplitHeap;

#[derive(Parser)]
#[command(
    name = "kernbench-host",
    version,
    about = "Run collective-communication benches on the simulated AHBM accelerator"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
    Csv,
}

// One value per process, parsed once: boxing `Run` would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Cmd {
    /// Run a bench (built-in name or path to a .wasm component).
    Run {
        /// Bench name (see `list`) or path to a bench component.
        bench: String,
        /// topology.yaml to use instead of the embedded default.
        #[arg(long)]
        topology: Option<PathBuf>,
        #[command(flatten)]
        layout: LayoutArgs,
        /// A ccl.yaml layered over the embedded one: its entries are added to
        /// the built-in algorithms (one of the same name replaces it) and
        /// its defaults win.
        #[arg(long)]
        ccl: Option<PathBuf>,
        /// Algorithm (a ccl.yaml entry) instead of `defaults.algorithm`.
        #[arg(long)]
        algorithm: Option<String>,
        /// Directory searched for <name>.wasm before the built-in components.
        #[arg(long, env = "KERNBENCH_COMPONENTS_DIR")]
        components_dir: Option<PathBuf>,
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
        /// Do not use the compiled-component cache (`kernbench-host cache
        /// show`): compile every component afresh.
        #[arg(long)]
        no_cache: bool,
        /// Write a Chrome/Perfetto trace (every PE engine, link, kernel and
        /// rank) to this file; open it in ui.perfetto.dev.
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
        /// Print every IPCQ send and receive to stderr as the seed's CCL
        /// trace (`[ccl t=<ns> send] sip0.cube0.pe1 dir=E nbytes=64 seq=0`).
        #[arg(long, env = "KERNBENCH_CCL_TRACE", value_parser = clap::builder::FalseyValueParser::new())]
        ccl_trace: bool,
        /// Write the op log (every completed command, what it read and
        /// wrote, its dependencies) to this file as JSON lines.
        #[arg(long, value_name = "FILE")]
        oplog: Option<PathBuf>,
        /// Replay the op log with a data executor and compare every byte
        /// the run wrote; report races (ops touching the same bytes with
        /// nothing ordering them) as warnings, or as errors with `=strict`.
        #[arg(long, value_name = "MODE", num_args = 0..=1, require_equals = true,
              default_missing_value = "warn", value_parser = ["warn", "strict"])]
        verify_data: Option<String>,
        /// Simulate the timing only: no bytes are stored or moved (host
        /// memory does not grow with the sizes), the same simulated times
        /// as a run with data, results not checked (no #wrong column).
        #[arg(long)]
        timing_only: bool,
        /// Split the machine into N partitions of consecutive SIPs, each
        /// collective's kernels run by a thread per partition: the same
        /// bytes, times and rows as one (see docs/architecture.md). 1: one
        /// executor. Unset: 2 on a machine
        /// of 64 SIPs or more with more than one core (not with --trace,
        /// --oplog, --verify-data, --ccl-trace or --in-step-kernels),
        /// else 1. A split run
        /// that cannot give the one-partition run's results runs again on
        /// one partition (unset: and the next run like it is not split;
        /// `cache clear` forgets that).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
        partitions: Option<u32>,
        /// Draw busbw and time against size (one line per collective and
        /// algorithm) into this SVG file.
        #[arg(long, value_name = "FILE.svg")]
        plot: Option<PathBuf>,
        #[command(flatten)]
        limits: LimitArgs,
        /// Arguments for the bench (after `--`), e.g. `-- -b 8 -e 1M -f 2`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Draw busbw and time against size from runs' JSON reports
    /// (`run ... --format json > a.json`), one line per run, collective
    /// and algorithm: how collectives and algorithms are compared.
    Plot {
        /// JSON reports of `kernbench-host run --format json`.
        #[arg(required = true)]
        reports: Vec<PathBuf>,
        /// The SVG file to write.
        #[arg(short, long, default_value = "busbw.svg")]
        output: PathBuf,
        /// The figure's title.
        #[arg(long, default_value = "KernBench collectives")]
        title: String,
    },
    /// What a component is (world, WIT version and whether this host runs
    /// it, metadata, producers, imports and exports, size, digest, what an
    /// algorithm implements) and whether its compiled code is cached.
    Inspect(components_cmd::InspectArgs),
    /// The compiled-component cache: `show` where it is and what it
    /// holds, `clear` it.
    Cache {
        #[command(subcommand)]
        cmd: components_cmd::CacheCmd,
    },
    /// List the built-in benches and algorithms, or (`--installed`) the
    /// installed components.
    List {
        #[arg(long)]
        ccl: Option<PathBuf>,
        /// The components installed with `install` instead.
        #[arg(long)]
        installed: bool,
    },
    /// Push a component to an OCI registry (the wasm artifact format `wkg`
    /// uses), with its metadata as annotations.
    Publish {
        /// The component (.wasm).
        file: PathBuf,
        /// Where: registry/repository:tag (e.g. ghcr.io/me/ring:1.0).
        reference: String,
    },
    /// Pull a component from an OCI registry (by tag or @sha256 digest),
    /// check its digests and write it to a file.
    Pull {
        reference: String,
        /// The file to write [default: <its name>.wasm].
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Install a component (a .wasm file or an OCI reference) into the
    /// per-user components directory, so that benches and ccl.yaml
    /// `module:` entries can name it.
    Install {
        /// A .wasm file or registry/repository:tag|@digest.
        source: String,
        /// Install under this name [default: the name it carries].
        #[arg(long)]
        name: Option<String>,
    },
    /// Remove an installed component.
    Remove { name: String },
    /// Run a bench over the product (or zip) of axes of topology.yaml and
    /// ccl.yaml keys, algorithms and bench arguments, on every core here or
    /// as a Slurm job array; one tidy table (CSV, JSON lines) of every
    /// point and size, and a plot (see docs/sweeps.md).
    Sweep(sweep_cmd::SweepArgs),
    /// Inspect or check a topology.
    Topology {
        #[command(subcommand)]
        cmd: TopoCmd,
    },
    /// Build an algorithm or bench written in C (.c), Python (.py) or
    /// JavaScript (.js) into a component (see docs/guest-python.md,
    /// guest-javascript.md, guest-c.md).
    Build {
        /// The source: an algorithm in C or JavaScript, or an algorithm or
        /// bench in Python.
        source: PathBuf,
        /// The component to write.
        #[arg(short, long)]
        output: PathBuf,
        /// What the source is.
        #[arg(long, value_enum, default_value = "algorithm")]
        kind: kernbench::guest_build::Kind,
        /// Build afresh and keep nothing. Otherwise a Python or JavaScript
        /// source whose inputs (its project's sources, the SDK, the WIT,
        /// the tool) have not changed gets the bytes it built to before
        /// (also: KERNBENCH_NO_CACHE set).
        #[arg(long)]
        no_cache: bool,
    },
    /// Start a new algorithm or bench project that builds and runs as it is
    /// (the seed's ring all-reduce, or its ccl_hello bench), with a README
    /// of its commands.
    New {
        /// algorithm or bench.
        #[arg(value_enum)]
        kind: kernbench::guest_build::Kind,
        /// The project's name (a directory, module and ccl.yaml entry).
        name: String,
        #[arg(long, value_enum)]
        lang: kernbench::guest_build::scaffold::NewLang,
        /// Where to create it.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
    /// The toolchains of the Python, JavaScript and C guests: `install`
    /// them into the per-user directory, `show` where `build` looks.
    Toolchains {
        #[command(subcommand)]
        cmd: ToolchainsCmd,
    },
}

#[derive(Subcommand)]
enum ToolchainsCmd {
    /// Install the toolchain of each language given (idempotent): Python's
    /// componentize-py in a venv, JavaScript's componentize-js with npm;
    /// for C, check the system's clang builds wasm32-wasi and say how to
    /// get it if not. Rust guests need only `rustup target add
    /// wasm32-wasip2`.
    Install {
        #[arg(long, value_enum, required = true, num_args = 1..)]
        lang: Vec<kernbench::guest_build::toolchains::ToolLang>,
        /// Install here [default: $KERNBENCH_TOOLCHAINS, else the per-user
        /// directory, e.g. ~/.local/share/kernbench/toolchains].
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Where `build` looks for the toolchains, in order, and what it finds.
    Show,
}

/// The budgets that bound a run (see `runtime::limits`).
#[derive(clap::Args)]
struct LimitArgs {
    /// Host memory the run may use (simulated memory pages, guest linear
    /// memories and captured output together), e.g. 512M, 8G [default:
    /// half of this machine's memory].
    #[arg(long, value_name = "SIZE", value_parser = kernbench::budget::parse_size)]
    memory_budget: Option<u64>,
    /// Wall-clock deadline of the run in seconds (0 = none).
    #[arg(long, value_name = "SECONDS", default_value_t = 1800)]
    deadline: u64,
    /// Fuel per guest instance (about one unit per wasm instruction).
    #[arg(long, default_value_t = LoaderOptions::default().fuel)]
    fuel: u64,
    /// Host calls per guest instance.
    #[arg(long, default_value_t = LoaderOptions::default().max_host_calls)]
    max_host_calls: u64,
    /// Linear-memory cap per guest instance, MiB.
    #[arg(long, value_name = "MIB", default_value_t = LoaderOptions::default().max_memory_mib)]
    max_guest_memory: u64,
    /// WebAssembly instances that can be alive at once (two per rank + 2)
    /// [default: sized from the topology's SIP count, at least 1000].
    #[arg(long)]
    pool_instances: Option<u32>,
    /// Run every kernel in step with simulated time instead of recording
    /// it first and replaying its calls (slower; the same results)
    #[arg(long)]
    in_step_kernels: bool,
}

fn read(path: &Path) -> Result<String> {
    Ok(kernbench::files::read_text(path)?)
}

fn load_ccl(path: Option<&Path>) -> Result<CclConfig> {
    Ok(match path {
        Some(p) => CclConfig::from_yaml_over_builtins(&read(p)?, Origin::File(p.to_path_buf()))?,
        None => CclConfig::default_embedded(),
    })
}

/// Whether the file `path` can be written: its directory exists and a
/// file can be created there (an existing file is left as it is; one
/// made to find out is removed).
fn writable(path: &std::path::Path) -> Result<()> {
    if path.is_dir() {
        bail!("is a directory; give a file name");
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    if !dir.is_dir() {
        bail!("no such directory: {} (create it first)", dir.display());
    }
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .context("cannot be written")?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    kernbench::heap::keep_freed_memory();
    // Rust ignores SIGPIPE, so printing into a closed pipe (`| head`)
    // panics; restore the default of command-line tools: end quietly.
    #[cfg(unix)]
    // SAFETY: at the start of main, before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    match real_main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn real_main() -> Result<()> {
    tracing_subscriber::fmt()
        // KERNBENCH_LOG picks what is shown; by default our warnings, and
        // nothing of the TLS verifier (its errors come back as ours).
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KERNBENCH_LOG").unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("warn,rustls_platform_verifier=off")
            }),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().cmd {
        Cmd::Run {
            bench,
            topology,
            layout,
            ccl,
            algorithm,
            components_dir,
            format,
            no_cache,
            trace,
            ccl_trace,
            oplog,
            verify_data,
            timing_only,
            partitions,
            plot,
            limits,
            args,
        } => {
            let wall = Instant::now();
            // Output files are checked before the simulation, not found
            // unwritable after it.
            for (flag, path) in [("--trace", &trace), ("--oplog", &oplog), ("--plot", &plot)] {
                if let Some(path) = path {
                    writable(path).with_context(|| format!("{flag} {}", path.display()))?;
                }
            }
            let (topo, _) = topology_cmd::load(topology.as_deref(), &layout)?;
            let mut ccl = load_ccl(ccl.as_deref())?;
            if limits.max_guest_memory == 0 || limits.max_guest_memory > 4096 {
                bail!(
                    "--max-guest-memory must be in 1..=4096 MiB (a wasm32 memory), got {}",
                    limits.max_guest_memory
                );
            }
            let pool_instances = limits.pool_instances.unwrap_or_else(|| {
                kernbench::runtime::limits::instances_needed(topo.spec.n_sips())
                    .max(LoaderOptions::default().pool_instances)
            });
            if pool_instances == 0 || pool_instances > 100_000 {
                bail!("--pool-instances must be in 1..=100000, got {pool_instances}");
            }
            let mut opts = LoaderOptions {
                components_dir,
                fuel: limits.fuel,
                max_host_calls: limits.max_host_calls,
                max_memory_mib: limits.max_guest_memory,
                pool_instances,
                record_kernels: !limits.in_step_kernels,
                deadline: (limits.deadline > 0)
                    .then(|| std::time::Duration::from_secs(limits.deadline)),
                ..LoaderOptions::default()
            };
            if no_cache {
                opts.cache = false;
            }
            let loader = Arc::new(Loader::new(opts)?);
            // `--algorithm NAME` of an installed (or --components-dir, or
            // built-in) algorithm that ccl.yaml has no entry for runs it
            // with its own defaults.
            ccl.add_component_entries(algorithm.as_deref(), |name| loader.finds_algorithm(name));
            let line = topology_cmd::machine_line(&topo);
            let progress = progress::RunProgress::start(&bench);
            let res = run_bench(
                &loader,
                RunRequest {
                    algorithm,
                    args,
                    trace: trace.is_some(),
                    memory_budget: limits
                        .memory_budget
                        .unwrap_or_else(kernbench::budget::MemoryBudget::default_limit),
                    memory_baseline: kernbench::budget::MemoryBudget::process_resident(),
                    on_row: Some(progress.observer()),
                    ccl_trace: ccl_trace.then(|| {
                        let log: kernbench::hw::machine::CclLog =
                            Arc::new(|line: String| eprintln!("{line}"));
                        log
                    }),
                    record_ops: oplog.is_some(),
                    verify_data: verify_data.as_deref().map(|m| match m {
                        "strict" => kernbench::verify::Strictness::Strict,
                        _ => kernbench::verify::Strictness::Warn,
                    }),
                    timing_only,
                    partitions: partitions.map(|n| n as usize),
                    split_falls_back: true,
                    ..RunRequest::new(bench, topo, ccl)
                },
            );
            progress.finish();
            let res = res?;
            if let Some(dropped) = res.trace_dropped.filter(|&d| d > 0) {
                eprintln!(
                    "# trace truncated: {dropped} spans not recorded (the memory budget was spent; raise --memory-budget)"
                );
            }
            if let (Some(path), Some(log)) = (&oplog, &res.oplog) {
                std::fs::write(path, log.to_jsonl())
                    .with_context(|| format!("cannot write the op log to {}", path.display()))?;
                eprintln!(
                    "# op log written to {} ({} ops)",
                    path.display(),
                    log.records().len()
                );
            }
            if let (Some(path), Some(json)) = (&trace, &res.trace) {
                std::fs::write(path, serde_json::to_vec(json)?)
                    .with_context(|| format!("cannot write the trace to {}", path.display()))?;
                eprintln!(
                    "# trace written to {} (open it in ui.perfetto.dev)",
                    path.display()
                );
            }
            let rows = report::aggregate(&res.rows, res.alpha_beta.as_ref());
            if let Some(path) = &plot {
                let series = kernbench::plot::series_of(
                    &rows,
                    res.algorithm.as_deref(),
                    &res.algorithms,
                    None,
                );
                kernbench::plot::draw(path, &format!("{} ({line})", res.bench), &series)?;
                eprintln!("# plot written to {}", path.display());
            }
            match format {
                Format::Table => print!("{}", report::to_table(&res, &rows, &line)),
                Format::Json => println!("{}", report::to_json(&res, &rows)),
                Format::Csv if rows.is_empty() && !res.kernel_rows.is_empty() => {
                    print!("{}", kernbench::kernel_report::to_csv(&res.kernel_rows))
                }
                Format::Csv => {
                    print!("{}", report::to_csv(&rows, !res.timing_only));
                    if !res.kernel_rows.is_empty() {
                        eprintln!("# the compute rows are not in this CSV: use --format json");
                    }
                }
            }
            let split = match res.partitions {
                1 => String::new(),
                n => format!(" | split in {n} partitions"),
            };
            eprintln!(
                "# simulated {:.3} us | {} executor events | {} DMA + {} MATH + {} GEMM commands | peak budgeted host memory {}{split} | wall {:.3} s",
                kernbench::units::ps_to_us(res.end_time_ps),
                res.events,
                res.stats.dma_commands,
                res.stats.math_commands,
                res.stats.gemm_commands,
                kernbench::budget::human_bytes(res.memory_peak),
                wall.elapsed().as_secs_f64()
            );
            if res.recordings.reused > 0 {
                eprintln!(
                    "# kernel launches: {} recorded, {} reused the recording of an equal launch",
                    res.recordings.recorded, res.recordings.reused
                );
            }
            if let Some(v) = &res.verification {
                // With --format json/csv stdout stays machine-readable.
                match format {
                    Format::Table => print!("{}", v.report()),
                    _ => eprint!("{}", v.report()),
                }
            }
            use kernbench::report::{total_wrong, wrong_shown};
            let wrong = total_wrong(rows.iter().map(|r| r.wrong));
            if wrong > 0 && !res.timing_only {
                bail!(
                    "{} element(s) differ from the reference result",
                    wrong_shown(wrong)
                );
            }
            let off = total_wrong(res.kernel_rows.iter().map(|r| r.wrong));
            if off > 0 && !res.timing_only {
                bail!(
                    "{} element(s) differ from the reference by more than the tolerance",
                    wrong_shown(off)
                );
            }
            if res.verification.as_ref().is_some_and(|v| v.failed()) {
                bail!("--verify-data: the second pass failed (see above)");
            }
        }
        Cmd::Plot {
            reports,
            output,
            title,
        } => {
            let series = kernbench::plot::series_of_reports(&reports)?;
            kernbench::plot::draw(&output, &title, &series)?;
            eprintln!(
                "# {} line(s) from {} report(s) written to {}",
                series.len(),
                reports.len(),
                output.display()
            );
        }
        Cmd::List {
            installed: true, ..
        } => components_cmd::list_installed()?,
        Cmd::Publish { file, reference } => components_cmd::publish(&file, &reference)?,
        Cmd::Pull { reference, output } => components_cmd::pull(&reference, output)?,
        Cmd::Install { source, name } => components_cmd::install(&source, name.as_deref())?,
        Cmd::Remove { name } => components_cmd::remove(&name)?,
        Cmd::List { ccl, .. } => {
            let ccl = load_ccl(ccl.as_deref())?;
            println!("Benches (built in):");
            for b in Loader::builtins(ComponentKind::Bench) {
                println!("  {}", b.name);
            }
            println!(
                "Algorithms and kernels (built in; benches launch the kernels gemm and va_probe):"
            );
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
        }
        Cmd::Topology { cmd } => topology_cmd::run(cmd)?,
        Cmd::Toolchains { cmd } => toolchains(cmd)?,
        Cmd::Sweep(args) => sweep_cmd::run(args)?,
        Cmd::Cache { cmd } => components_cmd::run_cache(cmd)?,
        Cmd::Inspect(args) => components_cmd::inspect(args)?,
        Cmd::Build {
            source,
            output,
            kind,
            no_cache,
        } => {
            use kernbench::guest_build::{reuse::BuildCache, Built};
            let keep = !no_cache && std::env::var_os("KERNBENCH_NO_CACHE").is_none();
            let cache = keep
                .then(kernbench::runtime::compile_cache::CompileCache::from_env)
                .flatten()
                .map(|c| BuildCache::under(c.dir()));
            let built =
                kernbench::guest_build::build_reusing(&source, kind, &output, cache.as_ref())?;
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
        }
        Cmd::New {
            kind,
            name,
            lang,
            dir,
        } => {
            let root = kernbench::guest_build::scaffold::create(&dir, kind, lang, &name)?;
            println!(
                "created {} ({} in {}); its README.md says how to build, run and test it",
                root.display(),
                kind.name(),
                lang.name()
            );
        }
    }
    Ok(())
}

fn toolchains(cmd: ToolchainsCmd) -> Result<()> {
    use kernbench::guest_build::toolchains as tc;
    match cmd {
        ToolchainsCmd::Install { lang, dir } => {
            let dir = dir.or_else(tc::install_dir).context(
                "no per-user directory (no HOME): pass --dir or set KERNBENCH_TOOLCHAINS",
            )?;
            for l in lang {
                println!("{}", tc::install(l, &dir)?);
            }
        }
        ToolchainsCmd::Show => {
            println!("searched in this order (the first that has a tool wins):");
            for d in tc::search_dirs() {
                println!("  {}", d.display());
            }
            let found = |r: Result<PathBuf, _>| match r {
                Ok(p) => p.display().to_string(),
                Err(e) => format!("not found ({e})"),
            };
            println!("componentize-py: {}", found(tc::componentize_py()));
            println!("componentize-js: {}", found(tc::componentize_js()));
            println!("C compiler: {} (KERNBENCH_CC)", tc::c_compiler());
        }
    }
    Ok(())
}

#[cfg(test)]
mod cli_reference {
    use super::Cli;

    /// The CLI reference page, generated from the clap definitions above.
    fn generated() -> String {
        let body = clap_markdown::help_markdown_custom::<Cli>(
            &clap_markdown::MarkdownOptions::new()
                .title("CLI reference".into())
                .show_footer(false),
        );
        // Help texts say `<name>.wasm`: outside code spans that is an
        // HTML tag to a Markdown renderer.
        let body: String = body
            .lines()
            .map(|l| {
                l.split('`')
                    .enumerate()
                    .map(|(i, part)| {
                        if i % 2 == 0 {
                            part.replace('<', "&lt;").replace('>', "&gt;")
                        } else {
                            part.to_string()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("`")
                    + "\n"
            })
            .collect();
        format!(
            "<!-- Generated from host/src/main.rs by the test `cli_reference`: do not edit.\n     \
             Regenerate: KERNBENCH_BLESS=1 cargo test -p kernbench-host --bin kernbench-host cli_reference -->\n\n{body}"
        )
    }

    /// docs/cli.md is what the clap definitions say: a new command, option
    /// or help text fails this test until the page is regenerated (with
    /// `KERNBENCH_BLESS=1`, which rewrites it).
    #[test]
    fn cli_reference_page_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/cli.md");
        let want = generated();
        if std::env::var_os("KERNBENCH_BLESS").is_some() {
            std::fs::write(&path, &want).unwrap();
            return;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "docs/cli.md is stale (or missing): the CLI changed. Regenerate it with\n  \
             KERNBENCH_BLESS=1 cargo test -p kernbench-host --bin kernbench-host cli_reference\n\
             and commit the page."
        );
    }
}
