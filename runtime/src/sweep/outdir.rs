//! The results directory of a sweep: `plan.json` (the resolved sweep,
//! frozen when the sweep starts, so that every worker — a local process or
//! a Slurm task on another node — runs exactly it) and `points/NNNNNNN.json`,
//! one record per point written as the point completes (to a temporary
//! file, then renamed: a record is whole or absent). Nothing else holds
//! state: resuming, collecting and merging read these files, so a shared
//! directory is all a cluster needs.

use super::spec::Sweep;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A results directory that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum OutDirError {
    #[error("{path}: {message}")]
    Io { path: String, message: String },
    #[error(
        "{dir} holds the results of another sweep (its plan.json differs from {name}); \
         choose another --out, or remove the directory to start again"
    )]
    OtherSweep { dir: String, name: String },
    #[error(
        "{dir} already holds this sweep's results ({done} of {total} points): \
         pass --resume to run the rest, or choose another --out"
    )]
    NotEmpty {
        dir: String,
        done: usize,
        total: usize,
    },
    #[error("{dir} is not a sweep's results directory (no plan.json): {message}")]
    NoPlan { dir: String, message: String },
}

pub(super) fn io_err(path: &Path, e: impl std::fmt::Display) -> OutDirError {
    OutDirError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// What `plan.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Plan {
    /// `kernbench-host` version that wrote it.
    pub version: String,
    /// [`Sweep::digest`].
    pub digest: String,
    pub points: usize,
    pub sweep: Sweep,
}

/// The Slurm ids of the task that ran a point.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SlurmIds {
    /// `SLURM_ARRAY_JOB_ID`.
    pub job: String,
    /// `SLURM_ARRAY_TASK_ID`.
    pub task: usize,
}

/// How a point ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase", tag = "status")]
pub enum Outcome {
    /// It ran: its report rows.
    Ok {
        summary: RunSummary,
        rows: Vec<crate::report::Row>,
        /// The compute table's rows (benches that launch kernels), as the
        /// JSON report writes them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        kernels: Vec<serde_json::Value>,
    },
    /// Its configuration was refused or its run failed (deterministic:
    /// a resume does not run it again).
    Error { error: String },
    /// Its process ended without a record (killed, out of memory, a
    /// crash): a resume runs it again.
    Crashed { error: String },
}

impl Outcome {
    /// `ok`, `error` or `crashed`: the table's status column.
    pub fn status(&self) -> &'static str {
        match self {
            Outcome::Ok { .. } => "ok",
            Outcome::Error { .. } => "error",
            Outcome::Crashed { .. } => "crashed",
        }
    }

    /// Elements that differ from the reference, in report and compute
    /// rows (0 when the run checked nothing: timing only).
    pub fn wrong(&self) -> u64 {
        match self {
            Outcome::Ok {
                summary,
                rows,
                kernels,
            } if !summary.timing_only => {
                crate::report::total_wrong(rows.iter().map(|r| r.wrong).chain(
                    // A count that is not a u64 (2^64 or more) is not 0.
                    kernels.iter().map(|k| match k.get("wrong") {
                        None => 0,
                        Some(v) => v.as_u64().unwrap_or(u64::MAX),
                    }),
                ))
            }
            _ => 0,
        }
    }

    /// The error of a point that failed or crashed.
    pub fn error(&self) -> Option<&str> {
        match self {
            Outcome::Ok { .. } => None,
            Outcome::Error { error } | Outcome::Crashed { error } => Some(error),
        }
    }
}

/// What a run says besides its rows.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunSummary {
    pub algorithm: Option<String>,
    /// The algorithm that served each collective.
    pub algorithms: std::collections::BTreeMap<String, String>,
    pub world_size: Option<u32>,
    pub sim_end_us: f64,
    pub timing_only: bool,
}

/// One point's record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PointRecord {
    pub index: usize,
    /// The plan's digest: a record of another sweep is not this one's.
    pub digest: String,
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Wall time of the point, seconds (not in the merged table: it
    /// depends on the machine).
    pub wall_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<SlurmIds>,
}

