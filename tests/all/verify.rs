//! `--verify-data` (seed ADR-0052, DESIGN §3): the second pass replays the
//! op log and compares every byte, and names the ops of every race. The
//! built-in algorithms are verified by `tests/all/algorithms.rs` (each of its
//! runs twice, the second with the second pass); here the built-in
//! benches, the three race probes and the CLI.

use crate::common;
use common::*;
use kernbench::runtime::RunResult;
use kernbench::verify::{RaceKind, Verification};

fn verification(res: &RunResult) -> &Verification {
    res.verification.as_ref().expect("verified")
}

/// A clean second pass: no mismatch, no race, something compared.
fn assert_clean(what: &str, res: &RunResult) {
    let v = verification(res);
    assert!(
        v.mismatches.is_empty() && v.races.is_empty(),
        "{what}:\n{}",
        v.report()
    );
    assert!(v.ops > 0 && v.bytes > 0, "{what}: {}", v.report());
    assert!(v.report().starts_with("verify: OK ("), "{}", v.report());
}

#[test]
fn every_built_in_bench_passes_the_second_pass() {
    for (bench, sips, args) in [
        (
            "ccl_allreduce",
            4,
            &["-b", "8", "-e", "64K", "-f", "32"][..],
        ),
        ("ccl_hello", 3, &[][..]),
        (
            "gemm_single_pe",
            1,
            &["--sizes", "32,64", "--dtype", "f16,f32"][..],
        ),
        ("gpt3_qkv", 2, &["--seq", "16", "--hidden", "64"][..]),
        (
            "gpt3_qkv",
            4,
            &["--seq", "32", "--hidden", "64", "--pes", "2"][..],
        ),
        ("va_offset_verify", 1, &["--cubes", "2", "--pes", "2"][..]),
    ] {
        let res = run_verified(bench, topo(sips), ccl(), None, args)
            .unwrap_or_else(|e| panic!("{bench}: {e}"));
        assert_clean(&format!("{bench} on {sips} SIPs {args:?}"), &res);
        // The second pass changes nothing the first pass reports.
        let plain = run(bench, topo(sips), ccl(), None, args).unwrap();
        assert_eq!(plain.rows, res.rows, "{bench}");
        assert_eq!(plain.end_time_ps, res.end_time_ps, "{bench}");
        assert_eq!(plain.memory_digest, res.memory_digest, "{bench}");
    }
}

/// The bytes moved on their own thread (the default on a machine of more
/// than one core) are the bytes the engine thread moves itself: the same
/// rows, times, kernel rows and memory digest, bench by bench.
#[test]
fn bytes_moved_on_a_thread_are_the_bytes_moved_inline() {
    for (bench, sips, args) in [
        (
            "ccl_allreduce",
            5,
            &["-b", "8", "-e", "256K", "-f", "8"][..],
        ),
        ("gemm_single_pe", 1, &["--sizes", "32,64"][..]),
        ("gpt3_qkv", 2, &["--seq", "16", "--hidden", "64"][..]),
    ] {
        let go = |data_thread: bool| {
            let req = kernbench::runtime::RunRequest {
                data_thread,
                ..request(bench, topo(sips), ccl(), None, args)
            };
            kernbench::runtime::run_bench(&loader(), req)
                .unwrap_or_else(|e| panic!("{bench}, data thread {data_thread}: {e}"))
        };
        let (inline, threaded) = (go(false), go(true));
        assert!(inline.memory_digest.is_some(), "{bench}");
        assert_eq!(inline.memory_digest, threaded.memory_digest, "{bench}");
        assert_eq!(inline.rows, threaded.rows, "{bench}");
        assert_eq!(inline.kernel_rows, threaded.kernel_rows, "{bench}");
        assert_eq!(inline.end_time_ps, threaded.end_time_ps, "{bench}");
        assert!(inline.rows.iter().all(|r| r.wrong == 0), "{bench}");
    }
}

