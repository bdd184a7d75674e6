//! The compute benches' report (`report.record-kernel`): per launch, the
//! simulated time, the achieved FLOP/s against the peak of the matrix
//! units it ran on (`pes` × `pe.gemm` throughput of its dtype), the
//! efficiency, and how its result compared with the bench's reference
//! (largest relative error, the tolerance, `#wrong`). Table, JSON, CSV.

use crate::hw::dtype::Dtype;
use crate::units::{ps_to_us, Ps};
use serde::Serialize;
use std::fmt::Write;

/// One kernel launch a bench reported, with the host's peak.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct KernelRow {
    pub name: String,
    pub shape: String,
    #[serde(rename = "type")]
    pub dtype: &'static str,
    #[serde(skip)]
    dtype_of: Dtype,
    pub pes: u32,
    pub flops: u64,
    pub time_ps: Ps,
    pub time_us: f64,
    /// Achieved operations per second, in units of 10^12.
    pub tflops: f64,
    /// The `pes` matrix units' peak for `dtype`, 10^12 per second.
    pub peak_tflops: f64,
    /// achieved / peak.
    pub efficiency: f64,
    pub checked: u64,
    pub wrong: u64,
    pub max_rel_err: f64,
    pub tolerance: f64,
}

impl KernelRow {
    /// A row from what the bench measured and the peak of one matrix unit
    /// for its dtype (operations per second).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        (name, shape, dtype): (String, String, Dtype),
        pes: u32,
        flops: u64,
        time_ps: Ps,
        (checked, wrong, max_rel_err, tolerance): (u64, u64, f64, f64),
        unit_peak_per_s: f64,
    ) -> Self {
        let secs = time_ps as f64 * 1e-12;
        let tflops = if time_ps == 0 {
            0.0
        } else {
            flops as f64 / secs / 1e12
        };
        let peak_tflops = unit_peak_per_s * f64::from(pes) / 1e12;
        KernelRow {
            name,
            shape,
            dtype: dtype.name(),
            dtype_of: dtype,
            pes,
            flops,
            time_ps,
            time_us: ps_to_us(time_ps),
            tflops,
            peak_tflops,
            efficiency: if peak_tflops > 0.0 {
                tflops / peak_tflops
            } else {
                0.0
            },
            checked,
            wrong,
            max_rel_err,
            tolerance,
        }
    }
}

/// The compute rows of a run, in first-reported order; a row of the same
/// kernel, shape and dtype as an earlier one (the ranks of one launch each
/// report theirs) merges into it: the slowest time, the PEs, operations
/// and checks summed, the largest error. Indexed, so a bench reporting
/// many rows costs O(1) per row.
#[derive(Debug, Default)]
pub struct KernelTable {
    rows: Vec<KernelRow>,
    index: std::collections::HashMap<(String, String, Dtype), usize>,
}

impl KernelTable {
    /// Add a row, merged with an earlier one of the same launch. Sums that
    /// a u32 / u64 cannot hold (a bench reporting absurd figures) are
    /// refused, naming the row and the figure, and leave the table as it
    /// was.
    pub fn add(&mut self, row: KernelRow, unit_peak_per_s: f64) -> Result<(), String> {
        let key = (row.name.clone(), row.shape.clone(), row.dtype_of);
        let Some(&i) = self.index.get(&key) else {
            self.index.insert(key, self.rows.len());
            self.rows.push(row);
            return Ok(());
        };
        let r = &mut self.rows[i];
        let over = |what: &str| {
            format!(
                "the compute rows of {} {} {}: their summed {what} do not fit a 64-bit count \
                 (the bench reports absurd figures)",
                row.name, row.shape, row.dtype
            )
        };
        let pes = r.pes.checked_add(row.pes).ok_or_else(|| over("PEs"))?;
        let flops = r
            .flops
            .checked_add(row.flops)
            .ok_or_else(|| over("operations"))?;
        let checked = r
            .checked
            .checked_add(row.checked)
            .ok_or_else(|| over("checked elements"))?;
        let wrong = r
            .wrong
            .checked_add(row.wrong)
            .ok_or_else(|| over("wrong elements"))?;
        *r = KernelRow::new(
            (
                std::mem::take(&mut r.name),
                std::mem::take(&mut r.shape),
                r.dtype_of,
            ),
            pes,
            flops,
            r.time_ps.max(row.time_ps),
            (
                checked,
                wrong,
                r.max_rel_err.max(row.max_rel_err),
                r.tolerance.max(row.tolerance),
            ),
            unit_peak_per_s,
        );
        Ok(())
    }

    pub fn rows(&self) -> &[KernelRow] {
        &self.rows
    }
}

