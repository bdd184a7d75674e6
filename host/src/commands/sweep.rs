//! `kernbench-host sweep`: run a sweep file's points on every core here
//! (worker processes, each `sweep exec` of one point), or write and submit
//! it as a Slurm job array; `sweep collect` merges what the tasks left in
//! the results directory and names what is missing; `sweep plot` draws
//! the merged table. The sweep itself (points, records, table, array) is
//! `kernbench::sweep`.

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kernbench::sweep::outdir::SlurmIds;
use kernbench::sweep::plot::PlotSpec;
use kernbench::sweep::slurm::{self, ScriptOptions};
use kernbench::sweep::{exec, table, OutDir, Outcome, Plan, PointRecord, Sweep};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SweepArgs {
    #[command(subcommand)]
    cmd: Option<SweepCmd>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(clap::Subcommand)]
enum SweepCmd {
    /// Merge the records of a results directory into results.csv and
    /// results.jsonl; name the points that failed or have no record (with
    /// their Slurm job and task) and how to run just those again.
    Collect {
        dir: PathBuf,
        /// Submit the tasks of the missing points again (sbatch).
        #[arg(long)]
        resubmit: bool,
        /// With --resubmit: the failed points too (after raising --mem or
        /// the deadline, say); their records move to points/failed/.
        #[arg(long, requires = "resubmit")]
        retry_failed: bool,
        /// A further sbatch option for --resubmit (repeatable).
        #[arg(long = "sbatch-arg", value_name = "OPTION", allow_hyphen_values = true)]
        sbatch_args: Vec<String>,
        #[command(flatten)]
        plot: PlotArgs,
    },
    /// Draw a results directory's table (see --plot).
    Plot {
        dir: PathBuf,
        #[command(flatten)]
        plot: PlotArgs,
    },
    /// Run points of a results directory in this process (what workers and
    /// Slurm tasks run).
    Exec {
        dir: PathBuf,
        /// The points to run (comma-separated indices).
        #[arg(long, value_delimiter = ',', conflicts_with = "task")]
        point: Vec<usize>,
        /// The array task whose points to run (slurm/array.json).
        #[arg(long)]
        task: Option<usize>,
        #[command(flatten)]
        limits: PointLimits,
    },
}

#[derive(clap::Args)]
struct PointLimits {
    /// Host memory of one point, e.g. 2G [default: half of this machine's
    /// memory, shared by the workers].
    #[arg(long, value_name = "SIZE", value_parser = kernbench::budget::parse_size)]
    memory_budget: Option<u64>,
    /// Wall-clock deadline of one point, seconds (0 = none).
    #[arg(long, value_name = "SECONDS", default_value_t = 1800)]
    deadline: u64,
}

#[derive(clap::Args)]
struct RunArgs {
    /// The sweep file (see docs/sweeps.md).
    file: Option<PathBuf>,
    /// The results directory [default: <sweep file's stem>.sweep].
    #[arg(short, long)]
    out: Option<PathBuf>,
    /// Worker processes [default: the cores of this machine].
    #[arg(short, long)]
    jobs: Option<usize>,
    /// Run only the points the results directory has no record of.
    #[arg(long)]
    resume: bool,
    /// With --resume: run the failed points again too (their records move
    /// to points/failed/).
    #[arg(long, requires = "resume")]
    retry_failed: bool,
    /// Write a Slurm job array (results-dir/slurm/sweep.sbatch) instead of
    /// running here.
    #[arg(long)]
    slurm: bool,
    /// With --slurm: submit it (sbatch).
    #[arg(long, requires = "slurm")]
    submit: bool,
    /// With --slurm: points per array task [default: as few as keep the
    /// array within 1000 tasks].
    #[arg(long, requires = "slurm")]
    points_per_task: Option<usize>,
    /// With --slurm: memory of a task, MiB [default: estimated from the
    /// largest point].
    #[arg(long, value_name = "MIB", requires = "slurm")]
    mem: Option<u64>,
    /// With --slurm: the partition.
    #[arg(long, requires = "slurm")]
    partition: Option<String>,
    /// With --slurm: the time limit of a task (Slurm's format).
    #[arg(long, requires = "slurm")]
    time: Option<String>,
    /// With --slurm: a further sbatch option (repeatable), e.g.
    /// --sbatch-arg=--account=proj.
    #[arg(
        long = "sbatch-arg",
        value_name = "OPTION",
        allow_hyphen_values = true,
        requires = "slurm"
    )]
    sbatch_args: Vec<String>,
    #[command(flatten)]
    limits: PointLimits,
    #[command(flatten)]
    plot: PlotArgs,
}

