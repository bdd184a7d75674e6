//! Hostile guests and absurd inputs (issue 8): guests that sleep, spin on
//! cheap host calls, flood output, allocate huge tensors or overflowing
//! shapes, and configs with extreme figures. Each must end in a correct
//! result or a clear error naming the culprit and the budget or key to
//! change: never a panic, a hang, an unbounded allocation or a wrong
//! figure with exit status 0. Every run here is bounded by a budget it
//! sets itself (none relies on a long timeout). Part of the `errors` test
//! binary (one binary linking wasmtime, not two).

use crate::common::*;
use kernbench::config::{CclConfig, Origin, TopologySpec, DEFAULT_TOPOLOGY_YAML};
use kernbench::error::SimError;
use kernbench::runtime::{Loader, LoaderOptions};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

fn hostile_ccl() -> CclConfig {
    let text = format!(
        "defaults: {{algorithm: hostile}}\nalgorithms:\n  hostile: {{module: {}, topology: ring_1d, buffer_kind: tcm, n_slots: 2, slot_kib: 64}}\n",
        test_component("hostile_kernel")
    );
    CclConfig::from_yaml(&text, Origin::Embedded("hostile-ccl")).unwrap()
}

/// A loader whose host-call budget stops a spinning guest in well under a
/// second.
fn tight_loader() -> Arc<Loader> {
    static L: OnceLock<Arc<Loader>> = OnceLock::new();
    L.get_or_init(|| {
        Arc::new(
            Loader::new(LoaderOptions {
                max_host_calls: 200_000,
                pool_instances: 100,
                ..LoaderOptions::default()
            })
            .unwrap(),
        )
    })
    .clone()
}

fn bench(
    l: &Arc<Loader>,
    sips: u32,
    args: &[&str],
) -> Result<kernbench::runtime::RunResult, SimError> {
    run_with(
        l,
        test_component("hostile_bench"),
        topo(sips),
        hostile_ccl(),
        None,
        args,
    )
}

/// The error a bench run ended with; it must be the bench's own failure
/// (class `BenchFailed`, naming `hostile_bench` and `who` failed).
fn failure(l: &Arc<Loader>, sips: u32, args: &[&str], who: &str) -> String {
    match bench(l, sips, args) {
        Ok(_) => panic!("{args:?} was expected to fail"),
        Err(SimError::BenchFailed {
            bench,
            who: got,
            message,
        }) => {
            assert_eq!(
                (bench.as_str(), got.as_str()),
                ("hostile_bench", who),
                "{message}"
            );
            message
        }
        Err(other) => panic!("{args:?}: expected the bench to fail, got: {other}"),
    }
}

/// The bench driver's (`run`) failure: what a scenario reports.
fn bench_err(l: &Arc<Loader>, sips: u32, args: &[&str]) -> String {
    failure(l, sips, args, "run")
}

/// The hostile kernel, picked by its tile size (elements), run as a
/// collective on `sips` ranks that report their time and first value.
fn kernel_report(l: &Arc<Loader>, sips: u32, elems: u32) -> String {
    bench_err(l, sips, &["collective", &elems.to_string()])
}

/// The hostile kernel failing: reported as the collective's root cause,
/// naming the algorithm, its component and the PE.
fn kernel_err(l: &Arc<Loader>, sips: u32, elems: u32) -> String {
    let m = failure(l, sips, &["collective", &elems.to_string()], "collective");
    assert!(
        m.starts_with("kernel of algorithm 'hostile' (component hostile_kernel) on sip"),
        "{m}"
    );
    m
}

// ---- crash: sleeping guests ---------------------------------------------

#[test]
fn a_sleeping_bench_waits_in_simulated_time() {
    let e = bench_err(&loader(), 1, &["sleep"]);
    // 3 ms of std::thread::sleep = 3e9 ps of simulated time, exactly; an
    // Instant measures simulated time too.
    assert!(e.contains("slept 3000000000 ps, instant 5000 ns"), "{e}");
}

