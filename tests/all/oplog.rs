//! The op log (seed ADR-0052): what a run records when asked, its
//! dependency edges, its JSON-lines form and its determinism.

use crate::common;
use common::*;
use kernbench::hw::oplog::{OpParams, OpRecord};

fn ops(res: &kernbench::runtime::RunResult) -> &[OpRecord] {
    res.oplog.as_ref().expect("recorded").records()
}

/// The seed's ring on 4 SIPs: every kind of op is there, in completion
/// order (ids ascend with end times, deps point back), each IPCQ copy is
/// a dependency of the add that consumed its slot, and the log is off
/// (and absent) unless asked for.
#[test]
fn a_ring_all_reduce_logs_every_command_with_its_edges() {
    let res = run_recorded("ccl_allreduce", topo(4), ccl(), &["-b", "64", "-e", "64"]).unwrap();
    let log = ops(&res);
    let count = |name: &str| log.iter().filter(|r| r.op == name).count();
    // Per rank and variant (out of place, then in place): a host write,
    // one load, 3 copies, 3 adds, one store.
    let names: Vec<&str> = log.iter().map(|r| r.op).collect();
    assert_eq!(count("host_write"), 2 * 4, "{names:?}");
    assert_eq!(count("dma_read"), 2 * 4);
    assert_eq!(count("ipcq_copy"), 2 * 12);
    assert_eq!(count("math"), 2 * 12);
    assert_eq!(count("dma_write"), 2 * 4);
    let effects = log
        .iter()
        .filter(|r| !r.is_sync() && r.pe.is_some())
        .count();
    assert_eq!(
        res.stats.dma_commands + res.stats.math_commands,
        effects as u64
    );
    for (i, r) in log.iter().enumerate() {
        assert_eq!(r.id, i as u64);
        assert!(r.deps.iter().all(|&d| d < r.id), "{r:?}");
        assert!(
            r.deps.iter().all(|&d| log[d as usize].end_ps <= r.start_ps),
            "{r:?}"
        );
    }
    for copy in log.iter().filter(|r| r.op == "ipcq_copy") {
        let consumer = log
            .iter()
            .find(|r| r.deps.contains(&copy.id) && r.op == "math");
        let consumer = consumer.unwrap_or_else(|| panic!("nothing consumed {copy:?}"));
        let OpParams::Compute { inputs, .. } = &consumer.params else {
            unreachable!()
        };
        assert!(
            inputs.contains(&copy.params.writes().unwrap()),
            "{consumer:?} reads {copy:?}"
        );
    }
    let plain = run(
        "ccl_allreduce",
        topo(4),
        ccl(),
        None,
        &["-b", "64", "-e", "64"],
    )
    .unwrap();
    assert!(plain.oplog.is_none());
    assert_eq!(plain.rows, res.rows, "recording changes no time");
}

/// Same inputs, same log bytes; the JSON lines carry the seven fields.
#[test]
fn the_op_log_is_deterministic_json_lines() {
    let go = || {
        let res = run_recorded(
            "gpt3_qkv",
            topo(2),
            ccl(),
            &["--seq", "16", "--hidden", "32"],
        )
        .unwrap();
        res.oplog.unwrap().to_jsonl()
    };
    let (a, b) = (go(), go());
    assert_eq!(a, b);
    let first: serde_json::Value = serde_json::from_str(a.lines().next().unwrap()).unwrap();
    for field in ["id", "op", "pe", "start_ps", "end_ps", "deps", "params"] {
        assert!(first.get(field).is_some(), "{field} missing: {first}");
    }
    let kinds: std::collections::BTreeSet<String> = a
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["op"].to_string())
        .collect();
    for k in [
        "\"composite_gemm\"",
        "\"host_write\"",
        "\"dma_read\"",
        "\"dma_write\"",
    ] {
        assert!(kinds.contains(k), "{k} not in {kinds:?}");
    }
}

#[test]
fn the_cli_writes_the_op_log() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("ops.jsonl");
    let out = kb()
        .args(["run", "ccl_allreduce", "--oplog"])
        .arg(&f)
        .args(["--", "-b", "8", "-e", "8"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("# op log written to"), "{err}");
    let text = std::fs::read_to_string(&f).unwrap();
    assert!(text.lines().count() > 10);
    assert!(text
        .lines()
        .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()));
}
