//! A sweep as a Slurm job array: how points are cut into array tasks
//! (`slurm/array.json`), the batch script (`slurm/sweep.sbatch`, one
//! `kernbench-host sweep exec DIR --task $SLURM_ARRAY_TASK_ID` per task,
//! with the memory a point needs), submission with `sbatch --parsable`
//! (each recorded in `slurm/submissions.jsonl`), and what `collect` says
//! of the points without a record: the job and task that should have run
//! them, the end of the task's log, and the command that runs just those
//! again. Everything is a file of the results directory: the cluster
//! needs a shared directory, no database.

use super::outdir::{write_atomic, OutDir, OutDirError, Outcome, Plan, PointRecord};
use super::spec::Sweep;
use serde::{Deserialize, Serialize};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Slurm's default `MaxArraySize` is 1001: at most this many tasks.
pub const MAX_TASKS: usize = 1000;

/// A Slurm step that failed.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    #[error(transparent)]
    Dir(#[from] OutDirError),
    #[error(
        "{0} has no Slurm job array: run `kernbench-host sweep SWEEP.yaml --slurm -o {0}` first"
    )]
    NoArray(String),
    #[error("cannot run {command}: {message} (is Slurm installed and SLURM_CONF set?)")]
    Spawn { command: String, message: String },
    #[error("{command} failed ({status}): {stderr}")]
    Command {
        command: String,
        status: String,
        stderr: String,
    },
}

/// How the points are cut into tasks.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct ArrayLayout {
    pub points: usize,
    pub per_task: usize,
    /// `--mem` of a task, MiB.
    pub mem_mib: u64,
}

impl ArrayLayout {
    /// `points` in tasks of `per_task` (default: as few points per task as
    /// keep the array within [`MAX_TASKS`]).
    pub fn new(points: usize, per_task: Option<usize>, mem_mib: u64) -> ArrayLayout {
        let per_task = per_task
            .filter(|&k| k > 0)
            .unwrap_or_else(|| points.div_ceil(MAX_TASKS).max(1));
        ArrayLayout {
            points,
            per_task,
            mem_mib,
        }
    }

    pub fn tasks(&self) -> usize {
        self.points.div_ceil(self.per_task)
    }

    /// The points task `task` runs.
    pub fn points_of(&self, task: usize) -> Range<usize> {
        let start = (task * self.per_task).min(self.points);
        start..(start + self.per_task).min(self.points)
    }

    pub fn task_of(&self, point: usize) -> usize {
        point / self.per_task
    }
}

/// Where the Slurm files of `dir` live.
pub fn slurm_dir(dir: &OutDir) -> PathBuf {
    dir.root().join("slurm")
}

fn script_path(dir: &OutDir) -> PathBuf {
    slurm_dir(dir).join("sweep.sbatch")
}

fn layout_path(dir: &OutDir) -> PathBuf {
    slurm_dir(dir).join("array.json")
}

fn submissions_path(dir: &OutDir) -> PathBuf {
    slurm_dir(dir).join("submissions.jsonl")
}

fn io(path: &Path, e: impl std::fmt::Display) -> SlurmError {
    super::outdir::io_err(path, e).into()
}

/// The array layout written for `dir`.
pub fn layout(dir: &OutDir) -> Result<ArrayLayout, SlurmError> {
    let p = layout_path(dir);
    let text = std::fs::read_to_string(&p)
        .map_err(|_| SlurmError::NoArray(dir.root().display().to_string()))?;
    serde_json::from_str(&text).map_err(|e| io(&p, e))
}

/// Host memory one point needs, MiB, estimated from its machine and
/// message size: 64 MiB for the process and its compiled components, 1 MiB
/// per rank (its two guest instances, stacks, queues), and, when data is
/// kept, five times the largest message per rank (the simulated tensor and
/// slots, and the bench guest's f64 copy of its tensor, 4 bytes per f16
/// byte). Measured peaks (ccl_allreduce, dev build, maximum RSS): 4 SIPs
/// x 4 KiB 25 MB (estimate 128), 256 x 16 B 107 MB (320), 64 x 1 MiB
/// 273 MB (448), 16 x 16 MiB 301 MB (1360). `slurm.mem_mib` / `--mem`
/// override it; the point's memory budget is the same figure, so a point
/// that needs more fails with the budget's message, not the OOM killer.
pub fn point_mem_mib(sweep: &Sweep, index: usize) -> u64 {
    const BASE_MIB: u64 = 64;
    let Ok(r) = sweep.point(index).resolve(sweep) else {
        return BASE_MIB;
    };
    let origin = crate::config::Origin::Embedded("topology.yaml");
    let ranks = crate::config::topology::TopologySpec::parse(&r.topology, &origin)
        .map(|s| u64::from(s.n_sips()))
        .unwrap_or(1);
    let max_bytes = max_bytes_of(&r.args).unwrap_or(1 << 20);
    let data = if sweep.timing_only {
        0
    } else {
        ranks.saturating_mul(max_bytes).saturating_mul(5) >> 20
    };
    (BASE_MIB + ranks + data).div_ceil(64) * 64
}