/// The three probes of `race_probe`: a reordered but correct ring passes;
/// a write–write race and a send from a released slot are caught with
/// their ops named.
#[test]
fn races_are_caught_with_their_ops_named_and_a_reordered_ring_passes() {
    let probe = |mode: u32| {
        let c = probe_ccl(
            "race_probe",
            mode,
            ", topology: ring_1d, buffer_kind: tcm, n_slots: 2, slot_size: 4096",
        );
        run_verified(
            "ccl_allreduce",
            topo(4),
            c,
            Some("probe"),
            &["-b", "256", "-e", "256"],
        )
        .unwrap()
    };
    let fine = probe(0);
    assert!(fine.rows.iter().all(|r| r.wrong == 0));
    assert_clean("reordered ring", &fine);

    // Write–write: each PE's checkpoint store and its final store.
    let ww = probe(1);
    assert!(
        ww.rows.iter().all(|r| r.wrong == 0),
        "the first pass looks right"
    );
    let v = verification(&ww);
    let log = ww.oplog.as_ref().map(|l| l.records().len());
    assert!(log.is_none(), "the log is not kept unless asked for");
    let ww_races: Vec<_> = v
        .races
        .iter()
        .filter(|r| r.kind == RaceKind::WriteWrite)
        .collect();
    assert_eq!(ww_races.len(), 4, "one per PE:\n{}", v.report());
    let report = v.report();
    assert_contains_all(
        &report,
        &[
            "write-write race on sip0.cube0.hbm",
            "dma_write by sip0.cube0.pe0",
            "nothing orders these writes",
        ],
    );
    // The replay ran the checkpoint last: the tensors differ, each
    // mismatch naming the two stores.
    assert!(!v.mismatches.is_empty(), "{report}");
    assert!(v.failed());
    for m in &v.mismatches {
        let (a, b) = (m.first_writer.unwrap(), m.replay_writer.unwrap());
        assert_ne!(a, b, "{report}");
        assert!(
            ww_races.iter().any(|r| (r.first, r.second) == (b, a)),
            "mismatch {m:?} is not one of the races:\n{report}"
        );
    }

    // A send from a released slot: the upstream PE's next message into
    // that slot races with the read.
    let slot = probe(2);
    let v = verification(&slot);
    let report = v.report();
    let named = v.races.iter().any(|r| {
        matches!(r.kind, RaceKind::ReadWrite | RaceKind::WriteRead)
            && r.region.0.to_string().contains("tcm")
    });
    assert!(named, "{report}");
    assert_contains_all(&report, &["ipcq_copy by sip", "race on sip"]);
}

/// Same inputs, the same verification (ops, bytes, races).
#[test]
fn the_second_pass_is_deterministic() {
    let go = || {
        let c = probe_ccl(
            "race_probe",
            1,
            ", topology: ring_1d, n_slots: 2, slot_size: 4096",
        );
        let res = run_verified(
            "ccl_allreduce",
            topo(3),
            c,
            Some("probe"),
            &["-b", "64", "-e", "64"],
        )
        .unwrap();
        verification(&res).report()
    };
    assert_eq!(go(), go());
}

