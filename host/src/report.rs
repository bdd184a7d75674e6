//! Results as nccl-tests prints them (doc/PERFORMANCE.md): per size, the
//! slowest rank's time, algbw = S/t, busbw = algbw × the collective's
//! factor, and `#wrong` summed over ranks; plus a lower bound of the
//! collective on the modelled machine ([`crate::bounds`]) and the
//! efficiency bound/time. Also JSON and CSV.

use crate::ccl::collective::Collective;
use crate::hw::dtype::Dtype;
use crate::runtime::session::{AlphaBeta, ReportRecord};
use crate::runtime::RunResult;
use crate::units::{ps_to_us, Ps};
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write;

/// One line of the report (all ranks merged).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct Row {
    pub collective: String,
    pub size_bytes: u64,
    pub count: u64,
    #[serde(rename = "type")]
    pub dtype: String,
    pub redop: String,
    pub ranks: u32,
    pub time_ps: Ps,
    pub time_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    /// Lower bound of the collective on the modelled machine (µs), when
    /// one is known.
    pub bound_us: Option<f64>,
    /// bound / time.
    pub efficiency: Option<f64>,
    pub wrong: u64,
}

/// nccl-tests bus-bandwidth factor of a collective with `n` ranks
/// ([`Collective::busbw_factor`] of the collective the row's name
/// measured, [`Collective::from_record_name`]; 1 for `sendrecv` and
/// unknown names).
pub fn busbw_factor(collective: &str, n: u32) -> f64 {
    Collective::from_record_name(collective).map_or(1.0, |c| c.busbw_factor(n))
}

/// Whether the table knows `collective` (its busbw factor and bound):
/// a collective by the name of any `torch.distributed` function that runs
/// it, or `sendrecv`.
pub fn knows(collective: &str) -> bool {
    collective == "sendrecv" || Collective::from_record_name(collective).is_some()
}

/// Lower bound (ps) of `collective` moving `bytes` per rank, when known
/// (see [`crate::bounds`]).
pub fn bound_ps(collective: &str, bytes: u64, ab: &AlphaBeta) -> Option<Ps> {
    ab.bound?.collective_ps(collective, bytes, ab.world_size)
}

/// The total of `#wrong` counts. A total a u64 cannot hold is `u64::MAX`,
/// shown by [`wrong_shown`] as "or more": a failure, never a wrapped 0.
pub fn total_wrong(counts: impl IntoIterator<Item = u64>) -> u64 {
    counts.into_iter().fold(0, u64::saturating_add)
}

/// A `#wrong` count (or total) as printed: a saturated one says so.
pub fn wrong_shown(n: u64) -> String {
    if n == u64::MAX {
        format!("{n} or more")
    } else {
        n.to_string()
    }
}

/// Merge the per-rank records of each (collective, size): slowest time,
/// summed `#wrong`. Order: first appearance.
pub fn aggregate(records: &[ReportRecord], ab: Option<&AlphaBeta>) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    // (collective, size, redop, dtype) -> index in `rows`: linear in the
    // number of records, whatever their count.
    let mut index: HashMap<(&str, u64, &str, &str), usize> = HashMap::new();
    for r in records {
        let key = (
            r.collective.as_str(),
            r.size_bytes,
            r.redop.as_str(),
            r.dtype.name(),
        );
        match index.get(&key) {
            Some(&i) => {
                let row = &mut rows[i];
                row.time_ps = row.time_ps.max(r.time_ps);
                row.wrong = row.wrong.saturating_add(r.wrong);
                row.ranks += 1;
            }
            None => {
                index.insert(key, rows.len());
                rows.push(Row {
                    collective: r.collective.clone(),
                    size_bytes: r.size_bytes,
                    count: r.count,
                    dtype: dtype_name(r.dtype).to_string(),
                    redop: r.redop.clone(),
                    ranks: 1,
                    time_ps: r.time_ps,
                    time_us: 0.0,
                    algbw_gbps: 0.0,
                    busbw_gbps: 0.0,
                    bound_us: None,
                    efficiency: None,
                    wrong: r.wrong,
                })
            }
        }
    }
    for row in &mut rows {
        let n = ab.map(|a| a.world_size).unwrap_or(row.ranks);
        row.time_us = ps_to_us(row.time_ps);
        row.algbw_gbps = if row.time_ps == 0 {
            0.0
        } else {
            row.size_bytes as f64 / (row.time_ps as f64 / 1000.0)
        };
        row.busbw_gbps = row.algbw_gbps * busbw_factor(&row.collective, n);
        if let Some(b) = ab.and_then(|a| bound_ps(&row.collective, row.size_bytes, a)) {
            row.bound_us = Some(ps_to_us(b));
            row.efficiency = (row.time_ps > 0).then(|| b as f64 / row.time_ps as f64);
        }
    }
    rows
}

