//! `--timing-only` (issue 14): a run that keeps no bytes takes the same
//! simulated time, row by row, as the same run with data, for every
//! collective and algorithm; its host memory does not grow with the sizes
//! it moves; the report says it checked nothing.

use crate::common;
use common::*;
use kernbench::runtime::{run_bench, RunResult};

fn run_mode(bench: &str, algorithm: &str, n: u32, args: &[&str], timing_only: bool) -> RunResult {
    let mut req = request(
        bench,
        machine(n, "ring_1d", None, (2, 2)),
        ccl(),
        Some(algorithm),
        args,
    );
    req.timing_only = timing_only;
    req.memory_digest = !timing_only;
    run_bench(&loader(), req).unwrap_or_else(|e| panic!("{bench} {algorithm}: {e}"))
}

const EVERY: [(&str, &str); 15] = [
    ("ccl_allreduce", "ring_allreduce"),
    ("ccl_allreduce", "ring_rsag_allreduce"),
    ("ccl_allreduce", "rabenseifner_allreduce"),
    ("ccl_allreduce", "double_tree_allreduce"),
    ("ccl_allgather", "ring_allgather"),
    ("ccl_reducescatter", "ring_reducescatter"),
    ("ccl_broadcast", "ring_broadcast"),
    ("ccl_broadcast", "binomial_broadcast"),
    ("ccl_reduce", "ring_reduce"),
    ("ccl_reduce", "binomial_reduce"),
    ("ccl_alltoall", "ring_alltoall"),
    ("ccl_alltoall", "direct_alltoall"),
    ("ccl_sendrecv", "ring_allreduce"),
    ("ccl_allreduce", "tree_allreduce"),
    ("ccl_allreduce", "mesh_allreduce"),
];

#[test]
fn every_collective_takes_the_same_time_with_and_without_data() {
    for n in [4, 5] {
        for (bench, algorithm) in EVERY {
            let args = ["-b", "8", "-e", "1M", "-f", "8", "-n", "2", "-w", "1"];
            let data = run_mode(bench, algorithm, n, &args, false);
            let timing = run_mode(bench, algorithm, n, &args, true);
            let times = |r: &RunResult| -> Vec<(String, u64, u64)> {
                r.rows
                    .iter()
                    .map(|x| (x.collective.clone(), x.size_bytes, x.time_ps))
                    .collect()
            };
            assert!(!data.rows.is_empty());
            assert!(
                data.rows.iter().all(|r| r.wrong == 0),
                "{bench} {algorithm}"
            );
            assert_eq!(
                times(&data),
                times(&timing),
                "{bench} {algorithm} on {n} SIPs"
            );
            assert_eq!(data.end_time_ps, timing.end_time_ps, "{bench} {algorithm}");
            assert_eq!(
                (data.stats.dma_commands, data.stats.math_commands),
                (timing.stats.dma_commands, timing.stats.math_commands),
                "{bench} {algorithm}: the same commands"
            );
            assert!(timing.timing_only && !data.timing_only);
            assert!(
                timing.memory_peak < data.memory_peak,
                "{bench} {algorithm}: {} bytes without data, {} with",
                timing.memory_peak,
                data.memory_peak
            );
            assert!(timing.memory_digest.is_none());
        }
    }
}

/// 1 GiB per rank, all-reduced, in less host memory than one rank's
/// tensor would take.
#[test]
fn a_gibibyte_per_rank_fits_in_a_few_mebibytes() {
    let res = run_mode(
        "ccl_allreduce",
        "ring_rsag_allreduce",
        4,
        &["-b", "1G", "-e", "1G"],
        true,
    );
    assert_eq!(res.rows.len(), 4);
    assert!(
        res.rows[0].time_ps > 10_000_000_000,
        "{} ps",
        res.rows[0].time_ps
    );
    assert!(
        res.memory_peak < 256 << 20,
        "peak budgeted host memory {} bytes",
        res.memory_peak
    );
}

#[test]
fn the_report_says_nothing_was_checked() {
    let out = ok(kb().args([
        "run",
        "ccl_allreduce",
        "--timing-only",
        "--",
        "-b",
        "8",
        "-e",
        "1K",
    ]));
    assert!(
        out.contains("# timing only: no bytes were stored or moved"),
        "{out}"
    );
    // nccl-tests' layout keeps the column; nothing in it was checked.
    let rows: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(!rows.is_empty());
    for row in rows {
        let f: Vec<&str> = row.split_whitespace().collect();
        assert_eq!((f[8], f[12]), ("N/A", "N/A"), "{out}");
    }
    assert!(
        out.contains("Out of bounds values : not checked (timing only)"),
        "{out}"
    );
    let small = |bench: &str, format: &str| {
        let args = [
            "--timing-only",
            "--format",
            format,
            "--",
            "-b",
            "8",
            "-e",
            "64",
        ];
        ok(kb().args(["run", bench]).args(args))
    };
    let v: serde_json::Value = serde_json::from_str(&small("ccl_allgather", "json")).unwrap();
    assert_eq!(v["timing_only"], true);
    assert!(v["wrong_total"].is_null());
    let rows = v["rows"].as_array().unwrap();
    assert!(!rows.is_empty() && rows.iter().all(|r| r.get("wrong").is_none()));
    assert!(rows.iter().all(|r| r["out_of_place"]["wrong"].is_null()));
    let csv = small("ccl_broadcast", "csv");
    assert!(!csv.lines().next().unwrap().contains("wrong"), "{csv}");
    let e = fails(kb().args(["run", "ccl_allreduce", "--timing-only", "--verify-data"]));
    assert!(e.contains("a --timing-only run moves none"), "{e}");
}
