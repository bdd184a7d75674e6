//! topology.yaml `overrides` (issue 63): a SIP whose matrix units are
//! slower charges its GEMMs longer; a slower inter-SIP link slows the
//! collectives over it by its bytes' extra time; a link that is down is
//! routed around, and links down that cut ranks apart are refused when
//! the tables are installed.

use crate::common::*;
use crate::groups::group_ccl;
use kernbench::config::TopologySpec;
use kernbench::runtime::RunResult;

/// The default machine of `n` SIPs with `overrides` (YAML) added.
fn with_overrides(n: u32, overrides: &str) -> TopologySpec {
    let text = kernbench::config::DEFAULT_TOPOLOGY_YAML.replace("count: 4", &format!("count: {n}"))
        + "\noverrides:\n"
        + overrides;
    TopologySpec::from_yaml(&text, kernbench::config::Origin::Embedded("t")).unwrap()
}

fn probe(t: TopologySpec, args: &[&str]) -> Result<RunResult, kernbench::error::SimError> {
    run(test_component("async_probe"), t, group_ccl(), None, args)
}

fn row(res: &RunResult, name: &str) -> u64 {
    let r = res.rows.iter().find(|r| r.collective == name).unwrap();
    assert_eq!(r.wrong, 0, "{name}");
    r.time_ps
}

/// `gemm_scale: 0.5` on SIP 0: a compute-bound `ahbm.gemm` there takes
/// its overhead plus twice its compute time; SIP 1 keeps its time.
#[test]
fn a_slower_sip_charges_its_gemms_longer() {
    let args = ["gemm", "64", "2048", "2048"];
    let fast = probe(topo(4), &args).unwrap();
    let slow = probe(
        with_overrides(4, "  sips:\n    - sips: [0]\n      gemm_scale: 0.5\n"),
        &args,
    )
    .unwrap();
    let overhead = (topo(4).pe.gemm.overhead_ns * 1e3) as u64;
    let (f, s) = (row(&fast, "gemm"), row(&slow, "gemm"));
    let want = overhead + 2 * (f - overhead);
    assert!(
        s.abs_diff(want) <= 2,
        "slow {s} ps, fast {f} ps, want {want}"
    );
}

/// `bandwidth_gbps: 50` between SIPs 0 and 1: the all-reduce of the
/// group {0, 1} takes at least the extra time of its bytes on the slower
/// link (a 2-rank ring sends each rank's N elements across it).
#[test]
fn a_slower_link_slows_the_collectives_over_it() {
    let n: u64 = 1 << 13;
    let args = ["one_pair", "8192"];
    let fast = row(&probe(topo(4), &args).unwrap(), "pairs");
    let slow_t = with_overrides(
        4,
        "  links:\n    - between: [0, 1]\n      bandwidth_gbps: 50\n",
    );
    let slow = row(&probe(slow_t, &args).unwrap(), "pairs");
    let bytes = n * 4;
    let extra = bytes * 1000 / 50 - bytes * 1000 / 100; // ps at 50 vs 100 GB/s
    assert!(
        slow >= fast + extra,
        "slow {slow} ps, fast {fast} ps, extra {extra} ps"
    );
}

/// One link of a ring of 4 down: the ring's neighbours still reach each
/// other the long way round, slower, with the right bytes. Two links
/// down cut the ring in two: refused when the IPCQ tables are installed,
/// naming the direction and the links down.
#[test]
fn a_link_down_is_routed_around_and_a_cut_is_refused() {
    let args = ["blocking", "4096"];
    let fast = row(&probe(topo(4), &args).unwrap(), "all_reduce");
    let around = with_overrides(4, "  links:\n    - between: [0, 1]\n      down: true\n");
    let slow = row(&probe(around, &args).unwrap(), "all_reduce");
    assert!(slow > fast, "around {slow} ps, direct {fast} ps");
    let cut = with_overrides(
        4,
        "  links:\n    - between: [0, 1]\n      down: true\n    - between: [2, 3]\n      down: true\n",
    );
    let e = probe(cut, &args).unwrap_err().to_string();
    assert!(
        e.contains("which no route reaches") && e.contains("[[0, 1], [2, 3]]"),
        "{e}"
    );
    let bad = kernbench::config::DEFAULT_TOPOLOGY_YAML.to_string()
        + "\noverrides:\n  links:\n    - between: [0, 2]\n      down: true\n";
    let spec = TopologySpec::from_yaml(&bad, kernbench::config::Origin::Embedded("t")).unwrap();
    let e = kernbench::topology::build(&spec).unwrap_err().to_string();
    assert!(
        e.contains("no inter-SIP link joins SIP 0 and SIP 2") && e.contains("[1, 3]"),
        "{e}"
    );
}

/// A straggler is visible: `train_step --tp 4 --dp 2` with SIP 5 at half
/// GEMM speed (and HBM fast enough that every GEMM of the step is
/// compute-bound) gives rank 5 exactly its GEMMs' extra compute time
/// (the closed form: each GEMM's 2·m·n·k at the SIP's peak, once more)
/// and the other ranks none. (The step itself is no closed form here:
/// delaying rank 5 shifts when the DP buckets of the two DP groups meet
/// on the ring's links, and on this machine the step ends 0.4 µs sooner.)
#[test]
fn a_straggler_s_extra_compute_is_its_closed_form() {
    let fast_hbm = "bandwidth_gbps: 100000   # per stack";
    let machine = |o: &str| {
        let text = kernbench::config::DEFAULT_TOPOLOGY_YAML
            .replace("count: 4", "count: 8")
            .replace("bandwidth_gbps: 800      # per stack", fast_hbm)
            + o;
        TopologySpec::from_yaml(&text, kernbench::config::Origin::Embedded("t")).unwrap()
    };
    let (h, s, tp, layers) = (512u64, 512u64, 4u64, 2u64);
    let args = ["--tp", "4", "--dp", "2", "--hidden", "512", "--seq", "512"];
    let fast = run("train_step", machine(""), ccl(), None, &args).unwrap();
    let slow_t = machine("\noverrides:\n  sips:\n    - sips: [5]\n      gemm_scale: 0.5\n");
    let slow = run("train_step", slow_t.clone(), ccl(), None, &args).unwrap();
    // The GEMMs of one layer's forward and backward (train_step's docs).
    let fwd = [
        (s, 3 * h / tp, h),
        (s, s, h / tp),
        (s, h / tp, s),
        (s, h, h / tp),
        (s, 4 * h / tp, h),
        (s, h, 4 * h / tp),
    ];
    let pes = (slow_t.cubes_per_sip() * slow_t.pes_per_cube()) as f64;
    let peak = slow_t.pe.gemm.throughput_tflops.bf16 * 1e12 * pes;
    let extra: f64 = fwd
        .iter()
        .map(|&(m, n, k)| 3.0 * (2 * m * n * k) as f64 / peak * 1e12)
        .sum::<f64>()
        * layers as f64;
    let compute =
        |r: &RunResult, rank: u32| r.ranks.iter().find(|x| x.rank == rank).unwrap().compute_ps;
    let grew = compute(&slow, 5) - compute(&fast, 5);
    let calls = 18.0 * layers as f64;
    assert!(
        (grew as f64 - extra).abs() <= calls,
        "rank 5's compute grew {grew} ps, closed form {extra:.0} ps"
    );
    for r in [0, 1, 4, 6] {
        assert_eq!(compute(&slow, r), compute(&fast, r), "rank {r}");
    }
}