/// A sweep's results directory.
#[derive(Debug, Clone)]
pub struct OutDir {
    root: PathBuf,
}

impl OutDir {
    /// Start `sweep` in `root` (created if needed): write its plan, or with
    /// `resume` find the same plan there. A directory holding another
    /// sweep, or this one without `resume`, is refused.
    pub fn start(root: &Path, sweep: &Sweep, resume: bool) -> Result<(OutDir, Plan), OutDirError> {
        let dir = OutDir {
            root: root.to_path_buf(),
        };
        let plan = Plan {
            version: env!("CARGO_PKG_VERSION").to_string(),
            digest: sweep.digest(),
            points: sweep.len(),
            sweep: sweep.clone(),
        };
        if dir.plan_path().exists() {
            let old = dir.plan()?;
            if old.digest != plan.digest {
                return Err(OutDirError::OtherSweep {
                    dir: root.display().to_string(),
                    name: sweep.name.clone(),
                });
            }
            if !resume {
                let done = dir.records(&old)?.iter().filter(|r| r.is_some()).count();
                if done > 0 {
                    return Err(OutDirError::NotEmpty {
                        dir: root.display().to_string(),
                        done,
                        total: old.points,
                    });
                }
            }
            // The frozen plan (with its Slurm settings) stays as written.
            return Ok((dir, old));
        }
        std::fs::create_dir_all(dir.points_dir()).map_err(|e| io_err(&dir.points_dir(), e))?;
        write_atomic(
            &dir.plan_path(),
            serde_json::to_string_pretty(&plan)
                .expect("a plan serialises")
                .as_bytes(),
        )?;
        Ok((dir, plan))
    }

    /// An existing results directory.
    pub fn open(root: &Path) -> Result<(OutDir, Plan), OutDirError> {
        let dir = OutDir {
            root: root.to_path_buf(),
        };
        let plan = dir.plan()?;
        Ok((dir, plan))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn plan_path(&self) -> PathBuf {
        self.root.join("plan.json")
    }

    fn points_dir(&self) -> PathBuf {
        self.root.join("points")
    }

    /// Where point `index`'s record goes.
    pub fn record_path(&self, index: usize) -> PathBuf {
        self.points_dir().join(format!("{index:07}.json"))
    }

    /// Where the output of a point's process goes (local runs).
    pub fn log_path(&self, index: usize) -> PathBuf {
        self.root.join("logs").join(format!("{index:07}.log"))
    }

    fn plan(&self) -> Result<Plan, OutDirError> {
        let p = self.plan_path();
        let text = crate::files::read_text(&p).map_err(|e| OutDirError::NoPlan {
            dir: self.root.display().to_string(),
            message: e.to_string(),
        })?;
        serde_json::from_str(&text).map_err(|e| io_err(&p, format!("not a plan: {e}")))
    }

    /// Store a point's record (atomically).
    pub fn write(&self, rec: &PointRecord) -> Result<(), OutDirError> {
        let path = self.record_path(rec.index);
        std::fs::create_dir_all(self.points_dir()).map_err(|e| io_err(&self.points_dir(), e))?;
        write_atomic(
            &path,
            serde_json::to_string(rec)
                .expect("a record serialises")
                .as_bytes(),
        )
    }

    /// The record of point `index`, if there is one of this plan.
    pub fn record(&self, plan: &Plan, index: usize) -> Result<Option<PointRecord>, OutDirError> {
        let path = self.record_path(index);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path, e)),
        };
        let rec: PointRecord =
            serde_json::from_str(&text).map_err(|e| io_err(&path, format!("not a record: {e}")))?;
        Ok((rec.digest == plan.digest && rec.index == index).then_some(rec))
    }

    /// Every point's record (None: not run yet), by index.
    pub fn records(&self, plan: &Plan) -> Result<Vec<Option<PointRecord>>, OutDirError> {
        (0..plan.points).map(|i| self.record(plan, i)).collect()
    }

    /// The points still to run: no record, or a crashed one.
    pub fn pending(&self, plan: &Plan) -> Result<Vec<usize>, OutDirError> {
        Ok(self
            .records(plan)?
            .into_iter()
            .enumerate()
            .filter(|(_, r)| {
                r.as_ref()
                    .is_none_or(|r| matches!(r.outcome, Outcome::Crashed { .. }))
            })
            .map(|(i, _)| i)
            .collect())
    }

    /// Make the failed points of `plan` pending again: their records move
    /// to `points/failed/` (kept for reference, no longer counted).
    /// Returns their indices.
    pub fn retry_failed(&self, plan: &Plan) -> Result<Vec<usize>, OutDirError> {
        let aside = self.points_dir().join("failed");
        let mut moved = Vec::new();
        for (i, rec) in self.records(plan)?.into_iter().enumerate() {
            if rec.is_some_and(|r| matches!(r.outcome, Outcome::Error { .. })) {
                std::fs::create_dir_all(&aside).map_err(|e| io_err(&aside, e))?;
                let from = self.record_path(i);
                let to = aside.join(from.file_name().expect("a record has a name"));
                std::fs::rename(&from, &to).map_err(|e| io_err(&from, e))?;
                moved.push(i);
            }
        }
        Ok(moved)
    }
}

