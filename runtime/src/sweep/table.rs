//! The merged results of a sweep: one tidy table, a row per point and
//! collective size (a point that failed: one row with its error), every
//! axis a column, then every column of the run's report. Written as CSV
//! and as JSON lines (axis values keep their YAML type there). Rows are in
//! point order and each point's rows in report order, so the table does
//! not depend on how many workers ran it or in which order they finished.

use super::outdir::{Outcome, PointRecord};
use super::spec::Sweep;
use serde_json::{Map, Value as Json};

/// The report's columns, after the axes and the point's own.
const REPORT_COLUMNS: [&str; 16] = [
    "collective",
    "size_bytes",
    "count",
    "type",
    "redop",
    "root",
    "ranks",
    "time_aggregation",
    "time_ps",
    "time_us",
    "algbw_gbps",
    "busbw_gbps",
    "bound_us",
    "efficiency",
    "wrong",
    "sim_end_us",
];

/// The compute table's own columns (benches that launch kernels), after
/// the report's, present when some point has compute rows: such a row
/// fills these and the shared `type`, `time_ps`, `time_us`, `efficiency`,
/// `wrong`, and leaves the collective columns empty.
const KERNEL_COLUMNS: [&str; 9] = [
    "kernel",
    "shape",
    "pes",
    "flops",
    "tflops",
    "peak_tflops",
    "checked",
    "max_rel_err",
    "tolerance",
];

/// The merged table: its columns and its rows (objects keyed by them).
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Map<String, Json>>,
}

/// The table of `sweep` from `records` (`records[i]`: point i's record,
/// None when it has none).
pub fn build(sweep: &Sweep, records: &[Option<PointRecord>]) -> Table {
    let mut columns = vec!["point".to_string()];
    columns.extend(sweep.axes.iter().map(|a| a.name.clone()));
    columns.extend(
        ["status", "error", "bench", "algorithm", "world_size"]
            .iter()
            .map(|s| s.to_string()),
    );
    columns.extend(REPORT_COLUMNS.iter().map(|s| s.to_string()));
    let computes = records
        .iter()
        .flatten()
        .any(|r| matches!(&r.outcome, Outcome::Ok { kernels, .. } if !kernels.is_empty()));
    if computes {
        columns.extend(KERNEL_COLUMNS.iter().map(|s| s.to_string()));
    }
    let mut out = Vec::new();
    for (index, rec) in records.iter().enumerate() {
        let point = sweep.point(index);
        let mut base = Map::new();
        base.insert("point".into(), Json::from(index));
        for (axis, v) in &point.values {
            base.insert(
                axis.name.clone(),
                serde_json::to_value(v).unwrap_or(Json::Null),
            );
        }
        let outcome = rec.as_ref().map(|r| &r.outcome);
        base.insert(
            "status".into(),
            Json::from(outcome.map_or("missing", Outcome::status)),
        );
        base.insert(
            "error".into(),
            outcome
                .and_then(Outcome::error)
                .map_or(Json::Null, Json::from),
        );
        base.insert("bench".into(), Json::from(point.bench(sweep)));
        let Some(Outcome::Ok {
            summary,
            rows,
            kernels,
        }) = rec.as_ref().map(|r| &r.outcome)
        else {
            out.push(base);
            continue;
        };
        base.insert(
            "world_size".into(),
            summary.world_size.map_or(Json::Null, Json::from),
        );
        base.insert("sim_end_us".into(), Json::from(summary.sim_end_us));
        let first = out.len();
        for row in rows {
            let mut m = base.clone();
            let algorithm = summary
                .algorithms
                .get(&row.collective)
                .or(summary.algorithm.as_ref());
            m.insert(
                "algorithm".into(),
                algorithm.map_or(Json::Null, |a| Json::from(a.as_str())),
            );
            if let Json::Object(o) = serde_json::to_value(row).expect("a row serialises") {
                m.extend(o);
            }
            out.push(m);
        }
        for k in kernels {
            let mut m = base.clone();
            if let Json::Object(o) = k {
                for (key, v) in o {
                    let key = if key == "name" {
                        "kernel"
                    } else {
                        key.as_str()
                    };
                    m.insert(key.to_string(), v.clone());
                }
            }
            out.push(m);
        }
        if rows.is_empty() && kernels.is_empty() {
            base.insert(
                "algorithm".into(),
                summary.algorithm.as_deref().map_or(Json::Null, Json::from),
            );
            out.push(base);
        }
        if summary.timing_only {
            // Nothing was checked.
            for m in &mut out[first..] {
                m.insert("wrong".into(), Json::Null);
            }
        }
    }
    // Every row has every column, in the table's order.
    let rows = out
        .into_iter()
        .map(|m| {
            columns
                .iter()
                .map(|c| (c.clone(), m.get(c).cloned().unwrap_or(Json::Null)))
                .collect()
        })
        .collect();
    Table { columns, rows }
}