fn dtype_name(d: Dtype) -> &'static str {
    d.name()
}

/// The machine-readable form of a run.
#[derive(Debug, Serialize)]
pub struct JsonReport<'a> {
    pub bench: &'a str,
    pub algorithm: Option<&'a str>,
    /// The algorithm that served each collective.
    pub algorithms: &'a std::collections::BTreeMap<String, String>,
    pub world_size: Option<u32>,
    pub alpha_us: Option<f64>,
    pub bandwidth_gbps: Option<f64>,
    pub sim_end_us: f64,
    /// `--timing-only`: no bytes were kept, the rows have no `wrong` and
    /// `wrong_total` is null.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub timing_only: bool,
    pub wrong_total: Option<u64>,
    pub rows: &'a [Row],
    /// The compute table (benches that launch kernels).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub kernels: &'a [crate::kernel_report::KernelRow],
    /// The second pass (`--verify-data`), when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify: Option<JsonVerify>,
}

/// The second pass's outcome in the JSON report (details: the text report
/// on stderr).
#[derive(Debug, Serialize)]
pub struct JsonVerify {
    pub ok: bool,
    pub ops: usize,
    pub bytes: u64,
    pub mismatches: usize,
    pub races: usize,
}

pub fn to_json(res: &RunResult, rows: &[Row]) -> String {
    let ab = res.alpha_beta.as_ref();
    let j = JsonReport {
        bench: &res.bench,
        algorithm: res.algorithm.as_deref(),
        algorithms: &res.algorithms,
        world_size: ab.map(|a| a.world_size),
        alpha_us: ab.map(|a| ps_to_us(a.alpha_ps)),
        bandwidth_gbps: ab.map(|a| a.bandwidth.giga_per_s()),
        sim_end_us: ps_to_us(res.end_time_ps),
        timing_only: res.timing_only,
        wrong_total: (!res.timing_only).then(|| {
            total_wrong(
                rows.iter()
                    .map(|r| r.wrong)
                    .chain(res.kernel_rows.iter().map(|r| r.wrong)),
            )
        }),
        rows,
        kernels: &res.kernel_rows,
        verify: res.verification.as_ref().map(|v| JsonVerify {
            ok: !v.failed(),
            ops: v.ops,
            bytes: v.bytes,
            mismatches: v.mismatches.len(),
            races: v.races.len(),
        }),
    };
    let mut v = serde_json::to_value(&j).expect("report serialises");
    if res.timing_only {
        // Nothing was checked: no row claims a count of wrong elements.
        for row in v["rows"].as_array_mut().into_iter().flatten() {
            if let Some(o) = row.as_object_mut() {
                o.remove("wrong");
            }
        }
    }
    serde_json::to_string_pretty(&v).expect("report serialises")
}

/// The rows as CSV; without the `wrong` column when nothing was checked
/// (`checked` false: `--timing-only`).
pub fn to_csv(rows: &[Row], checked: bool) -> String {
    // The csv crate quotes fields holding commas, quotes or newlines (a
    // collective or redop name comes from the guest).
    let mut w = csv::Writer::from_writer(Vec::new());
    let header = [
        "collective",
        "size_bytes",
        "count",
        "type",
        "redop",
        "time_us",
        "algbw_gbps",
        "busbw_gbps",
        "bound_us",
        "efficiency",
        "wrong",
    ];
    let columns = header.len() - usize::from(!checked);
    let mut records = vec![header[..columns].iter().map(|h| h.to_string()).collect()];
    for r in rows {
        let mut rec = vec![
            r.collective.clone(),
            r.size_bytes.to_string(),
            r.count.to_string(),
            r.dtype.clone(),
            r.redop.clone(),
            format!("{:.4}", r.time_us),
            format!("{:.4}", r.algbw_gbps),
            format!("{:.4}", r.busbw_gbps),
            r.bound_us.map(|v| format!("{v:.4}")).unwrap_or_default(),
            r.efficiency.map(|v| format!("{v:.4}")).unwrap_or_default(),
            r.wrong.to_string(),
        ];
        rec.truncate(columns);
        records.push(rec);
    }
    for rec in records {
        // Writing to a Vec cannot fail.
        let _ = w.write_record(&rec);
    }
    String::from_utf8_lossy(&w.into_inner().unwrap_or_default()).into_owned()
}