#[test]
fn a_sleeping_kernel_advances_its_time_deterministically() {
    let a = kernel_report(&loader(), 2, 4);
    for r in 0..2 {
        assert!(e_has_rank_time(&a, r), "{a}");
    }
    // Each rank slept 1 ms before its ring step, and the data is right
    // (hello swaps the two ranks' tiles).
    assert!(a.contains("rank 0 took") && a.contains("got [2.0]"), "{a}");
    assert!(a.contains("got [1.0]"), "{a}");
    let t: u64 = a
        .split("rank 0 took ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap();
    assert!((1_000_000_000..1_010_000_000).contains(&t), "{t} ps");
    assert_eq!(a, kernel_report(&loader(), 2, 4), "same inputs, same times");
}

fn e_has_rank_time(e: &str, r: u32) -> bool {
    e.contains(&format!("rank {r} took "))
}

#[test]
fn kernels_that_need_simulated_time_or_flood_the_queue_run_as_in_step() {
    // Mode 4 sleeps (recording stops, the kernel runs again in step);
    // 2048 records 20000 stores that the replay feeds through the
    // command queue. Both must equal the run with no recording at all.
    for mode in [4, 2048] {
        assert_eq!(
            kernel_report(&loader(), 2, mode),
            kernel_report(&in_step_loader(), 2, mode),
            "mode {mode}"
        );
    }
}

#[test]
fn a_kernel_that_needs_simulated_time_is_kept_as_such_for_its_next_launches() {
    // Mode 4 sleeps: its first launch's recording stops and it runs in
    // step; the verdict is kept (runtime/recording_memo.rs), so its next
    // two launches run in step at once. The run equals the one with no
    // recording at all, launch by launch.
    let args = ["collective", "4", "3"];
    let kept = bench_err(&loader(), 2, &args);
    assert_eq!(kept, bench_err(&in_step_loader(), 2, &args));
    for r in 0..2 {
        let line = kept
            .lines()
            .find(|l| l.contains(&format!("rank {r} took ")))
            .unwrap_or_else(|| panic!("{kept}"));
        assert_eq!(line.matches(", then ").count(), 2, "{line}");
    }
}

#[test]
fn malformed_batches_are_refused_by_name_and_leave_the_host_sound() {
    let e = kernel_err(&loader(), 2, 4096);
    let expected = [
        "call 1: tl.submit: direction 5 is not one of the 1 the batch lists",
        "call 0: tl.submit: tensor id 9 names no live tensor",
        "call 0: tl.submit: tensor id 70000 is not below 65536",
        "call 0: tl.submit: shape 3 is not one of the 1 the batch lists",
        // The first batch's load made tensor 0, still live.
        "call 0: tl.submit: tensor id 0 is still live (drop it before naming a new tensor with it)",
    ];
    assert!(e.contains(&expected.join("\n")), "{e}");
}

#[test]
fn encoded_batches_that_cannot_be_read_are_refused_by_name_after_the_calls_before() {
    let e = kernel_err(&loader(), 2, 16384);
    let expected = [
        "call 1: tl.submit-encoded: case 99 names no call (the cases are 0 ..= 15)",
        "call 0: tl.submit-encoded: the bytes end inside the call's id",
        "call 0: tl.submit-encoded: the call's dtype is 17, which is not a dtype (0 ..= 9)",
        "call 0: tl.submit-encoded: the call's dir is 2, which is not an option's 0 (none) or 1 (some)",
        "call 0: tl.submit-encoded: the call's id runs past 32 bits (its LEB128 is too long)",
        // The first batch's load (before its unreadable call) was made.
        "ok",
    ];
    assert!(e.contains(&expected.join("\n")), "{e}");
}

#[test]
fn sleeping_past_the_clocks_horizon_is_refused() {
    let e = kernel_err(&loader(), 2, 256);
    assert!(e.contains("hostile_kernel") && e.contains("on sip"), "{e}");
    assert!(e.contains("passes the simulated clock's horizon"), "{e}");
    assert!(!e.contains("deadlock"), "{e}");
}

// ---- hang: loops around cheap host calls, wall clock ---------------------

#[test]
fn spinning_on_a_host_call_is_stopped_by_the_host_call_budget() {
    for elems in [8, 16, 1024] {
        let e = kernel_err(&tight_loader(), 2, elems);
        assert!(
            e.contains("hostile_kernel") && e.contains("on sip"),
            "{elems}: {e}"
        );
        assert!(
            e.contains("host-call budget of 200000 calls ran out"),
            "{elems}: {e}"
        );
        assert!(e.contains("--max-host-calls"), "{elems}: {e}");
    }
    let e = bench_err(&tight_loader(), 1, &["spin-now"]);
    assert!(e.contains("host-call budget"), "{e}");
}

#[test]
fn host_calls_burn_fuel() {
    static L: OnceLock<Arc<Loader>> = OnceLock::new();
    let l = L
        .get_or_init(|| {
            Arc::new(
                Loader::new(LoaderOptions {
                    fuel: 20_000_000,
                    host_call_fuel: 1_000,
                    pool_instances: 20,
                    ..LoaderOptions::default()
                })
                .unwrap(),
            )
        })
        .clone();
    let e = bench_err(&l, 1, &["spin-now"]);
    assert!(
        e.contains("fuel budget of 20000000 ran out inside a host call"),
        "{e}"
    );
    assert!(e.contains("--fuel"), "{e}");
}

#[test]
fn a_wall_clock_deadline_stops_a_pure_spin() {
    let l = Arc::new(
        Loader::new(LoaderOptions {
            fuel: u64::MAX / 4,
            deadline: Some(Duration::from_secs(1)),
            pool_instances: 10,
            ..LoaderOptions::default()
        })
        .unwrap(),
    );
    let t0 = std::time::Instant::now();
    let e = bench_err(&l, 1, &["spin-pure"]);
    assert!(e.contains("wall-clock deadline"), "{e}");
    assert!(e.contains("--deadline"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(30));
}

#[test]
fn a_kernel_issuing_commands_in_a_loop_waits_for_its_command_queue() {
    // 20000 stores in flight would be 20000 tasks; the queue holds 4096,
    // the kernel waits for room, and the run completes with correct data.
    let e = kernel_report(&loader(), 2, 2048);
    assert!(e.contains("rank 0 took") && e.contains("got [2.0]"), "{e}");
    assert!(e.contains("rank 1 took") && e.contains("got [1.0]"), "{e}");
}

// ---- output floods -------------------------------------------------------

#[test]
fn a_log_flood_is_bounded_and_stopped() {
    for elems in [32, 64] {
        let e = kernel_err(&tight_loader(), 2, elems);
        assert!(e.contains("host-call budget"), "{elems}: {e}");
        assert!(!e.contains("unreachable"), "{elems}: {e}");
    }
}

#[test]
fn output_over_the_cap_is_truncated_with_a_notice() {
    let err = fails(
        kb().args([
            "run",
            test_component("hostile_bench"),
            "--max-host-calls",
            "2000000",
        ])
        .args(["--", "flood"]),
    );
    assert_contains_all(
        &err,
        &[
            "output truncated at 16.0 MiB",
            "host-call budget of 2000000 calls",
        ],
    );
    assert!(!err.contains("unreachable"), "{}", tail(&err));
}

fn tail(s: &str) -> String {
    s.lines().rev().take(6).collect::<Vec<_>>().join("\n")
}

// ---- silently wrong: sizes and times -------------------------------------

#[test]
fn shapes_whose_size_overflows_are_refused() {
    let e = bench_err(&loader(), 1, &["overflow-shape"]);
    assert!(e.contains("torch.zeros([2147483648, 2147483648, 2]"), "{e}");
    assert!(e.contains("more than 2^64 bytes"), "{e}");
    let e = bench_err(&loader(), 1, &["wrapping-shape"]);
    assert!(e.contains("more than 2^64 elements"), "{e}");
    let e = kernel_err(&loader(), 2, 128);
    assert!(
        e.contains("tl.load(") && e.contains("more than 2^64 bytes"),
        "{e}"
    );
    // A receive on a direction already received from is still checked.
    let e = kernel_err(&loader(), 2, 8192);
    assert!(
        e.contains("tl.recv(dir=\"W\")") && e.contains("more than 2^64 bytes"),
        "{e}"
    );
}

#[test]
fn extreme_figures_are_refused_at_load_time_naming_key_and_range() {
    let cases = [
        (
            "latency_ns: 500 ",
            "latency_ns: 1e16 ",
            "system.inter_sip_link.latency_ns",
            "1 ms",
        ),
        (
            "bandwidth_gbps: 100 ",
            "bandwidth_gbps: 1e-30 ",
            "system.inter_sip_link.bandwidth_gbps",
            "1 MB/s",
        ),
        (
            "setup_ns: 20 ",
            "setup_ns: 18446744073709551615 ",
            "pe.dma.setup_ns",
            "1 ms",
        ),
        (
            "throughput_gflops: 256",
            "throughput_gflops: 1e-30",
            "pe.math.throughput_gflops",
            "elements/s",
        ),
    ];
    for (from, to, key, why) in cases {
        let text = DEFAULT_TOPOLOGY_YAML.replacen(from, to, 1);
        assert_ne!(text, DEFAULT_TOPOLOGY_YAML, "{from}");
        let e = match TopologySpec::from_yaml(&text, Origin::Embedded("extreme.yaml")) {
            Ok(t) => kernbench::topology::build(&t)
                .map(|_| ())
                .unwrap_err()
                .to_string(),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains(key) && e.contains("physical range") && e.contains(why),
            "{e}"
        );
    }
}

#[test]
fn a_machine_too_large_to_compile_is_refused_before_it_is_built() {
    let text = DEFAULT_TOPOLOGY_YAML
        .replacen("count: 4", "count: 4096", 1)
        .replacen("w: 4\n    h: 4", "w: 64\n    h: 64", 1);
    let e = match TopologySpec::from_yaml(&text, Origin::Embedded("huge.yaml")) {
        Ok(t) => kernbench::topology::build(&t)
            .map(|_| ())
            .unwrap_err()
            .to_string(),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("at most 4194304 are supported"), "{e}");
    assert!(e.contains("4096 SIPs x 4096 cubes"), "{e}");
}

// ---- memory ---------------------------------------------------------------

#[test]
fn eight_gib_of_zeros_costs_no_host_memory() {
    let r = bench(&loader(), 1, &["zeros-8g"]).unwrap();
    // The bench instance's own linear memory and one written page.
    assert!(r.memory_peak < 16 << 20, "{} bytes", r.memory_peak);
    // Reading it back whole would not fit a guest: refused, naming it.
    let e = bench_err(&loader(), 1, &["zeros-8g-read"]);
    assert!(e.contains("tensor.to_f64() of tensor 'big'"), "{e}");
    assert!(e.contains("--max-guest-memory"), "{e}");
}

/// The hostile bench on `sips` ranks with a host-memory budget of `budget`
/// bytes; the error it ends with.
fn budget_err(sips: u32, args: &[&str], budget: u64) -> String {
    let r = kernbench::runtime::run_bench(
        &loader(),
        kernbench::runtime::RunRequest {
            args: args.iter().map(|a| a.to_string()).collect(),
            memory_budget: budget,
            memory_digest: true,
            ..kernbench::runtime::RunRequest::new(
                test_component("hostile_bench"),
                Arc::new(kernbench::topology::build(&topo(sips)).unwrap()),
                hostile_ccl(),
            )
        },
    );
    match r {
        Err(SimError::BenchFailed { who, message, .. }) if who == "run" => message,
        other => panic!(
            "expected the bench to fail, got {:?}",
            other.map(|r| r.rows.len())
        ),
    }
}

#[test]
fn scattered_writes_stop_at_the_memory_budget() {
    let e = budget_err(1, &["scatter", "4"], 128 << 20);
    assert!(
        e.contains("host memory budget of 128.0 MiB exhausted"),
        "{e}"
    );
    assert!(e.contains("simulated memory pages"), "{e}");
    assert!(e.contains("copy_: tensor 'piece"), "{e}");
}

#[test]
fn guest_memories_are_charged_to_the_budget() {
    let e = budget_err(4, &["hold", "8", "32"], 128 << 20);
    assert!(
        e.contains("host memory budget of 128.0 MiB exhausted"),
        "{e}"
    );
    assert!(e.contains("guest instances (rank"), "{e}");
}

/// Peak resident size of a child process, from the OS (wait4's rusage;
/// std's `wait` would not give it, so the child is reaped by `wait4`).
#[allow(clippy::zombie_processes)]
///
/// Measured through a small intermediary (python3, which the guest
/// toolchains need anyway): Linux carries a process's peak RSS across
/// `exec` (`ru_maxrss` keeps the old memory's high-water mark), so a
/// child spawned straight from this test binary, which holds gigabytes
/// of other tests' runs, reports the binary's peak. The intermediary's
/// own child starts from the intermediary's few MiB.
fn run_measuring_rss(cmd: &mut std::process::Command) -> (i32, String, u64) {
    const MEASURE: &str = "import resource, subprocess, sys\n\
        r = subprocess.run(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)\n\
        kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n\
        sys.stderr.write('\\nkernbench-test-maxrss-kib=%d\\n' % kib)\n\
        sys.exit(r.returncode if r.returncode >= 0 else 255)\n";
    let mut python = std::process::Command::new("python3");
    python.arg("-c").arg(MEASURE).arg(cmd.get_program());
    python.args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => python.env(k, v),
            None => python.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        python.current_dir(d);
    }
    let out = python
        .output()
        .expect("python3 runs (the guest toolchains need it)");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let (err, kib) = err
        .rsplit_once("\nkernbench-test-maxrss-kib=")
        .map(|(e, k)| (e.to_string(), k.trim().parse::<u64>().expect("a KiB count")))
        .unwrap_or_else(|| panic!("the RSS measurement did not report: {err}"));
    let code = out
        .status
        .code()
        .map_or(-1, |c| if c == 255 { -1 } else { c });
    (code, err, kib * 1024)
}

/// `kernbench-host run <run_args> --memory-budget <mib>M --topology
/// <sips SIPs> -- <bench_args>`: it must fail with the budget's error and
/// every one of `needles`, no panic, while its peak RSS (from the OS)
/// stays under the budget plus `slack` bytes.
fn assert_refused_under_budget_plus(
    sips: u32,
    run_args: &[&str],
    (mib, slack): (u64, u64),
    bench_args: &[&str],
    needles: &[&str],
) {
    let dir = tempfile::tempdir().unwrap();
    let topology = topology_file(dir.path(), sips);
    let (code, err, rss) = run_measuring_rss(
        kb().arg("run")
            .args(run_args)
            .args(["--memory-budget", &format!("{mib}M")])
            .arg("--topology")
            .arg(&topology)
            .arg("--")
            .args(bench_args),
    );
    assert_eq!(code, 1, "{}", tail(&err));
    let exhausted = format!("host memory budget of {mib}.0 MiB exhausted");
    assert_contains_all(&err, &[&[exhausted.as_str()], needles].concat());
    assert!(!err.contains("panicked"), "{}", tail(&err));
    eprintln!("peak RSS of the run: {} MiB (budget {mib} MiB)", rss >> 20);
    let bound = (mib << 20) + slack;
    assert!(
        rss < bound,
        "peak RSS {} MiB over the {mib} MiB budget (+ {} MiB)",
        rss >> 20,
        slack >> 20
    );
}

/// [`assert_refused_under_budget_plus`] with no slack.
fn assert_refused_under_budget(
    sips: u32,
    run_args: &[&str],
    mib: u64,
    bench_args: &[&str],
    needles: &[&str],
) {
    assert_refused_under_budget_plus(sips, run_args, (mib, 0), bench_args, needles)
}

/// 24 ranks that each hold 200 MB of guest memory and a 200 MB tensor,
/// then block in a receive no one answers: the run stops with the
/// budget's error before the process passes the budget by more than the
/// stated margin (`budget::resident_margin`; what a host call lifts on
/// its way into a tensor is not charged). It reached 4.9 GB of RSS with
/// 230 MiB budgeted; a single 200 MB `copy-from-bytes` also failed with
/// wasmtime's "too much data is being copied" (its 128 MiB per host call).
#[test]
fn ranks_holding_memory_while_blocked_stop_at_the_memory_budget() {
    let mib = 1000;
    assert_refused_under_budget_plus(
        24,
        &[test_component("dist_probe")],
        (mib, kernbench::budget::resident_margin(mib << 20)),
        &["hold", "200"],
        &["guest instances (rank", "simulated memory pages 400.0 MiB"],
    );
}

#[test]
fn a_run_over_its_memory_budget_fails_while_the_process_stays_under_it() {
    // 16 ranks x 64 MiB of touched guest memory = 1 GiB wanted.
    assert_refused_under_budget(
        16,
        &[test_component("hostile_bench")],
        400,
        &["hold", "16", "64"],
        &["guest instances (rank"],
    );
}

/// Ten million report rows: charged at what the host holds for each from
/// record to printed table, the run stops with the budget's error while
/// the process stays under it (it reached 4.17 GB of RSS against a 1 GiB
/// budget, exit 0, when a row was charged at its record's fields).
#[test]
fn ten_million_report_rows_stop_at_the_memory_budget() {
    assert_refused_under_budget(
        1,
        &[test_component("hostile_bench"), "--format", "csv"],
        1000,
        &["records", "10000000"],
        &["captured guest output (bench)", "report.record-result"],
    );
}

/// A full mesh too big for the budget is refused before its tables are
/// made, naming its rings and the flag: binomial broadcast on 512 SIPs
/// installs 261 632 rings (~248 MiB of host structures), over a 300 MiB
/// budget that the run's other memory (~210 MiB) fits.
#[test]
fn a_full_mesh_over_the_memory_budget_is_refused_before_it_is_made() {
    assert_refused_under_budget(
        512,
        &["ccl_broadcast", "--algorithm", "binomial_broadcast"],
        300,
        &["-b", "8", "-e", "8", "-n", "1", "-w", "0"],
        &[
            "ccl.yaml algorithm 'binomial_broadcast'",
            "IPCQ rings (261632 new rings of 2 slots, 992 B of host memory each) asked for 247.5 MiB",
            "--memory-budget",
        ],
    );
}

// ---- misleading reports ---------------------------------------------------

#[test]
fn a_kernel_failing_while_its_peers_wait_is_reported_as_itself() {
    let e = kernel_err(&loader(), 3, 512);
    assert!(e.contains("tl.load(addr=0x7000000000000000"), "{e}");
    assert!(e.contains("sip0.cube0.pe0"), "{e}");
    assert!(e.contains("unknown memory kind 7"), "{e}");
    assert!(!e.contains("deadlock"), "{e}");
}

#[test]
fn more_ranks_than_the_instance_pool_holds_is_explained() {
    let l = Arc::new(
        Loader::new(LoaderOptions {
            pool_instances: 12,
            ..LoaderOptions::default()
        })
        .unwrap(),
    );
    let e = bench_err(&l, 8, &["collective", "8"]);
    assert!(
        e.contains("8 ranks need up to 18 WebAssembly instances"),
        "{e}"
    );
    assert!(e.contains("--pool-instances 18"), "{e}");
    assert!(!e.contains("deadlock"), "{e}");
}

#[test]
fn a_directory_as_a_component_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("algo.wasm");
    std::fs::create_dir(&d).unwrap();
    let e = run(d.to_str().unwrap(), topo(2), ccl(), None, &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("is a directory, not a .wasm component file"),
        "{e}"
    );
    let e = run("/dev/null", topo(2), ccl(), None, &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("is not a regular file"), "{e}");
}

#[test]
fn a_hundred_thousand_rows_report_in_linear_time() {
    let r = bench(&loader(), 1, &["records", "100000"]).unwrap();
    assert_eq!(r.rows.len(), 100_000);
    let rows = kernbench::report::aggregate(&r.rows, None);
    assert_eq!(rows.len(), 100_000);
}

#[test]
fn a_wrong_total_a_u64_cannot_hold_fails_the_run() {
    // 2 x 2^63 wrapped to 0: "Out of bounds values : 0 OK", exit 0.
    let said = fails(kb().args(["run", test_component("hostile_bench")]).args([
        "--",
        "wrong",
        "9223372036854775808",
    ]));
    assert!(
        said.contains("18446744073709551615 or more element(s) differ"),
        "{said}"
    );
}

#[test]
fn csv_fields_with_commas_quotes_and_newlines_are_quoted() {
    let out = ok(kb()
        .args(["run", test_component("hostile_bench"), "--format", "csv"])
        .args(["--", "odd-names"]));
    let mut r = csv::Reader::from_reader(out.as_bytes());
    let row = r.records().next().unwrap().unwrap();
    assert_eq!(&row[0], "all,reduce \"odd\"\nname");
    assert_eq!(&row[4], "s,u\"m");
}
