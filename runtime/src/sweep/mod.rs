//! Design-space sweeps: a bench run over the product (or zip) of axes —
//! keys of topology.yaml and ccl.yaml, the algorithm, the bench and its
//! arguments — each point's result kept in a results directory as it
//! completes, merged into one tidy table, drawn as one picture.
//!
//! * [`spec`]: the sweep file and its points;
//! * [`outdir`]: the results directory (plan, one record per point,
//!   resume);
//! * [`exec`]: one point run in this process;
//! * [`table`]: the merged table (CSV, JSON lines);
//! * [`plot`]: a metric against one column, a line per value of another;
//! * [`slurm`]: the job array, its submission and what `collect` reports.
//!
//! Who runs the points — worker processes on this machine, or Slurm array
//! tasks — is the binary's business (`kernbench-host sweep`); both run
//! `kernbench-host sweep exec`, which runs them with [`exec::Runner`], so a
//! point gives the same record wherever it runs.

pub mod exec;
pub mod outdir;
pub mod plot;
pub mod slurm;
pub mod spec;
pub mod table;

pub use outdir::{OutDir, Outcome, Plan, PointRecord};
pub use spec::Sweep;