/// The largest message of nccl-tests-style arguments (`-e SIZE`,
/// `--maxbytes SIZE`, `--maxbytes=SIZE`).
fn max_bytes_of(args: &[String]) -> Option<u64> {
    let mut it = args.iter();
    let mut found = None;
    while let Some(a) = it.next() {
        let v = match a.as_str() {
            "-e" | "--maxbytes" => it.next().map(String::as_str),
            s => s
                .strip_prefix("--maxbytes=")
                .or_else(|| s.strip_prefix("-e").filter(|v| !v.is_empty())),
        };
        if let Some(b) = v.and_then(|v| crate::budget::parse_size(v).ok()) {
            found = Some(b);
        }
    }
    found
}

/// What the batch script needs besides the plan.
#[derive(Debug, Clone)]
pub struct ScriptOptions {
    /// The `kernbench-host` the tasks run (on the shared filesystem).
    pub exe: PathBuf,
    pub per_task: Option<usize>,
    pub mem_mib: Option<u64>,
    pub partition: Option<String>,
    pub time: Option<String>,
    /// Further `#SBATCH` options.
    pub sbatch: Vec<String>,
}

fn quote(p: &Path) -> String {
    shlex::try_quote(&p.display().to_string())
        .map(|q| q.into_owned())
        .unwrap_or_else(|_| p.display().to_string())
}

/// Write `slurm/array.json` and `slurm/sweep.sbatch` for `plan`; returns
/// the script's path and the layout.
pub fn write_script(
    dir: &OutDir,
    plan: &Plan,
    opts: &ScriptOptions,
) -> Result<(PathBuf, ArrayLayout), SlurmError> {
    let sdir = slurm_dir(dir);
    std::fs::create_dir_all(sdir.join("logs")).map_err(|e| io(&sdir, e))?;
    let mem_mib = opts.mem_mib.unwrap_or_else(|| {
        (0..plan.points)
            .map(|i| point_mem_mib(&plan.sweep, i))
            .max()
            .unwrap_or(64)
    });
    let layout = ArrayLayout::new(plan.points, opts.per_task, mem_mib);
    let root = std::fs::canonicalize(dir.root()).unwrap_or_else(|_| dir.root().to_path_buf());
    let mut s = String::from("#!/bin/bash\n");
    s += &format!(
        "# KernBench sweep {} ({} points, {} per task): written by kernbench-host {}.\n\
         # Submit it with `kernbench-host sweep collect {} --resubmit` or sbatch;\n\
         # `--array=` on sbatch's command line overrides the one below.\n",
        plan.sweep.name,
        plan.points,
        layout.per_task,
        env!("CARGO_PKG_VERSION"),
        quote(&root)
    );
    s += &format!("#SBATCH --job-name=kb-{}\n", plan.sweep.name);
    s += &format!("#SBATCH --array=0-{}\n", layout.tasks() - 1);
    s += "#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=1\n";
    s += &format!("#SBATCH --mem={}M\n", layout.mem_mib);
    s += &format!(
        "#SBATCH --output={}\n",
        root.join("slurm/logs/%A_%a.out").display()
    );
    if let Some(p) = &opts.partition {
        s += &format!("#SBATCH --partition={p}\n");
    }
    if let Some(t) = &opts.time {
        s += &format!("#SBATCH --time={t}\n");
    }
    for o in &opts.sbatch {
        s += &format!("#SBATCH {o}\n");
    }
    s += &format!(
        "\nexec {} sweep exec {} --task \"$SLURM_ARRAY_TASK_ID\" --memory-budget {}M\n",
        quote(&opts.exe),
        quote(&root),
        layout.mem_mib
    );
    let script = script_path(dir);
    write_atomic(&script, s.as_bytes())?;
    write_atomic(
        &layout_path(dir),
        serde_json::to_string_pretty(&layout)
            .expect("a layout serialises")
            .as_bytes(),
    )?;
    Ok((script, layout))
}

/// One `sbatch` of the array.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Submission {
    pub job: String,
    /// The tasks it runs.
    pub tasks: Vec<usize>,
}

