//! Shared helpers for the integration tests: configs with other SIP counts
//! and link figures, a shared loader, and one-call runs.
#![allow(dead_code)]

use kernbench::config::{CclConfig, Origin, TopologySpec, DEFAULT_CCL_YAML, DEFAULT_TOPOLOGY_YAML};
use kernbench::error::SimError;
use kernbench::runtime::loader::TEST_COMPONENTS;
use kernbench::runtime::{run_bench, Loader, LoaderOptions, RunRequest, RunResult};
use std::sync::{Arc, OnceLock};

pub mod guests;

/// The default topology with `n` SIPs.
pub fn topo(n: u32) -> TopologySpec {
    let mut t = TopologySpec::default_embedded();
    t.system.sips.count = n;
    t
}

/// `topo` with `n` SIPs of a `kind` network (`w` wide for the 2-D ones)
/// and a `cube_w × cube_h` cube mesh.
pub fn machine(n: u32, kind: &str, w: Option<u32>, cubes: (u32, u32)) -> TopologySpec {
    let mut t = topo(n);
    t.system.sips.topology = serde_yaml::from_str(kind).unwrap();
    t.system.sips.w = w;
    t.system.sips.h = w.map(|w| n / w);
    t.sip.cube_mesh.w = cubes.0;
    t.sip.cube_mesh.h = cubes.1;
    t
}

/// A topology of our own: different SIP count, link figures and PE timing.
pub fn custom_topo(n: u32) -> TopologySpec {
    let text = DEFAULT_TOPOLOGY_YAML
        .replace("bandwidth_gbps: 100 ", "bandwidth_gbps: 50 ")
        .replace("latency_ns: 500 ", "latency_ns: 1200 ")
        .replace(
            "bandwidth_gbps: 256      # per port\n    latency_ns: 10",
            "bandwidth_gbps: 64\n    latency_ns: 35",
        )
        .replace("setup_ns: 20 ", "setup_ns: 75 ")
        .replace("throughput_gflops: 256", "throughput_gflops: 32");
    let mut t = TopologySpec::from_yaml(&text, Origin::Embedded("custom")).unwrap();
    assert_eq!(
        t.system.inter_sip_link.bandwidth_gbps, 50.0,
        "custom figures applied"
    );
    assert_eq!(
        t.sip.ucie_link.bandwidth_gbps, 64.0,
        "custom figures applied"
    );
    t.system.sips.count = n;
    t
}

pub fn ccl() -> CclConfig {
    CclConfig::from_yaml(DEFAULT_CCL_YAML, Origin::Embedded("ccl.yaml")).unwrap()
}

/// ccl.yaml whose default algorithm is the test-only `faulty_kernel`.
pub fn faulty_ccl() -> CclConfig {
    let text = format!(
        "defaults: {{algorithm: faulty}}\nalgorithms:\n  faulty: {{module: {}, topology: ring_1d, buffer_kind: tcm, n_slots: 2, slot_kib: 64}}\n",
        test_component("faulty_kernel")
    );
    CclConfig::from_yaml(&text, Origin::Embedded("faulty-ccl")).unwrap()
}

/// ccl.yaml whose only entry, `probe`, is the test component `component`
/// in `kernel_mode: mode`, with `extra` ccl.yaml keys (", key: value").
pub fn probe_ccl(component: &str, mode: u32, extra: &str) -> CclConfig {
    CclConfig::from_yaml(
        &format!(
            "algorithms:\n  probe: {{module: {}, kernel_mode: {mode}{extra}}}\n",
            test_component(component)
        ),
        Origin::Embedded("probe ccl.yaml"),
    )
    .unwrap()
}

pub fn test_component(name: &str) -> &'static str {
    TEST_COMPONENTS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, p)| *p)
        .expect("test component built")
}

fn shared(
    cell: &'static OnceLock<Arc<Loader>>,
    opts: impl FnOnce() -> LoaderOptions,
) -> Arc<Loader> {
    // Components installed on this machine must not shadow the built-in
    // ones the tests mean.
    cell.get_or_init(|| {
        Arc::new(
            Loader::new(LoaderOptions {
                installed: None,
                ..opts()
            })
            .unwrap(),
        )
    })
    .clone()
}

pub fn loader() -> Arc<Loader> {
    static L: OnceLock<Arc<Loader>> = OnceLock::new();
    shared(&L, || LoaderOptions {
        pool_instances: 200,
        ..LoaderOptions::default()
    })
}

/// A loader that runs every kernel in step with simulated time (no
/// recording ahead of it): the reference the recorded runs must equal.
pub fn in_step_loader() -> Arc<Loader> {
    static L: OnceLock<Arc<Loader>> = OnceLock::new();
    shared(&L, || LoaderOptions {
        pool_instances: 200,
        record_kernels: false,
        ..LoaderOptions::default()
    })
}

