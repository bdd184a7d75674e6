//! `kernbench-host run`: one bench on the simulated machine, its table
//! (or JSON, CSV), and the files it was asked for (trace, op log, plot).

use super::{load_ccl, writable};
use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use kernbench::report;
use kernbench::runtime::{run_bench, Loader, LoaderOptions, RunRequest};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
}

// `run`'s arguments (the subcommand's help is its variant's doc comment).
#[derive(clap::Args)]
pub struct RunArgs {
    /// Bench name (see `list`) or path to a bench component.
    pub bench: String,
    /// topology.yaml to use instead of the embedded default.
    #[arg(long)]
    pub topology: Option<PathBuf>,
    #[command(flatten)]
    pub layout: super::topology::LayoutArgs,
    /// A ccl.yaml layered over the embedded one: its entries are added to
    /// the built-in algorithms (one of the same name replaces it) and
    /// its defaults win.
    #[arg(long)]
    pub ccl: Option<PathBuf>,
    /// Algorithm (a ccl.yaml entry) instead of `defaults.algorithm`.
    #[arg(long)]
    pub algorithm: Option<String>,
    /// Directory searched for <name>.wasm before the built-in components.
    #[arg(long, env = "KERNBENCH_COMPONENTS_DIR")]
    pub components_dir: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Do not use the compiled-component cache (`kernbench-host cache
    /// show`): compile every component afresh.
    #[arg(long)]
    pub no_cache: bool,
    /// Write a Chrome/Perfetto trace (every PE engine, link, kernel and
    /// rank) to this file; open it in ui.perfetto.dev.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Print every IPCQ send and receive to stderr as the seed's CCL
    /// trace (`[ccl t=<ns> send] sip0.cube0.pe1 dir=E nbytes=64 seq=0`).
    #[arg(long, env = "KERNBENCH_CCL_TRACE", value_parser = clap::builder::FalseyValueParser::new())]
    pub ccl_trace: bool,
    /// Write the op log (every completed command, what it read and
    /// wrote, its dependencies) to this file as JSON lines.
    #[arg(long, value_name = "FILE")]
    pub oplog: Option<PathBuf>,
    /// Replay the op log with a data executor and compare every byte
    /// the run wrote; report races (ops touching the same bytes with
    /// nothing ordering them) as warnings, or as errors with `=strict`.
    #[arg(long, value_name = "MODE", num_args = 0..=1, require_equals = true,
          default_missing_value = "warn", value_parser = ["warn", "strict"])]
    pub verify_data: Option<String>,
    /// Simulate the timing only: no bytes are stored or moved (host
    /// memory does not grow with the sizes), the same simulated times
    /// as a run with data, results not checked (no #wrong column).
    #[arg(long)]
    pub timing_only: bool,
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
    pub partitions: Option<u32>,
    /// Draw busbw and time against size (one line per collective and
    /// algorithm) into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// Arguments for the bench (after `--`), e.g. `-- -b 8 -e 1M -f 2`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// The budgets that bound a run (see `runtime::limits`).
#[derive(clap::Args)]
pub struct LimitArgs {
    /// Host memory the run may use (simulated memory pages, guest linear
    /// memories and captured output together), e.g. 512M, 8G [default:
    /// half of this machine's memory].
    #[arg(long, value_name = "SIZE", value_parser = kernbench::budget::parse_size)]
    pub memory_budget: Option<u64>,
    /// Wall-clock deadline of the run in seconds (0 = none).
    #[arg(long, value_name = "SECONDS", default_value_t = 1800)]
    pub deadline: u64,
    /// Fuel per guest instance (about one unit per wasm instruction).
    #[arg(long, default_value_t = LoaderOptions::default().fuel)]
    pub fuel: u64,
    /// Host calls per guest instance.
    #[arg(long, default_value_t = LoaderOptions::default().max_host_calls)]
    pub max_host_calls: u64,
    /// Linear-memory cap per guest instance, MiB.
    #[arg(long, value_name = "MIB", default_value_t = LoaderOptions::default().max_memory_mib)]
    pub max_guest_memory: u64,
    /// WebAssembly instances that can be alive at once (two per rank + 2)
    /// [default: sized from the topology's SIP count, at least 1000].
    #[arg(long)]
    pub pool_instances: Option<u32>,
    /// Run every kernel in step with simulated time instead of recording
    /// it first and replaying its calls (slower; the same results)
    #[arg(long)]
    pub in_step_kernels: bool,
}

pub fn run(a: RunArgs) -> Result<()> {
    let RunArgs {
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
    } = a;
    let wall = Instant::now();
    // Output files are checked before the simulation, not found
    // unwritable after it.
    for (flag, path) in [("--trace", &trace), ("--oplog", &oplog), ("--plot", &plot)] {
        if let Some(path) = path {
            writable(path).with_context(|| format!("{flag} {}", path.display()))?;
        }
    }
    let (topo, _) = super::topology::load(topology.as_deref(), &layout)?;
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
        deadline: (limits.deadline > 0).then(|| std::time::Duration::from_secs(limits.deadline)),
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
    let line = super::topology::machine_line(&topo);
    let progress = crate::progress::RunProgress::start(&bench);
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
        let series =
            kernbench::plot::series_of(&rows, res.algorithm.as_deref(), &res.algorithms, None);
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
    Ok(())
}