#[test]
fn the_cli_reports_the_second_pass_and_strict_fails_on_a_race() {
    let out = ok(kb().args([
        "run",
        "ccl_allreduce",
        "--verify-data",
        "--",
        "-b",
        "8",
        "-e",
        "1K",
    ]));
    assert!(out.contains("verify: OK ("), "{out}");
    let json = ok(kb().args([
        "run",
        "ccl_allreduce",
        "--verify-data",
        "--format",
        "json",
        "--",
        "-b",
        "8",
        "-e",
        "1K",
    ]));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["verify"]["ok"], true, "{json}");
    assert_eq!(v["verify"]["races"], 0);
    assert!(v["verify"]["bytes"].as_u64().unwrap() > 0);
    let dir = tempfile::tempdir().unwrap();
    let ccl_file = dir.path().join("ccl.yaml");
    std::fs::write(
        &ccl_file,
        format!(
            "algorithms:\n  probe: {{module: {}, kernel_mode: 2, topology: ring_1d, n_slots: 2, slot_size: 4096}}\ndefaults:\n  algorithm: probe\n",
            test_component("race_probe")
        ),
    )
    .unwrap();
    let args = ["--", "-b", "256", "-e", "256"];
    let warn = kb()
        .args(["run", "ccl_allreduce", "--ccl"])
        .arg(&ccl_file)
        .arg("--verify-data")
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&warn.stdout);
    assert!(
        text.contains("warning: ") && text.contains(" race on "),
        "{text}"
    );
    let strict = kb()
        .args(["run", "ccl_allreduce", "--ccl"])
        .arg(&ccl_file)
        .arg("--verify-data=strict")
        .args(args)
        .output()
        .unwrap();
    assert!(!strict.status.success());
    let text = String::from_utf8_lossy(&strict.stdout);
    assert!(
        text.contains("verify: FAILED") && text.contains("error: "),
        "{text}"
    );
    let err = String::from_utf8_lossy(&strict.stderr);
    assert!(
        err.contains("--verify-data: the second pass failed"),
        "{err}"
    );
}

/// The rest of the kernel language through the second pass: round-robin
/// `recv`, `recv_into`, `send_addr`, `recv_async` / `wait`, casts,
/// reductions and the GEMM unit (the probes' all-reduces).
#[test]
fn the_kernel_language_probes_pass_the_second_pass() {
    for (probe, mode, sips) in [
        ("recv_probe", 0, 3),
        ("recv_probe", 1, 2),
        ("recv_probe", 2, 2),
        ("math_probe", 0, 3),
        ("math_probe", 1, 4),
        ("math_probe", 4, 2),
        ("math_probe", 6, 5),
    ] {
        let c = probe_ccl(probe, mode, "");
        let args = ["-b", "8", "-e", "4K", "-f", "8"];
        let res = run_verified("ccl_allreduce", topo(sips), c, Some("probe"), &args)
            .unwrap_or_else(|e| panic!("{probe} mode {mode}: {e}"));
        assert_clean(&format!("{probe} mode {mode} on {sips} SIPs"), &res);
    }
}

/// A kernel run in step with simulated time (no recording ahead) gives
/// the same log and the same clean second pass.
#[test]
fn kernels_run_in_step_verify_alike() {
    let args = ["-b", "64", "-e", "4K", "-f", "8"];
    let go = |l: &std::sync::Arc<kernbench::runtime::Loader>| {
        let mut req = request("ccl_allreduce", topo(3), ccl(), None, &args);
        req.verify_data = Some(kernbench::verify::Strictness::Strict);
        req.record_ops = true;
        kernbench::runtime::run_bench(l, req).unwrap()
    };
    let (ahead, in_step) = (go(&loader()), go(&in_step_loader()));
    assert_clean("recorded ahead", &ahead);
    assert_clean("in step", &in_step);
    assert_eq!(
        ahead.oplog.unwrap().to_jsonl(),
        in_step.oplog.unwrap().to_jsonl()
    );
}

/// The op log is charged to the memory budget: a budget the run fits in
/// without it refuses it, clearly.
#[test]
fn the_op_log_counts_against_the_memory_budget() {
    let args = ["-b", "8", "-e", "64K", "-f", "2"];
    let plain = run("ccl_allreduce", topo(8), ccl(), None, &args).unwrap();
    let mut req = request("ccl_allreduce", topo(8), ccl(), None, &args);
    req.memory_budget = plain.memory_peak + 1024;
    req.verify_data = Some(kernbench::verify::Strictness::Warn);
    let e = kernbench::runtime::run_bench(&loader(), req)
        .unwrap_err()
        .to_string();
    eprintln!("{e}");
    assert_contains_all(&e, &["host memory budget", "the op log"]);
}