/// A cell as text: empty for null, strings bare, numbers as serde_json
/// writes them (shortest exact form), lists and maps as JSON. The CSV
/// cells, and what plot labels and `--where` pins compare.
pub fn cell_text(v: Option<&Json>) -> String {
    match v {
        None | Some(Json::Null) => String::new(),
        Some(Json::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    }
}

impl Table {
    /// As CSV (a null is an empty cell).
    pub fn to_csv(&self) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        let _ = w.write_record(&self.columns);
        for r in &self.rows {
            let cells: Vec<String> = self.columns.iter().map(|c| cell_text(r.get(c))).collect();
            let _ = w.write_record(&cells);
        }
        String::from_utf8_lossy(&w.into_inner().unwrap_or_default()).into_owned()
    }

    /// As JSON lines.
    pub fn to_jsonl(&self) -> String {
        let mut s = String::new();
        for r in &self.rows {
            s.push_str(&serde_json::to_string(r).expect("a row serialises"));
            s.push('\n');
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::super::outdir::RunSummary;
    use super::*;
    use crate::report::Row;
    use std::path::Path;

    fn row(size: u64, wrong: u64) -> Row {
        Row {
            collective: "all_reduce".into(),
            size_bytes: size,
            count: size / 2,
            dtype: "f16".into(),
            redop: "sum".into(),
            root: -1,
            ranks: 4,
            time_aggregation: Default::default(),
            out_of_place: None,
            in_place: None,
            time_ps: 1_500_000,
            time_us: 1.5,
            algbw_gbps: 0.25,
            busbw_gbps: 0.375,
            bound_us: None,
            efficiency: None,
            wrong,
        }
    }

    #[test]
    fn one_row_per_point_and_size_with_every_axis() {
        let s = Sweep::parse(
            "bench: ccl_allreduce\naxes:\n  system.sips.count: [4, 8]\n  defaults.algorithm: [ring_allreduce]\n",
            Path::new("/tmp/s.yaml"),
        )
        .unwrap();
        let ok = PointRecord {
            index: 0,
            digest: "d".into(),
            outcome: Outcome::Ok {
                summary: RunSummary {
                    algorithm: Some("ring_allreduce".into()),
                    algorithms: Default::default(),
                    world_size: Some(4),
                    sim_end_us: 9.0,
                    timing_only: false,
                },
                rows: vec![row(1024, 0), row(2048, 1)],
                kernels: vec![],
            },
            wall_s: 3.0,
            slurm: None,
        };
        let failed = PointRecord {
            index: 1,
            outcome: Outcome::Error {
                error: "a, \"quoted\" error".into(),
            },
            ..ok.clone()
        };
        let mut timing = ok.clone();
        if let Outcome::Ok { summary, .. } = &mut timing.outcome {
            summary.timing_only = true;
        }
        let table = build(&s, &[Some(ok), Some(failed)]);
        assert_eq!(table.rows.len(), 3);
        let csv = table.to_csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "point,system.sips.count,defaults.algorithm,status,error,bench,algorithm,world_size,\
             collective,size_bytes,count,type,redop,root,ranks,time_aggregation,time_ps,time_us,\
             algbw_gbps,busbw_gbps,bound_us,efficiency,wrong,sim_end_us"
        );
        assert_eq!(
            lines[2],
            "0,4,ring_allreduce,ok,,ccl_allreduce,ring_allreduce,4,all_reduce,2048,1024,f16,sum,-1,4,max,1500000,1.5,0.25,0.375,,,1,9.0"
        );
        assert_eq!(
            lines[3],
            "1,8,ring_allreduce,error,\"a, \"\"quoted\"\" error\",ccl_allreduce,,,,,,,,,,,,,,,,,,"
        );
        // The wall time is not in the table; axis values keep their type
        // in JSON lines.
        assert!(!csv.contains("wall"));
        let jl = table.to_jsonl();
        assert!(
            jl.lines()
                .next()
                .unwrap()
                .contains("\"system.sips.count\":4,"),
            "{jl}"
        );
        // A timing-only run checked nothing: no count of wrong elements.
        let t = build(&s, &[Some(timing)]);
        assert!(t.rows.iter().all(|r| r["wrong"].is_null()));
        assert!(t.rows.iter().all(|r| !r["time_ps"].is_null()));
    }
}
