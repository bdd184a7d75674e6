//! An algorithm's setup-time exports through the real host: ccl.yaml
//! parameters reaching the kernel (`kernel-args-with`), the install keys an
//! algorithm supplies when its entry is silent (`entry-defaults`), and
//! seed 003 §3's `neighbors()` rewriting the builtin table.

use crate::common;
use common::*;
use kernbench::config::{CclConfig, Origin};

fn ccl_yaml(text: &str) -> CclConfig {
    CclConfig::from_yaml(text, Origin::Embedded("test ccl.yaml"))
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// The default ccl.yaml with `extra` keys added to its ring_allreduce entry.
fn ring_with(extra: &str) -> CclConfig {
    let text = kernbench::config::DEFAULT_CCL_YAML.replace(
        "    module: kernbench.ccl.algorithms.ring_allreduce\n",
        &format!("    module: kernbench.ccl.algorithms.ring_allreduce\n    {extra}\n"),
    );
    ccl_yaml(&text)
}

fn all_right(res: &kernbench::runtime::RunResult, what: &str) {
    assert!(!res.rows.is_empty(), "{what}: no rows");
    for r in &res.rows {
        assert_eq!(r.wrong, 0, "{what}: {r:?}");
    }
}

#[test]
fn chunk_size_lets_the_ring_carry_tensors_larger_than_a_slot() {
    // 16 KiB slots; up to 256 KiB per rank: only chunks of 8192 f16 fit.
    for n in [3, 4] {
        let res = run(
            "ccl_allreduce",
            topo(n),
            ccl(),
            Some("ring_allreduce_chunked"),
            &["-b", "8", "-e", "256K", "-f", "32"],
        )
        .unwrap_or_else(|e| panic!("{n} SIPs: {e}"));
        all_right(&res, "chunked ring");
        assert_eq!(res.rows.len(), 4 * n as usize, "8 B, 256 B, 8 KiB, 256 KiB");
        let again = run(
            "ccl_allreduce",
            topo(n),
            ccl(),
            Some("ring_allreduce_chunked"),
            &["-b", "8", "-e", "256K", "-f", "32"],
        )
        .unwrap();
        assert_eq!(res.rows, again.rows, "deterministic");
    }
    // The same ring and slots without the parameter: the message is the
    // whole tile and does not fit.
    let text = kernbench::config::DEFAULT_CCL_YAML.replace("    chunk_size: 8192\n", "");
    let e = run(
        "ccl_allreduce",
        topo(3),
        ccl_yaml(&text),
        Some("ring_allreduce_chunked"),
        &["-b", "256K", "-e", "256K"],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("16384"), "{e}");
}

#[test]
fn a_chunk_the_size_of_the_tile_is_the_seed_ring_to_the_picosecond() {
    let plain = run(
        "ccl_allreduce",
        topo(4),
        ccl(),
        None,
        &["-b", "4K", "-e", "64K"],
    )
    .unwrap();
    let whole = run(
        "ccl_allreduce",
        topo(4),
        ring_with("chunk_size: 1000000"),
        None,
        &["-b", "4K", "-e", "64K"],
    )
    .unwrap();
    assert_eq!(plain.rows, whole.rows);
    let halves = run(
        "ccl_allreduce",
        topo(4),
        ring_with("chunk_size: 1024"),
        None,
        &["-b", "4K", "-e", "4K"],
    )
    .unwrap();
    all_right(&halves, "two chunks");
    assert_ne!(
        halves.rows[0].time_ps, plain.rows[0].time_ps,
        "two chunks of 2 KiB do not take the time of one of 4 KiB"
    );
}

#[test]
fn a_parameter_the_algorithm_does_not_take_fails_init_with_its_name() {
    let fails = |c: CclConfig| {
        run("ccl_allreduce", topo(2), c, None, &["-b", "8", "-e", "8"])
            .unwrap_err()
            .to_string()
    };
    let e = fails(ring_with("kernel_rounds: 3"));
    assert_contains_all(
        &e,
        &[
            "ccl.yaml algorithm 'ring_allreduce'",
            "unknown parameter kernel_rounds (this algorithm takes chunk_size)",
        ],
    );
    let e = fails(ring_with("chunk_size: lots"));
    assert!(
        e.contains("parameter chunk_size must be an integer, got \"lots\""),
        "{e}"
    );
    let e = fails(ring_with("chunk_size: 0"));
    assert!(e.contains("chunk_size must be >= 1 element, got 0"), "{e}");
    // A component without kernel-args-with takes no parameters.
    let text = format!(
        "algorithms:\n  minimal: {{module: {}, chunk_size: 4}}\n",
        test_component("minimal_algo")
    );
    let e = fails(ccl_yaml(&text));
    assert!(
        e.contains("ccl.yaml gives the parameter chunk_size, but this algorithm takes none"),
        "{e}"
    );
}

/// A ccl.yaml whose only entry is the test component `skip_ring`, with
/// just its module and `extra` keys.
fn skip_ring(extra: &str) -> CclConfig {
    ccl_yaml(&format!(
        "algorithms:\n  skip: {{module: {}{extra}}}\n",
        test_component("skip_ring")
    ))
}

/// ccl_allreduce on `n` SIPs with `c`, from `b` to `e` bytes per rank.
fn allreduce(
    n: u32,
    c: CclConfig,
    (b, e): (&str, &str),
) -> Result<kernbench::runtime::RunResult, String> {
    run("ccl_allreduce", topo(n), c, None, &["-b", b, "-e", e]).map_err(|e| e.to_string())
}

/// Every row of `res` wrong in every element.
fn all_wrong(res: &kernbench::runtime::RunResult) {
    assert!(
        res.rows.iter().all(|r| r.wrong == r.count),
        "{:?}",
        res.rows
    );
}

#[test]
fn neighbors_rewrites_the_table_as_the_seed_pattern_b() {
    // E -> rank + 2: one cycle through every rank when the count is odd.
    for n in [3, 5, 7] {
        let res = allreduce(n, skip_ring(""), ("8", "1K")).unwrap();
        all_right(&res, &format!("skip ring on {n}"));
    }
    // Two ranks: neighbors() keeps the builtin row (pattern C).
    all_right(&allreduce(2, skip_ring(""), ("8", "8")).unwrap(), "2 ranks");
    // Four: two cycles (0 2) and (1 3), so each rank holds a pair's sum.
    all_wrong(&allreduce(4, skip_ring(""), ("8", "8")).unwrap());
}

#[test]
fn an_entry_with_only_a_module_gets_the_algorithms_install_keys() {
    // skip_ring asks for 2 slots of 4096 bytes: an 8 KiB message is refused
    // with that slot size; ccl.yaml's own slot_size wins.
    let e = allreduce(3, skip_ring(""), ("8K", "8K")).unwrap_err();
    assert!(e.contains("4096"), "{e}");
    let res = allreduce(3, skip_ring(", slot_size: 8192"), ("8K", "8K")).unwrap();
    all_right(&res, "ccl.yaml's slot size");
    // The algorithm's parameter reaches its kernel: no steps, no sum.
    all_wrong(&allreduce(3, skip_ring(", kernel_steps: 0"), ("8", "8")).unwrap());
}

#[test]
fn the_seeds_lrab_entry_with_only_a_module_runs() {
    // seed 001, ADR-0050 D6, verbatim.
    let seed = ccl_yaml(
        "defaults:\n  algorithm: lrab_hierarchical_allreduce\n  n_elem: 8\n\nalgorithms:\n  lrab_hierarchical_allreduce:\n    module: kernbench.ccl.algorithms.lrab_hierarchical_allreduce\n",
    );
    let mut t = topo(3);
    t.sip.cube_mesh.w = 2;
    t.sip.cube_mesh.h = 2;
    let e = run(test_component("dist_probe"), t, seed, None, &["hier", "4"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("hier ok ws=3"), "{e}");
}