/// A loader with a small fuel budget (for runaway-guest tests).
pub fn low_fuel_loader() -> Arc<Loader> {
    static L: OnceLock<Arc<Loader>> = OnceLock::new();
    shared(&L, || LoaderOptions {
        fuel: 50_000_000,
        pool_instances: 100,
        ..LoaderOptions::default()
    })
}

pub fn run(
    bench: &str,
    t: TopologySpec,
    c: CclConfig,
    algorithm: Option<&str>,
    args: &[&str],
) -> Result<RunResult, SimError> {
    run_with(&loader(), bench, t, c, algorithm, args)
}

pub fn run_with(
    l: &Arc<Loader>,
    bench: &str,
    t: TopologySpec,
    c: CclConfig,
    algorithm: Option<&str>,
    args: &[&str],
) -> Result<RunResult, SimError> {
    run_bench(l, request(bench, t, c, algorithm, args))
}

/// [`run`] recording the op log.
pub fn run_recorded(
    bench: &str,
    t: TopologySpec,
    c: CclConfig,
    args: &[&str],
) -> Result<RunResult, SimError> {
    run_logging(request(bench, t, c, None, args), true, false)
}

/// [`run`] with the second pass (`--verify-data`, warnings only); a
/// custom algorithm by name or path.
pub fn run_verified(
    bench: &str,
    t: TopologySpec,
    c: CclConfig,
    algorithm: Option<&str>,
    args: &[&str],
) -> Result<RunResult, SimError> {
    run_logging(request(bench, t, c, algorithm, args), false, true)
}

fn run_logging(mut req: RunRequest, record: bool, verify: bool) -> Result<RunResult, SimError> {
    req.record_ops = record;
    req.verify_data = verify.then_some(kernbench::verify::Strictness::Warn);
    run_bench(&loader(), req)
}

/// The request [`run`] makes (8 GiB budget, memory digest on).
pub fn request(
    bench: &str,
    t: TopologySpec,
    c: CclConfig,
    algorithm: Option<&str>,
    args: &[&str],
) -> RunRequest {
    {
        RunRequest {
            algorithm: algorithm.map(str::to_string),
            args: args.iter().map(|s| s.to_string()).collect(),
            memory_budget: 8 << 30,
            memory_digest: true,
            ..RunRequest::new(
                bench,
                Arc::new(kernbench::topology::build(&t).expect("a valid topology")),
                c,
            )
        }
    }
}

/// The default topology.yaml with `sips` SIPs, written into `dir` (for
/// runs of the CLI).
pub fn topology_file(dir: &std::path::Path, sips: u32) -> std::path::PathBuf {
    let path = dir.join(format!("topology_{sips}_sips.yaml"));
    let text = DEFAULT_TOPOLOGY_YAML.replacen("count: 4", &format!("count: {sips}"), 1);
    std::fs::write(&path, text).unwrap();
    path
}

/// Assert that `text` holds every one of `needles`; on failure show its
/// last lines (guest output before an error can be long).
pub fn assert_contains_all(text: &str, needles: &[&str]) {
    let tail: Vec<&str> = text.lines().rev().take(6).collect();
    for n in needles {
        assert!(text.contains(n), "missing {n:?} in:\n{}", tail.join("\n"));
    }
}

/// The `kernbench-host` binary, as a user runs it.
pub fn kb() -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_kernbench-host"));
    // Nothing installed (components on this machine must not shadow the
    // built-in ones the tests mean).
    c.env(
        "KERNBENCH_DATA_DIR",
        std::env::temp_dir().join(format!(
            "kernbench-tests-nothing-installed-{}",
            std::process::id()
        )),
    );
    // The guest toolchains of the checkout (`build` of Python, JS, C).
    c.env("KERNBENCH_TOOLCHAINS", guests::toolchains());
    c
}

/// Run; assert success; stdout.
pub fn ok(cmd: &mut std::process::Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Run; assert exit status 1 without a panic; stderr.
pub fn fails(cmd: &mut std::process::Command) -> String {
    let out = cmd.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// The word after `marker` in `text` (e.g. the id a command printed after
/// "array" or "manifest"); panics naming the text when there is none.
#[allow(dead_code)]
pub fn word_after(text: &str, marker: &str) -> String {
    text.split_whitespace()
        .skip_while(|w| *w != marker)
        .nth(1)
        .unwrap_or_else(|| panic!("no word after {marker:?} in: {text}"))
        .to_string()
}

/// A loopback TCP port free at the time of asking (for a server a test
/// starts).
#[allow(dead_code)]
pub fn free_port() -> u16 {
    let [port] = free_ports();
    port
}

/// `N` distinct loopback TCP ports free at the time of asking. Each is
/// held until all are chosen: a port is released as soon as it is
/// chosen, so two `free_port` calls in a row may get the same one (CI
/// once gave slurmctld and slurmd both 38645, and the cluster never came
/// up).
#[allow(dead_code)]
pub fn free_ports<const N: usize>() -> [u16; N] {
    let held: Vec<std::net::TcpListener> = (0..N)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    std::array::from_fn(|i| held[i].local_addr().unwrap().port())
}