#[derive(clap::Args)]
struct PlotArgs {
    /// Draw the table into this SVG file: --y against --x, one line per
    /// value of --by.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// The x column.
    #[arg(long, default_value = "size_bytes")]
    x: String,
    /// The plotted column.
    #[arg(long, default_value = "busbw_gbps")]
    y: String,
    /// One line per value of this column [default: the first axis].
    #[arg(long)]
    by: Option<String>,
    /// Keep only rows where COLUMN has VALUE (repeatable).
    #[arg(long = "where", value_name = "COLUMN=VALUE")]
    filters: Vec<String>,
}

pub fn run(args: SweepArgs) -> Result<()> {
    match args.cmd {
        Some(SweepCmd::Collect {
            dir,
            resubmit,
            retry_failed,
            sbatch_args,
            plot,
        }) => collect(&dir, resubmit, retry_failed, &sbatch_args, &plot),
        Some(SweepCmd::Plot { dir, plot }) => {
            let (dir, plan) = OutDir::open(&dir)?;
            if plot.plot.is_none() {
                bail!("sweep plot: say where with --plot FILE.svg");
            }
            let records = dir.records(&plan)?;
            draw(&plan, &table::build(&plan.sweep, &records).rows, &plot)
        }
        Some(SweepCmd::Exec {
            dir,
            point,
            task,
            limits,
        }) => exec_points(&dir, &point, task, &limits),
        None => {
            let Some(file) = args.run.file.clone() else {
                bail!("sweep: name a sweep file (kernbench-host sweep sweep.yaml), or use collect / plot");
            };
            start(&file, args.run)
        }
    }
}

fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn start(file: &Path, a: RunArgs) -> Result<()> {
    let sweep = Sweep::load(file)?;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.sweep", sweep.name)));
    let (dir, plan) = OutDir::start(&out, &sweep, a.resume || a.slurm)?;
    if a.retry_failed {
        let again = dir.retry_failed(&plan)?;
        eprintln!("# {} failed point(s) to run again", again.len());
    }
    if a.slurm {
        let exe = std::env::current_exe().context("cannot find this kernbench-host")?;
        let s = &plan.sweep.slurm;
        let (script, layout) = slurm::write_script(
            &dir,
            &plan,
            &ScriptOptions {
                exe,
                per_task: a.points_per_task.or(s.points_per_task),
                mem_mib: a.mem.or(s.mem_mib),
                partition: a.partition.clone().or(s.partition.clone()),
                time: a.time.clone().or(s.time.clone()),
                sbatch: s.sbatch.iter().chain(&a.sbatch_args).cloned().collect(),
            },
        )?;
        eprintln!(
            "# {} points in {} array tasks of {} point(s), {} MiB each: {}",
            plan.points,
            layout.tasks(),
            layout.per_task,
            layout.mem_mib,
            script.display()
        );
        if a.submit {
            let sub = slurm::submit(&dir, None, &[])?;
            println!(
                "submitted job array {} ({} tasks)",
                sub.job,
                sub.tasks.len()
            );
            eprintln!(
                "# when it is done: kernbench-host sweep collect {}",
                dir.root().display()
            );
        } else {
            println!("sbatch {}", script.display());
            eprintln!(
                "# submit it with the line above or kernbench-host sweep collect {} --resubmit; when it is done: kernbench-host sweep collect {}",
                dir.root().display(),
                dir.root().display()
            );
        }
        return Ok(());
    }
    let workers = a.jobs.unwrap_or_else(default_workers).max(1);
    let budget = a
        .limits
        .memory_budget
        .unwrap_or_else(|| kernbench::budget::MemoryBudget::default_limit() / workers as u64);
    run_local(&dir, &plan, workers, budget, a.limits.deadline)?;
    finish(&dir, &plan, &a.plot, false)
}