/// `1-3,7`: tasks as Slurm's `--array` writes them.
pub fn array_spec(tasks: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < tasks.len() {
        let mut j = i;
        while j + 1 < tasks.len() && tasks[j + 1] == tasks[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            tasks[i].to_string()
        } else {
            format!("{}-{}", tasks[i], tasks[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// Submit the array of `dir` (only `tasks`, when given) with `sbatch`,
/// with `extra` options; record and return the job id.
pub fn submit(
    dir: &OutDir,
    tasks: Option<&[usize]>,
    extra: &[String],
) -> Result<Submission, SlurmError> {
    let layout = layout(dir)?;
    let tasks: Vec<usize> = match tasks {
        Some(t) => t.to_vec(),
        None => (0..layout.tasks()).collect(),
    };
    let mut cmd = std::process::Command::new("sbatch");
    cmd.arg("--parsable")
        .args(extra)
        .arg(format!("--array={}", array_spec(&tasks)))
        .arg(script_path(dir));
    let shown = format!("{cmd:?}").replace('"', "");
    let out = cmd.output().map_err(|e| SlurmError::Spawn {
        command: shown.clone(),
        message: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(SlurmError::Command {
            command: shown,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    // --parsable: "<job id>[;<cluster>]".
    let stdout = String::from_utf8_lossy(&out.stdout);
    let job = stdout
        .trim()
        .split(';')
        .next()
        .unwrap_or_default()
        .to_string();
    let sub = Submission { job, tasks };
    let p = submissions_path(dir);
    let mut text = std::fs::read_to_string(&p).unwrap_or_default();
    text.push_str(&serde_json::to_string(&sub).expect("a submission serialises"));
    text.push('\n');
    write_atomic(&p, text.as_bytes())?;
    Ok(sub)
}

/// Every recorded submission, oldest first.
pub fn submissions(dir: &OutDir) -> Vec<Submission> {
    std::fs::read_to_string(submissions_path(dir))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A point `collect` reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub point: usize,
    pub label: String,
    pub task: usize,
    /// The array job that ran (or should have run) its task, when known.
    pub job: Option<String>,
    /// Its error (a failed point); None: no record (the task never ran,
    /// was killed, or ran out of memory or time).
    pub error: Option<String>,
    /// The last lines of the task's log, when there is one.
    pub log_tail: Vec<String>,
    pub log: Option<PathBuf>,
}

/// The newest log of `task` (by job id) in the logs directory.
fn task_log(dir: &OutDir, task: usize) -> Option<(String, PathBuf)> {
    let suffix = format!("_{task}.out");
    std::fs::read_dir(slurm_dir(dir).join("logs"))
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let job = name.strip_suffix(&suffix)?.to_string();
            let n: u64 = job.parse().ok()?;
            Some((n, job, e.path()))
        })
        .max_by_key(|(n, _, _)| *n)
        .map(|(_, job, p)| (job, p))
}

/// The points of `records` that failed or have no record, with their
/// Slurm job and task.
pub fn problems(
    dir: &OutDir,
    plan: &Plan,
    layout: &ArrayLayout,
    records: &[Option<PointRecord>],
) -> Vec<Problem> {
    let subs = submissions(dir);
    let mut out = Vec::new();
    for (i, rec) in records.iter().enumerate() {
        let error = match rec.as_ref().map(|r| &r.outcome) {
            Some(Outcome::Ok { .. }) => continue,
            Some(o) => o.error().map(str::to_string),
            None => None,
        };
        let task = layout.task_of(i);
        let log = task_log(dir, task);
        let job = rec
            .as_ref()
            .and_then(|r| r.slurm.as_ref().map(|s| s.job.clone()))
            .or_else(|| {
                // The newest submission that ran this task, else its log.
                subs.iter()
                    .rev()
                    .find(|s| s.tasks.contains(&task))
                    .map(|s| s.job.clone())
            })
            .or_else(|| log.as_ref().map(|(j, _)| j.clone()));
        let log_tail = log
            .as_ref()
            .map(|(_, p)| super::outdir::log_tail(p, 3))
            .unwrap_or_default();
        out.push(Problem {
            point: i,
            label: plan.sweep.point(i).label(),
            task,
            job,
            error,
            log_tail,
            log: log.map(|(_, p)| p),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_cuts_points_into_tasks() {
        let l = ArrayLayout::new(10, Some(3), 512);
        assert_eq!(l.tasks(), 4);
        assert_eq!(l.points_of(3), 9..10);
        assert_eq!(l.task_of(8), 2);
        let big = ArrayLayout::new(2500, None, 512);
        assert_eq!(big.per_task, 3);
        assert!(big.tasks() <= MAX_TASKS);
        assert_eq!(ArrayLayout::new(5, None, 512).per_task, 1);
    }

    #[test]
    fn array_specs_compress_runs() {
        assert_eq!(array_spec(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(array_spec(&[4]), "4");
    }

    #[test]
    fn max_bytes_reads_nccl_flags() {
        let a = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(max_bytes_of(&a("-b 8 -e 1M")), Some(1 << 20));
        assert_eq!(max_bytes_of(&a("--maxbytes=64K")), Some(64 << 10));
        assert_eq!(max_bytes_of(&a("-b 8")), None);
    }

    #[test]
    fn memory_grows_with_ranks_and_sizes_unless_timing_only() {
        let s = |extra: &str| {
            Sweep::parse(
                &format!("bench: x\nargs: -e 64M\n{extra}axes:\n  system.sips.count: [4, 64]\n"),
                Path::new("/tmp/s.yaml"),
            )
            .unwrap()
        };
        let data = s("");
        assert!(point_mem_mib(&data, 1) > point_mem_mib(&data, 0));
        assert!(point_mem_mib(&data, 1) >= 64 * 64 * 5);
        let timing = s("timing_only: true\n");
        assert_eq!(point_mem_mib(&timing, 1), 128);
    }
}