/// The compute table (a row without operations, e.g. a collective step,
/// has no achieved or peak figure).
pub fn to_table(rows: &[KernelRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# compute: peak = PEs x pe.gemm throughput of the dtype; eff = achieved / peak; \
         err = largest relative error against the bench's reference"
    );
    let _ = writeln!(
        s,
        "# {:<12} {:<24} {:>5} {:>4} {:>11} {:>9} {:>9} {:>6} {:>9} {:>8} {:>7}",
        "kernel",
        "shape",
        "type",
        "PEs",
        "time",
        "achieved",
        "peak",
        "eff",
        "max err",
        "tol",
        "#wrong"
    );
    let _ = writeln!(
        s,
        "# {:<12} {:<24} {:>5} {:>4} {:>11} {:>9} {:>9} {:>6} {:>9} {:>8} {:>7}",
        "", "", "", "", "(us)", "(TFLOP/s)", "(TFLOP/s)", "(%)", "(rel)", "(rel)", ""
    );
    for r in rows {
        let flops = |v: String| if r.flops == 0 { "-".to_string() } else { v };
        let _ = writeln!(
            s,
            "  {:<12} {:<24} {:>5} {:>4} {:>11.3} {:>9} {:>9} {:>6} {:>9.2e} {:>8.1e} {:>7}",
            r.name,
            r.shape,
            r.dtype,
            r.pes,
            r.time_us,
            flops(format!("{:.3}", r.tflops)),
            flops(format!("{:.3}", r.peak_tflops)),
            flops(format!("{:.1}", r.efficiency * 100.0)),
            r.max_rel_err,
            r.tolerance,
            r.wrong
        );
    }
    let wrong = crate::report::total_wrong(rows.iter().map(|r| r.wrong));
    let checked: u64 = rows.iter().map(|r| r.checked).sum();
    let _ = writeln!(
        s,
        "# Out of tolerance values : {wrong} of {checked} checked {}",
        if wrong == 0 { "OK" } else { "FAILED" }
    );
    s
}

/// The compute rows as CSV.
pub fn to_csv(rows: &[KernelRow]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        // Writing to a Vec cannot fail.
        let _ = w.serialize(r);
    }
    String::from_utf8_lossy(&w.into_inner().unwrap_or_default()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn achieved_and_peak_come_from_flops_time_and_the_units() {
        // 2·64³ = 524288 FLOP in 1 us on 2 units of 65.536 TFLOP/s.
        let r = KernelRow::new(
            ("gemm".into(), "m=64".into(), Dtype::F16),
            2,
            524_288,
            1_000_000,
            (10, 0, 0.0, 1e-3),
            65.536e12,
        );
        assert!((r.tflops - 0.524288).abs() < 1e-12);
        assert!((r.peak_tflops - 131.072).abs() < 1e-9);
        assert!((r.efficiency - 0.524288 / 131.072).abs() < 1e-12);
        let t = to_table(std::slice::from_ref(&r));
        assert!(
            t.contains("gemm") && t.contains("0 of 10 checked OK"),
            "{t}"
        );
        let csv = to_csv(&[r]);
        assert!(
            csv.starts_with("name,shape,type,pes,flops,time_ps"),
            "{csv}"
        );
    }

    #[test]
    fn the_ranks_rows_of_one_launch_merge() {
        let row = |time_ps, wrong, err| {
            KernelRow::new(
                ("qkv".into(), "s=8".into(), Dtype::Bf16),
                4,
                1000,
                time_ps,
                (10, wrong, err, 1e-2),
                1e12,
            )
        };
        let mut table = KernelTable::default();
        table.add(row(5_000, 0, 1e-3), 1e12).unwrap();
        table.add(row(7_000, 2, 1e-4), 1e12).unwrap();
        let rows = table.rows();
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!(
            (r.pes, r.flops, r.time_ps, r.checked, r.wrong),
            (8, 2000, 7_000, 20, 2)
        );
        assert_eq!((r.max_rel_err, r.dtype), (1e-3, "bf16"));
        assert!((r.peak_tflops - 8.0).abs() < 1e-12);
    }

    #[test]
    fn a_merge_that_overflows_is_refused_not_wrapped() {
        let row = |pes, wrong| {
            KernelRow::new(
                ("k".into(), "s".into(), Dtype::F16),
                pes,
                1,
                1,
                (1, wrong, 0.0, 0.0),
                1e12,
            )
        };
        let mut table = KernelTable::default();
        table.add(row(u32::MAX, 1 << 63), 1e12).unwrap();
        let e = table.add(row(1, 0), 1e12).unwrap_err();
        assert!(e.contains("summed PEs do not fit"), "{e}");
        let e = table.add(row(0, 1 << 63), 1e12).unwrap_err();
        assert!(e.contains("summed wrong elements"), "{e}");
        // Left as it was.
        assert_eq!(
            (table.rows()[0].pes, table.rows()[0].wrong),
            (u32::MAX, 1 << 63)
        );
    }
}