/// Run the pending points of `dir` with `workers` processes at a time.
fn run_local(dir: &OutDir, plan: &Plan, workers: usize, budget: u64, deadline: u64) -> Result<()> {
    let pending = dir.pending(plan)?;
    let exe = std::env::current_exe().context("cannot find this kernbench-host")?;
    let bar = progress_bar(plan.points as u64, (plan.points - pending.len()) as u64);
    let mut queue = pending.into_iter();
    let mut running: Vec<(usize, Child)> = Vec::new();
    loop {
        while running.len() < workers {
            let Some(i) = queue.next() else { break };
            let log_path = dir.log_path(i);
            if let Some(d) = log_path.parent() {
                std::fs::create_dir_all(d)
                    .with_context(|| format!("cannot create {}", d.display()))?;
            }
            let log = std::fs::File::create(&log_path)
                .with_context(|| format!("cannot create {}", log_path.display()))?;
            let child = Command::new(&exe)
                .args(["sweep", "exec"])
                .arg(dir.root())
                .arg(format!("--point={i}"))
                .arg(format!("--memory-budget={budget}"))
                .arg(format!("--deadline={deadline}"))
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()
                .with_context(|| format!("cannot start {}", exe.display()))?;
            running.push((i, child));
        }
        if running.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
        let mut k = 0;
        while k < running.len() {
            let Some(status) = running[k].1.try_wait()? else {
                k += 1;
                continue;
            };
            let (i, _) = running.swap_remove(k);
            let log_path = dir.log_path(i);
            match dir.record(plan, i)? {
                Some(rec) => {
                    if matches!(rec.outcome, Outcome::Ok { .. }) {
                        let _ = std::fs::remove_file(&log_path);
                    }
                    bar.set_message(format!("last: point {i} {}", rec.outcome.status()));
                }
                None => {
                    let tail = kernbench::sweep::outdir::log_tail(&log_path, 3).join(" | ");
                    dir.write(&PointRecord {
                        index: i,
                        digest: plan.digest.clone(),
                        outcome: Outcome::Crashed {
                            error: format!(
                                "its process ended ({status}) without a result{}; log: {}",
                                if tail.is_empty() {
                                    String::new()
                                } else {
                                    format!(": {tail}")
                                },
                                log_path.display()
                            ),
                        },
                        wall_s: 0.0,
                        slurm: None,
                    })?;
                    bar.set_message(format!("last: point {i} crashed"));
                }
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(())
}

/// A bar of points with the ETA, on stderr when it is a terminal.
fn progress_bar(len: u64, done: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:30} {pos}/{len} points [{elapsed_precise}, ETA {eta_precise}] {msg}",
        )
        .expect("a valid template"),
    );
    bar.set_position(done);
    bar.reset_eta();
    if std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::stderr());
        bar.enable_steady_tick(Duration::from_millis(200));
    }
    bar
}