/// The last `n` non-empty lines of a log (none when it cannot be read).
pub fn log_tail(path: &Path, n: usize) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| l.to_string())
        .collect()
}

/// Write `bytes` to `path` through a temporary file in the same directory
/// and a rename, so a reader (or a crash) never sees half a file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), OutDirError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| io_err(dir, e))?;
    std::io::Write::write_all(&mut tmp, bytes).map_err(|e| io_err(path, e))?;
    tmp.persist(path).map_err(|e| io_err(path, e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(bench: &str) -> Sweep {
        Sweep::parse(
            &format!("bench: {bench}\naxes:\n  system.sips.count: [2, 4, 8]\n"),
            Path::new("/tmp/s.yaml"),
        )
        .unwrap()
    }

    fn record(plan: &Plan, index: usize, outcome: Outcome) -> PointRecord {
        PointRecord {
            index,
            digest: plan.digest.clone(),
            outcome,
            wall_s: 0.1,
            slurm: None,
        }
    }

    #[test]
    fn records_resume_and_refuse_another_sweep() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("out");
        let s = sweep("x");
        let (dir, plan) = OutDir::start(&root, &s, false).unwrap();
        assert_eq!(dir.pending(&plan).unwrap(), [0, 1, 2]);
        dir.write(&record(
            &plan,
            0,
            Outcome::Error {
                error: "bad".into(),
            },
        ))
        .unwrap();
        dir.write(&record(
            &plan,
            2,
            Outcome::Crashed {
                error: "killed".into(),
            },
        ))
        .unwrap();
        // An error is final, a crash is run again.
        assert_eq!(dir.pending(&plan).unwrap(), [1, 2]);
        let e = OutDir::start(&root, &s, false).unwrap_err().to_string();
        assert!(e.contains("pass --resume") && e.contains("2 of 3"), "{e}");
        let (_, again) = OutDir::start(&root, &s, true).unwrap();
        assert_eq!(again, plan);
        let e = OutDir::start(&root, &sweep("y"), true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("another sweep"), "{e}");
        // A record of another plan does not count.
        let mut foreign = record(&plan, 1, Outcome::Error { error: "x".into() });
        foreign.digest = "other".into();
        dir.write(&foreign).unwrap();
        assert_eq!(dir.pending(&plan).unwrap(), [1, 2]);
        let back = dir.record(&plan, 0).unwrap().unwrap();
        assert_eq!(
            back.outcome,
            Outcome::Error {
                error: "bad".into()
            }
        );
        // A failed point can be made pending again; its record is kept aside.
        assert_eq!(dir.retry_failed(&plan).unwrap(), [0]);
        assert_eq!(dir.pending(&plan).unwrap(), [0, 1, 2]);
        assert!(root.join("points/failed/0000000.json").exists());
    }
}
