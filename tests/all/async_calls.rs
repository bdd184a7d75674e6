//! Asynchronous collectives (`async_op=True`, issue 63): a work waited
//! for at once is the blocking call; calls of one group run in issue
//! order, each taking its blocking time; groups over the same link share
//! it, groups over different links do not; `isend` / `irecv` pair up;
//! tensors dropped in flight stay alive; errors come at `wait`, or fail
//! the run when nobody waits.

use crate::common::*;
use crate::groups::group_ccl;
use kernbench::runtime::RunResult;

/// `async_probe MODE N` on a ring of `sips` SIPs.
fn probe(sips: u32, mode: &str, n: u32) -> Result<RunResult, kernbench::error::SimError> {
    let n = n.to_string();
    run(
        test_component("async_probe"),
        topo(sips),
        group_ccl(),
        None,
        &[mode, &n],
    )
}

/// The time of row `name`, checked to have no wrong element.
fn time(res: &RunResult, name: &str) -> u64 {
    let r = res
        .rows
        .iter()
        .find(|r| r.collective == name)
        .unwrap_or_else(|| panic!("no row {name}: {:?}", res.rows));
    assert_eq!(r.wrong, 0, "{name}: wrong elements");
    assert!(r.time_ps > 0, "{name}: no time");
    r.time_ps
}