/// `sweep exec`: run points here, writing each record as it completes.
fn exec_points(
    dir: &Path,
    points: &[usize],
    task: Option<usize>,
    limits: &PointLimits,
) -> Result<()> {
    let (dir, plan) = OutDir::open(dir)?;
    let points: Vec<usize> = match task {
        Some(t) => {
            let layout = slurm::layout(&dir)?;
            if t >= layout.tasks() {
                bail!("task {t}: the array has tasks 0..{}", layout.tasks());
            }
            layout.points_of(t).collect()
        }
        None if points.is_empty() => bail!("sweep exec: name --point or --task"),
        None => points.to_vec(),
    };
    if let Some(&bad) = points.iter().find(|&&p| p >= plan.points) {
        bail!("point {bad}: the sweep has points 0..{}", plan.points);
    }
    let slurm = std::env::var("SLURM_ARRAY_JOB_ID")
        .ok()
        .map(|job| SlurmIds {
            job,
            task: std::env::var("SLURM_ARRAY_TASK_ID")
                .ok()
                .and_then(|t| t.parse().ok())
                .unwrap_or(task.unwrap_or(0)),
        });
    let opts = exec::ExecOptions {
        memory_budget: limits
            .memory_budget
            .unwrap_or_else(kernbench::budget::MemoryBudget::default_limit),
        deadline: (limits.deadline > 0).then(|| Duration::from_secs(limits.deadline)),
        slurm,
    };
    let mut runner = exec::Runner::new(opts);
    for i in points {
        // A task run again does only what is missing.
        if task.is_some()
            && dir
                .record(&plan, i)?
                .is_some_and(|r| !matches!(r.outcome, Outcome::Crashed { .. }))
        {
            println!("point {i}: already done");
            continue;
        }
        let rec = runner.run(&plan.sweep, &plan.digest, i);
        dir.write(&rec)?;
        match &rec.outcome {
            Outcome::Ok { .. } => println!(
                "point {i} ({}): ok in {:.2} s",
                plan.sweep.point(i).label(),
                rec.wall_s
            ),
            Outcome::Error { error } | Outcome::Crashed { error } => println!(
                "point {i} ({}): failed: {error}",
                plan.sweep.point(i).label()
            ),
        }
    }
    Ok(())
}

/// Write the merged table, say what failed (unless `listed`), draw the
/// plot.
fn finish(dir: &OutDir, plan: &Plan, plot: &PlotArgs, listed: bool) -> Result<()> {
    let records = dir.records(plan)?;
    let table = table::build(&plan.sweep, &records);
    let csv_path = dir.root().join("results.csv");
    let jsonl_path = dir.root().join("results.jsonl");
    kernbench::sweep::outdir::write_atomic(&csv_path, table.to_csv().as_bytes())?;
    kernbench::sweep::outdir::write_atomic(&jsonl_path, table.to_jsonl().as_bytes())?;
    let ok = records
        .iter()
        .flatten()
        .filter(|r| matches!(r.outcome, Outcome::Ok { .. }))
        .count();
    let wrong = kernbench::report::total_wrong(records.iter().flatten().map(|r| r.outcome.wrong()));
    let failed: Vec<(usize, &str)> = records
        .iter()
        .flatten()
        .filter_map(|r| Some((r.index, r.outcome.error()?)))
        .collect();
    let missing = records.iter().filter(|r| r.is_none()).count();
    // (`collect` has listed them already, with their Slurm ids.)
    for (i, error) in failed.iter().take(if listed { 0 } else { 20 }) {
        // The first line (a guest backtrace follows in the table).
        let first = error.lines().next().unwrap_or_default();
        eprintln!("# point {i} ({}): {first}", plan.sweep.point(*i).label());
    }
    if !listed && failed.len() > 20 {
        eprintln!(
            "# ... and {} more (the error column of the table)",
            failed.len() - 20
        );
    }
    eprintln!(
        "# sweep {}: {} points, {ok} ok, {} failed, {missing} without a record | {} rows in {} and {}",
        plan.sweep.name,
        plan.points,
        failed.len(),
        table.rows.len(),
        csv_path.display(),
        jsonl_path.display()
    );
    if plot.plot.is_some() {
        draw(plan, &table.rows, plot)?;
    }
    if !failed.is_empty() || missing > 0 {
        bail!(
            "{} of {} points have no result (listed above); the others' are in {}",
            failed.len() + missing,
            plan.points,
            csv_path.display()
        );
    }
    if wrong > 0 {
        bail!(
            "{} element(s) differ from the reference result (the wrong column)",
            kernbench::report::wrong_shown(wrong)
        );
    }
    Ok(())
}

