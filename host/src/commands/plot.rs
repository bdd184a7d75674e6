//! `kernbench-host plot`: busbw and time against size from runs' JSON
//! reports, one line per run, collective and algorithm.

use anyhow::Result;
use std::path::{Path, PathBuf};

pub fn run(reports: &[PathBuf], output: &Path, title: &str) -> Result<()> {
    let series = kernbench::plot::series_of_reports(reports)?;
    kernbench::plot::draw(output, title, &series)?;
    eprintln!(
        "# {} line(s) from {} report(s) written to {}",
        series.len(),
        reports.len(),
        output.display()
    );
    Ok(())
}