/// The nccl-tests-style table.
pub fn to_table(res: &RunResult, rows: &[Row], topo_line: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# KernBench {} | bench {} | algorithm {} | {topo_line}",
        env!("CARGO_PKG_VERSION"),
        res.bench,
        res.algorithm.as_deref().unwrap_or("-")
    );
    // The algorithm of each collective, when one is not the installed one.
    if res
        .algorithms
        .values()
        .any(|a| Some(a.as_str()) != res.algorithm.as_deref())
    {
        let each: Vec<String> = res
            .algorithms
            .iter()
            .map(|(c, a)| format!("{c}: {a}"))
            .collect();
        let _ = writeln!(s, "# algorithms: {}", each.join(", "));
    }
    if let Some(ab) = &res.alpha_beta {
        let _ = writeln!(
            s,
            "# world_size {} | alpha {:.3} us (DMA setup + path latency, rank -> rank+1) | B {:.1} GB/s (bottleneck)",
            ab.world_size,
            ps_to_us(ab.alpha_ps),
            ab.bandwidth.giga_per_s()
        );
        let bounded = rows.iter().any(|r| r.bound_us.is_some());
        if let Some(b) = ab.bound.as_ref().filter(|_| bounded) {
            let _ = writeln!(
                s,
                "# bound: lower bound max(setup + hops*lambda, setup + lambda + in/B_in, setup + lambda + out/B_out) \
                 with the bytes that must enter and leave a SIP (all-reduce: n and n; docs/timing-model.md); \
                 D = {} SIP hops, lambda = {:.3} us per inter-SIP link, B_in = {:.1} GB/s, B_out = {:.1} GB/s; \
                 eff = bound / time",
                b.diameter,
                ps_to_us(b.link_latency),
                b.ingress.giga_per_s(),
                b.egress.giga_per_s()
            );
        }
    }
    if res.timing_only {
        let _ = writeln!(
            s,
            "# timing only: no bytes were stored or moved, so the results were not checked \
             (same simulated times as a run with data)"
        );
    }
    let _ = writeln!(s, "#");
    if rows.is_empty() && !res.kernel_rows.is_empty() {
        s.push_str(&crate::kernel_report::to_table(&res.kernel_rows));
        return s;
    }
    // Without data there is nothing to count as wrong: no column.
    let wrong_col = |w: &str| {
        if res.timing_only {
            String::new()
        } else {
            format!(" {w:>7}")
        }
    };
    // The collective of each row (a bench may run several), as wide as
    // the longest name.
    let coll = rows
        .iter()
        .map(|r| r.collective.len())
        .chain(["collective".len()])
        .max()
        .unwrap_or(0);
    let _ = writeln!(
        s,
        "# {:<coll$} {:>10} {:>12} {:>6} {:>6} {:>11} {:>8} {:>8} {:>11} {:>7}{}",
        "collective",
        "size",
        "count",
        "type",
        "redop",
        "time",
        "algbw",
        "busbw",
        "bound",
        "eff",
        wrong_col("#wrong")
    );
    let _ = writeln!(
        s,
        "# {:<coll$} {:>10} {:>12} {:>6} {:>6} {:>11} {:>8} {:>8} {:>11} {:>7}{}",
        "",
        "(B)",
        "(elements)",
        "",
        "",
        "(us)",
        "(GB/s)",
        "(GB/s)",
        "(us)",
        "(%)",
        wrong_col("")
    );
    for r in rows {
        let _ = writeln!(
            s,
            "  {:<coll$} {:>10} {:>12} {:>6} {:>6} {:>11.3} {:>8.2} {:>8.2} {:>11} {:>7}{}",
            r.collective,
            r.size_bytes,
            r.count,
            r.dtype,
            r.redop,
            r.time_us,
            r.algbw_gbps,
            r.busbw_gbps,
            r.bound_us
                .map(|v| format!("{v:.3}"))
                .unwrap_or_else(|| "-".into()),
            r.efficiency
                .map(|v| format!("{:.1}", v * 100.0))
                .unwrap_or_else(|| "-".into()),
            wrong_col(&wrong_shown(r.wrong))
        );
    }
    let wrong = total_wrong(rows.iter().map(|r| r.wrong));
    let avg_bus = if rows.is_empty() {
        0.0
    } else {
        rows.iter().map(|r| r.busbw_gbps).sum::<f64>() / rows.len() as f64
    };
    if res.timing_only {
        let _ = writeln!(s, "# Out of bounds values : not checked (timing only)");
    } else {
        let _ = writeln!(
            s,
            "# Out of bounds values : {} {}",
            wrong_shown(wrong),
            if wrong == 0 { "OK" } else { "FAILED" }
        );
    }
    let _ = writeln!(s, "# Avg bus bandwidth    : {avg_bus:.3} GB/s");
    if !res.kernel_rows.is_empty() {
        let _ = writeln!(s, "#");
        s.push_str(&crate::kernel_report::to_table(&res.kernel_rows));
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_table_knows_the_collectives_their_torch_variants_and_sendrecv() {
        for c in [
            "all_reduce",
            "all_gather",
            "all_to_all",
            "sendrecv",
            "all_gather_into_tensor",
            "reduce_scatter_tensor",
            "all_to_all_single",
        ] {
            assert!(super::knows(c), "{c}");
        }
        for c in ["allreduce", "gather", ""] {
            assert!(!super::knows(c), "{c}");
        }
    }

    use super::*;
    use crate::units::Rate;

    #[test]
    fn bound_comes_from_the_machine_figures() {
        let ab = AlphaBeta {
            world_size: 4,
            alpha_ps: 1_000,
            bandwidth: Rate::from_giga_per_s(100.0),
            bound: Some(crate::bounds::CollectiveBound {
                setup: 20,
                link_latency: 500,
                diameter: 2,
                ingress: Rate::from_giga_per_s(200.0),
                egress: Rate::from_giga_per_s(200.0),
            }),
        };
        // 1e6 bytes through 200 GB/s = 5_000_000 ps.
        assert_eq!(
            bound_ps("all_reduce", 1_000_000, &ab),
            Some(20 + 500 + 5_000_000)
        );
        assert_eq!(bound_ps("all_reduce", 2, &ab), Some(20 + 2 * 500));
        assert_eq!(busbw_factor("all_reduce", 4), 1.5);
        // A row named for the tensor variant is the same collective.
        assert_eq!(busbw_factor("all_gather_into_tensor", 4), 0.75);
        assert_eq!(
            bound_ps("reduce_scatter_tensor", 1_000_000, &ab),
            bound_ps("reduce_scatter", 1_000_000, &ab)
        );
        assert!(bound_ps("all_to_all_single", 1_000_000, &ab).is_some());
        assert_eq!(bound_ps("sendrecv", 8, &ab), Some(20 + 500 + 40));
        assert_eq!(bound_ps("gossip", 8, &ab), None);
    }

    #[test]
    fn a_wrong_total_past_u64_is_a_failure_not_zero() {
        // Two rows of 2^63 wrong elements: 2^64 wraps to 0 in u64.
        assert_eq!(total_wrong([1 << 63, 1 << 63]), u64::MAX);
        assert_eq!(total_wrong([2, 3]), 5);
        assert_eq!(wrong_shown(u64::MAX), "18446744073709551615 or more");
        assert_eq!(wrong_shown(7), "7");
    }

    #[test]
    fn ranks_merge_to_slowest_time_and_summed_wrong() {
        let rec = |t, w| ReportRecord {
            collective: "all_reduce".into(),
            size_bytes: 1000,
            count: 500,
            dtype: Dtype::F16,
            redop: "sum".into(),
            time_ps: t,
            wrong: w,
        };
        let rows = aggregate(&[rec(10_000, 1), rec(20_000, 2)], None);
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (rows[0].time_ps, rows[0].wrong, rows[0].ranks),
            (20_000, 3, 2)
        );
        assert!((rows[0].algbw_gbps - 50.0).abs() < 1e-9); // 1000 B / 20 ns
        assert!((rows[0].busbw_gbps - 50.0).abs() < 1e-9); // 2 ranks: factor 1
    }

    #[test]
    fn csv_quotes_fields_with_commas_quotes_and_newlines() {
        let rec = ReportRecord {
            collective: "all,reduce \"x\"\nnext".into(),
            size_bytes: 8,
            count: 4,
            dtype: Dtype::F16,
            redop: "sum".into(),
            time_ps: 1000,
            wrong: 0,
        };
        let csv = to_csv(&aggregate(&[rec], None), true);
        let mut r = csv::Reader::from_reader(csv.as_bytes());
        let row = r.records().next().unwrap().unwrap();
        assert_eq!(&row[0], "all,reduce \"x\"\nnext");
        assert_eq!(&row[1], "8");
        assert_eq!(row.len(), 11);
    }

    #[test]
    fn many_distinct_rows_aggregate_in_linear_time() {
        let recs: Vec<ReportRecord> = (0..200_000u64)
            .map(|i| ReportRecord {
                collective: "all_reduce".into(),
                size_bytes: i,
                count: i,
                dtype: Dtype::F16,
                redop: "sum".into(),
                time_ps: 1,
                wrong: 0,
            })
            .collect();
        // Quadratic merging would take minutes here; linear takes ms.
        assert_eq!(aggregate(&recs, None).len(), 200_000);
    }
}