/// `async_probe ARGS...` on a ring of `sips` SIPs, which must succeed.
fn probe_args(sips: u32, args: &[&str]) -> RunResult {
    run(
        test_component("async_probe"),
        topo(sips),
        group_ccl(),
        None,
        args,
    )
    .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn ok(sips: u32, mode: &str, n: u32) -> RunResult {
    probe(sips, mode, n).unwrap_or_else(|e| panic!("{mode} {n}: {e}"))
}

/// Issued asynchronously and waited for at once, an all-reduce takes
/// exactly its blocking time and gives the same bytes, at several sizes.
#[test]
fn a_work_waited_for_at_once_is_the_blocking_call() {
    for n in [16, 4096, 16384] {
        let blocking = time(&ok(4, "blocking", n), "all_reduce");
        let waited = time(&ok(4, "async", n), "all_reduce");
        assert_eq!(waited, blocking, "{n} elements");
    }
}

/// A rank's calls on one group run in issue order, each after the one
/// before it and in the time it takes alone; a later work has not ended
/// when an earlier one is waited for; a blocking call after them takes
/// its own time.
#[test]
fn one_group_s_calls_run_in_issue_order_each_in_its_own_time() {
    let n = 4096;
    let res = ok(4, "order", n);
    let t: Vec<u64> = (0..4).map(|i| time(&res, &format!("order {i}"))).collect();
    let big = time(&ok(4, "blocking", 4 * n), "all_reduce");
    let small = time(&ok(4, "blocking", n), "all_reduce");
    assert_eq!(t[0], big, "the first call takes its blocking time");
    for i in 1..4 {
        assert_eq!(
            t[i] - t[i - 1],
            small,
            "call {i} starts when {} ends",
            i - 1
        );
    }
    assert_eq!(time(&res, "order blocking"), small);
    let early = res.rows.iter().find(|r| r.collective == "early").unwrap();
    assert_eq!(early.wrong, 0, "the second work said it had ended early");
}

/// Two groups over the same two ranks (two communicators, one link and
/// the same PEs' engines) share them: both calls together take at least
/// one call plus the time the link takes to carry the other's bytes (a
/// 2-rank ring all-reduce sends each rank's N elements across the link,
/// half in each phase), and no longer than the two one after the other.
#[test]
fn two_groups_over_one_link_share_it() {
    let n = 1 << 13; // 32 KiB a rank
    let res = ok(4, "one_pair", n);
    let one = time(&res, "pairs");
    let link = res
        .alpha_beta
        .as_ref()
        .expect("alpha-beta figures")
        .bandwidth;
    let other_s_bytes = link.duration_ps(n as u64 * 4).unwrap();
    let two = time(&ok(4, "two_pairs", n), "pairs");
    assert!(
        two >= one + other_s_bytes,
        "two groups on one link: {two} ps; one alone {one} ps, the other's bytes {other_s_bytes} ps"
    );
    assert!(
        two <= 2 * one,
        "two groups on one link: {two} ps, one alone {one} ps"
    );
}

/// A rank in two groups whose rings use different links runs both at
/// once: the ranks in one group only take the time of one call alone;
/// the rank in both no more than its share of engine time beyond it.
#[test]
fn a_rank_in_two_groups_over_different_links_runs_both_at_once() {
    let n = 1 << 14;
    let one = time(&ok(4, "one_pair", n), "pairs");
    let res = ok(4, "cross", n);
    let both = time(&res, "cross 0");
    assert!(both >= one, "{both} < {one}");
    assert!(
        (both as f64) < 1.5 * one as f64,
        "rank 0's two calls took {both} ps, one alone {one} ps: they did not overlap"
    );
    for r in ["cross 1", "cross 3"] {
        assert!(time(&res, r) <= both, "{r}");
    }
}

/// `isend` then `irecv` on both ranks pairs up (no deadlock) with the
/// right bytes.
#[test]
fn isend_then_irecv_on_both_ranks_pairs_up() {
    for n in [16, 4096] {
        time(&ok(4, "p2p", n), "p2p");
    }
}

/// A tensor and its work dropped right after the issue: the call still
/// runs with the tensor's bytes (its peers get its contribution), and a
/// tensor made meanwhile does not overwrite it.
#[test]
fn a_tensor_dropped_in_flight_lives_until_its_call_ends() {
    for n in [16, 4096] {
        time(&ok(4, "dropped", n), "dropped");
    }
}

/// Ranks that disagree on an asynchronous call learn it at `wait`, with
/// both calls named; when nobody waits, the run fails all the same as
/// the ranks return.
#[test]
fn errors_come_at_wait_or_fail_the_run_when_nobody_waits() {
    let e = probe(4, "mismatch", 64).unwrap_err().to_string();
    assert!(
        e.contains("all_reduce") && e.contains("all_gather"),
        "mismatch: {e}"
    );
    // Nobody waits: the run still fails, naming the root cause.
    let e = probe(4, "unwaited", 64).unwrap_err().to_string();
    assert!(
        e.contains("all_reduce") && e.contains("all_gather"),
        "unwaited: {e}"
    );
}

/// Two runs with calls of several groups in flight give the same rows.
#[test]
fn runs_with_calls_in_flight_repeat_exactly() {
    for mode in ["cross", "two_pairs", "order"] {
        let rows = |r: RunResult| -> Vec<(String, u64, u64)> {
            r.rows
                .iter()
                .map(|r| (r.collective.clone(), r.time_ps, r.wrong))
                .collect()
        };
        assert_eq!(rows(ok(4, mode, 4096)), rows(ok(4, mode, 4096)), "{mode}");
    }
}

/// A Python bench makes the same asynchronous calls with PyTorch's words
/// (`async_op=True`, `isend` / `irecv`, `Work.wait` / `is_completed`,
/// `torch.ahbm.busy` / `gemm`) and
/// gets the Rust probe's rows to the picosecond.
#[test]
fn python_async_calls_give_the_rust_probe_s_rows() {
    let bench = crate::common::guests::python(
        "bench",
        "tests/components/python/async_probe/async_probe.py",
    );
    let cases: [&[&str]; 6] = [
        &["async", "4096"],
        &["order", "1024"],
        &["two_pairs", "2048"],
        &["p2p", "64"],
        &["overlap", "4096", "3000"],
        &["gemm", "1024", "512", "256"],
    ];
    for args in cases {
        let mode = args[0];
        let py = run(&bench, topo(4), group_ccl(), None, args)
            .unwrap_or_else(|e| panic!("python {mode}: {e}"));
        let rust = probe_args(4, args);
        let rows = |r: &RunResult| -> Vec<(String, u64, u64)> {
            r.rows
                .iter()
                .map(|r| (r.collective.clone(), r.time_ps, r.wrong))
                .collect()
        };
        assert!(!rows(&py).is_empty(), "{mode}");
        assert_eq!(rows(&py), rows(&rust), "{mode}");
    }
}

/// An asynchronous all-reduce of time C overlapped with `ahbm.busy(D)`
/// (the matrix units, which the ring does not use) takes max(C, D)
/// exactly, over D from C/10 to 10·C; `busy` itself returns D.
#[test]
fn an_all_reduce_overlapped_with_compute_takes_the_longer_of_the_two() {
    let n = 4096;
    let c = time(&ok(4, "async", n), "all_reduce");
    for tenths in [1u64, 5, 10, 20, 100] {
        let d_ns = (c * tenths / 10).div_ceil(1000);
        let res = probe_args(4, &["overlap", &n.to_string(), &d_ns.to_string()]);
        let busy = res.rows.iter().find(|r| r.collective == "busy").unwrap();
        assert_eq!(busy.time_ps, d_ns * 1000, "busy({d_ns})");
        assert_eq!(
            time(&res, "overlap"),
            c.max(d_ns * 1000),
            "C = {c} ps, D = {d_ns} ns"
        );
    }
}

/// `ahbm.gemm` takes the roofline of the device's matrix units and HBM —
/// its compute bound for a square GEMM, its memory bound for a thin one —
/// and overlapped with an all-reduce of time C takes max(C, gemm).
#[test]
fn ahbm_gemm_takes_its_roofline_and_overlaps_an_all_reduce() {
    let spec = topo(4);
    let pes = (spec.cubes_per_sip() * spec.pes_per_cube()) as f64;
    let rate = spec.pe.gemm.throughput_tflops.bf16 * 1e12 * pes;
    let hbm =
        spec.cube.hbm.bandwidth_gbps * 1e9 * (spec.cube.hbm.stacks * spec.cubes_per_sip()) as f64;
    let overhead = spec.pe.gemm.overhead_ns * 1e3;
    let n = 4096;
    let c = time(&ok(4, "async", n), "all_reduce");
    for (m, k, compute_bound) in [(2048u64, 2048u64, true), (1 << 16, 1, false)] {
        let res = probe_args(4, &["gemm", &n.to_string(), &m.to_string(), &k.to_string()]);
        let g = res
            .rows
            .iter()
            .find(|r| r.collective == "gemm")
            .unwrap()
            .time_ps;
        let (mf, kf) = (m as f64, k as f64);
        let t_c = 2.0 * mf * mf * kf / rate * 1e12;
        let t_m = (2.0 * mf * kf + mf * mf) * 2.0 / hbm * 1e12;
        assert_eq!(t_c > t_m, compute_bound, "{m}x{k}: {t_c} vs {t_m}");
        let want = overhead + t_c.max(t_m);
        assert!(
            (g as f64 - want).abs() <= 2.0,
            "{m}x{k}: {g} ps, want {want}"
        );
        assert_eq!(time(&res, "gemm overlap"), c.max(g), "{m}x{k}");
    }
}

/// `launch_async` waited at once takes the blocking launch's time and
/// gives the same bytes; beside an asynchronous all-reduce the two
/// together take no less than the longer and no more than their sum
/// (they share the PEs' DMA engines and MATH units).
#[test]
fn launch_async_is_the_blocking_launch_and_runs_beside_a_collective() {
    let n = 4096;
    let c = time(&ok(4, "async", n), "all_reduce");
    let res = probe_args(4, &["launch", &n.to_string(), test_component("math_probe")]);
    let blocking = time(&res, "launch");
    assert_eq!(time(&res, "launch async"), blocking);
    let both = time(&res, "launch overlap");
    assert!(both >= c.max(blocking), "{both} < max({c}, {blocking})");
    assert!(both <= c + blocking, "{both} > {c} + {blocking}");
}

/// The per-rank breakdown of a run that overlaps: an asynchronous
/// all-reduce of time C beside `busy(D)` is C of communication, D of
/// compute, and max(C − D, 0) of it exposed; a run of blocking
/// collectives alone has no breakdown.
#[test]
fn the_per_rank_breakdown_shows_the_exposed_communication() {
    let n = 4096;
    let c = time(&ok(4, "async", n), "all_reduce");
    assert!(ok(4, "blocking", n).ranks.is_empty());
    for tenths in [5u64, 20] {
        let d = (c * tenths / 10).div_ceil(1000) * 1000;
        let res = probe_args(4, &["overlap", &n.to_string(), &(d / 1000).to_string()]);
        assert_eq!(res.ranks.len(), 4, "{:?}", res.ranks);
        for r in &res.ranks {
            assert_eq!(r.compute_ps, d, "rank {}", r.rank);
            assert_eq!(r.communication_ps, c, "rank {}", r.rank);
            assert_eq!(r.exposed_ps, c.saturating_sub(d), "rank {}", r.rank);
            assert_eq!(r.idle_ps, res.end_time_ps - c.max(d), "rank {}", r.rank);
        }
        let table = kernbench::report::to_table(&res, &[], "");
        assert!(table.contains("exposed"), "{table}");
    }
}

/// `train_step --tp 4 --dp 2` on 8 SIPs: every collective's bytes right,
/// exposed communication reported for every rank, the TP groups'
/// all-reduce rows and the DP buckets' wait; the Python bench gives the
/// same rows, notes and breakdown to the picosecond.
#[test]
fn train_step_reports_exposed_communication_alike_in_rust_and_python() {
    let args = [
        "--tp", "4", "--dp", "2", "--layers", "2", "--hidden", "128", "--seq", "64",
    ];
    let rust =
        run("train_step", topo(8), ccl(), None, &args).unwrap_or_else(|e| panic!("rust: {e}"));
    assert_eq!(rust.rows.len(), 2 * 8, "{:?}", rust.rows);
    assert!(rust.rows.iter().all(|r| r.wrong == 0), "{:?}", rust.rows);
    assert_eq!(rust.ranks.len(), 8);
    for r in &rust.ranks {
        assert!(
            r.exposed_ps > 0 && r.exposed_ps <= r.communication_ps,
            "{r:?}"
        );
        assert!(r.compute_ps > 0, "{r:?}");
    }
    assert!(
        rust.notes.iter().any(|n| n.starts_with("rank 0: step ")),
        "{:?}",
        rust.notes
    );
    let bench = crate::common::guests::python("bench", "benches/python/train_step/train_step.py");
    let py = run(&bench, topo(8), ccl(), None, &args).unwrap_or_else(|e| panic!("python: {e}"));
    let rows = |r: &RunResult| -> Vec<(String, u64, u64, u64)> {
        let mut v: Vec<_> = r
            .rows
            .iter()
            .map(|r| (r.collective.clone(), r.size_bytes, r.time_ps, r.wrong))
            .collect();
        v.sort();
        v
    };
    assert_eq!(rows(&py), rows(&rust));
    assert_eq!(py.ranks, rust.ranks);
    let notes = |r: &RunResult| {
        let mut n = r.notes.clone();
        n.sort();
        n
    };
    assert_eq!(notes(&py), notes(&rust));
}