fn draw(
    plan: &Plan,
    rows: &[serde_json::Map<String, serde_json::Value>],
    p: &PlotArgs,
) -> Result<()> {
    let Some(path) = &p.plot else { return Ok(()) };
    let axes: Vec<String> = plan.sweep.axes.iter().map(|a| a.name.clone()).collect();
    let mut filters = Vec::new();
    for f in &p.filters {
        let Some((c, v)) = f.split_once('=') else {
            bail!("--where {f}: write COLUMN=VALUE");
        };
        filters.push((c.to_string(), v.to_string()));
    }
    let spec = PlotSpec {
        x: p.x.clone(),
        y: p.y.clone(),
        by: p
            .by
            .clone()
            .or_else(|| axes.iter().find(|a| **a != p.x).cloned()),
        filters,
    };
    let lines = kernbench::sweep::plot::lines(rows, &axes, &spec)?;
    let title = format!("{}: {} against {}", plan.sweep.name, spec.y, spec.x);
    kernbench::sweep::plot::draw(path, &title, &spec, &lines)?;
    eprintln!("# plot written to {}", path.display());
    Ok(())
}

/// `sweep collect`: merge, name what is missing, optionally submit it again.
fn collect(
    dir: &Path,
    resubmit: bool,
    retry_failed: bool,
    sbatch_args: &[String],
    plot: &PlotArgs,
) -> Result<()> {
    let (dir, plan) = OutDir::open(dir)?;
    if retry_failed {
        let again = dir.retry_failed(&plan)?;
        eprintln!("# {} failed point(s) to run again", again.len());
    }
    let records = dir.records(&plan)?;
    let layout = slurm::layout(&dir).ok();
    if let Some(layout) = &layout {
        let problems = slurm::problems(&dir, &plan, layout, &records);
        let mut rerun: Vec<usize> = Vec::new();
        for p in &problems {
            match (&p.error, &p.job) {
                (Some(e), job) => eprintln!(
                    "# point {} ({}): failed in job {} task {}: {}",
                    p.point,
                    p.label,
                    job.as_deref().unwrap_or("(not recorded)"),
                    p.task,
                    // The first line (a guest backtrace follows in the table).
                    e.lines().next().unwrap_or_default()
                ),
                (None, None) => {
                    eprintln!(
                        "# point {} ({}): task {} has not been submitted",
                        p.point, p.label, p.task
                    );
                    if !rerun.contains(&p.task) {
                        rerun.push(p.task);
                    }
                }
                (None, Some(job)) => {
                    eprintln!(
                        "# point {} ({}): no result from job {job} task {}{}",
                        p.point,
                        p.label,
                        p.task,
                        match &p.log {
                            Some(l) =>
                                format!(" (log {}: {})", l.display(), p.log_tail.join(" | ")),
                            None => " (the task left no log: it never started)".into(),
                        }
                    );
                    if !rerun.contains(&p.task) {
                        rerun.push(p.task);
                    }
                }
            }
        }
        if !rerun.is_empty() {
            rerun.sort_unstable();
            let spec = slurm::array_spec(&rerun);
            if resubmit {
                let sub = slurm::submit(&dir, Some(&rerun), sbatch_args)?;
                println!("submitted job array {} (tasks {spec})", sub.job);
                eprintln!(
                    "# when it is done: kernbench-host sweep collect {}",
                    dir.root().display()
                );
                return Ok(());
            }
            eprintln!(
                "# run just those again: kernbench-host sweep collect {} --resubmit\n#   (or: sbatch --array={spec} {}; or here: kernbench-host sweep exec {} --task N)",
                dir.root().display(),
                slurm::slurm_dir(&dir).join("sweep.sbatch").display(),
                dir.root().display()
            );
        }
        if problems.iter().any(|p| p.error.is_some()) {
            eprintln!(
                "# failed points run again only when asked (after raising --mem, say): kernbench-host sweep collect {} --resubmit --retry-failed",
                dir.root().display()
            );
        }
    } else if records.iter().any(|r| r.is_none()) {
        eprintln!(
            "# points without a record: run them with kernbench-host sweep SWEEP.yaml -o {} --resume",
            dir.root().display()
        );
    }
    finish(&dir, &plan, plot, layout.is_some())
}
