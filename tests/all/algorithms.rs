//! The algorithm suite through the real host: the seed's ring_allreduce,
//! tree_allreduce, mesh_allreduce and lrab_hierarchical_allreduce, and
//! the bandwidth-optimal ring_rsag_allreduce, on
//! several SIP topologies, world sizes (including non powers of two), cube
//! meshes (1x1 and the default 4x4) and two sizes — data against the
//! bench's independent reference, the whole run deterministic, and the
//! second pass (`--verify-data`) clean: no mismatch, no race.

use crate::common;
use common::*;
use kernbench::config::TopologySpec;

/// Run `algorithm` through ccl_allreduce at two sizes; every element right,
/// and a second run identical to the first.
fn check(algorithm: &str, t: TopologySpec) {
    check_with(algorithm, t, &[]);
}

/// [`check`] with more ccl_allreduce arguments.
fn check_with(algorithm: &str, t: TopologySpec, extra: &[&str]) {
    let args: Vec<&str> = ["-b", "16", "-e", "16K", "-f", "1024"]
        .iter()
        .chain(extra)
        .copied()
        .collect();
    let go = || {
        run("ccl_allreduce", t.clone(), ccl(), Some(algorithm), &args)
            .unwrap_or_else(|e| panic!("{algorithm} on {} SIPs: {e}", t.system.sips.count))
    };
    let res = go();
    let ws = t.system.sips.count as usize;
    assert_eq!(res.algorithm.as_deref(), Some(algorithm));
    assert_eq!(res.rows.len(), 2 * ws, "16 B and 16 KiB on every rank");
    for r in &res.rows {
        assert_eq!(r.wrong, 0, "{algorithm}, {ws} SIPs: {r:?}");
    }
    // The second run with the second pass (--verify-data): the same rows,
    // and a replay of its op log that writes the same bytes, no race.
    let again = run_verified("ccl_allreduce", t.clone(), ccl(), Some(algorithm), &args)
        .unwrap_or_else(|e| panic!("{algorithm} verified: {e}"));
    assert_eq!(res.rows, again.rows, "{algorithm}: deterministic");
    assert_eq!(res.end_time_ps, again.end_time_ps);
    let v = again.verification.as_ref().expect("verified");
    assert!(
        v.mismatches.is_empty() && v.races.is_empty() && v.bytes > 0,
        "{algorithm} on {ws} SIPs:\n{}",
        v.report()
    );
}

#[test]
fn ring_allreduce_on_rings_tori_and_meshes() {
    for cubes in [(1, 1), (4, 4)] {
        for n in [2, 3, 5, 8] {
            check("ring_allreduce", machine(n, "ring_1d", None, cubes));
        }
        check("ring_allreduce", machine(6, "torus_2d", Some(3), cubes));
        check(
            "ring_allreduce",
            machine(4, "mesh_2d_no_wrap", Some(2), cubes),
        );
    }
}

#[test]
fn ring_rsag_allreduce_on_rings_tori_and_meshes() {
    for cubes in [(1, 1), (4, 4)] {
        for n in [2, 3, 5, 8] {
            check("ring_rsag_allreduce", machine(n, "ring_1d", None, cubes));
        }
        check(
            "ring_rsag_allreduce",
            machine(6, "torus_2d", Some(3), cubes),
        );
    }
    // Sizes that do not divide by the world size, and a tile smaller than
    // it (empty blocks).
    for n in [3, 7] {
        let args = ["-b", "2", "-e", "4K", "-f", "3"];
        let res = run(
            "ccl_allreduce",
            topo(n),
            ccl(),
            Some("ring_rsag_allreduce"),
            &args,
        )
        .unwrap();
        assert!(res.rows.iter().all(|r| r.wrong == 0), "{n}: {:?}", res.rows);
    }
}

#[test]
fn ring_rsag_allreduce_does_every_op_and_dtype_through_the_host() {
    for dtype in ["f16", "bf16", "f32", "i32", "u8", "f64"] {
        for op in ["sum", "prod", "max", "min", "avg", "mulsum"] {
            for n in [3, 4] {
                let args = ["-b", "8", "-e", "8K", "-f", "32", "-d", dtype, "-o", op];
                let res = run(
                    "ccl_allreduce",
                    topo(n),
                    ccl(),
                    Some("ring_rsag_allreduce"),
                    &args,
                )
                .unwrap_or_else(|e| panic!("{dtype} {op} on {n}: {e}"));
                assert_eq!(
                    res.rows.len(),
                    3 * n as usize,
                    "{dtype} {op}: 3 sizes per rank"
                );
                for r in &res.rows {
                    assert_eq!(r.wrong, 0, "{dtype} {op} on {n}: {r:?}");
                    assert_eq!((r.redop.as_str(), r.dtype.name()), (op, dtype));
                }
            }
        }
    }
}

#[test]
fn tree_allreduce_on_rings_tori_and_meshes() {
    for cubes in [(1, 1), (4, 4)] {
        for n in [2, 3, 5, 8] {
            check("tree_allreduce", machine(n, "ring_1d", None, cubes));
        }
        check("tree_allreduce", machine(6, "torus_2d", Some(3), cubes));
        check(
            "tree_allreduce",
            machine(4, "mesh_2d_no_wrap", Some(2), cubes),
        );
    }
}

#[test]
fn mesh_allreduce_on_rings_tori_and_meshes() {
    for cubes in [(1, 1), (4, 4)] {
        for n in [2, 3, 5] {
            check("mesh_allreduce", machine(n, "ring_1d", None, cubes));
        }
        check("mesh_allreduce", machine(6, "torus_2d", Some(3), cubes));
        check(
            "mesh_allreduce",
            machine(6, "mesh_2d_no_wrap", Some(2), cubes),
        );
        check(
            "mesh_allreduce",
            machine(9, "mesh_2d_no_wrap", Some(3), cubes),
        );
    }
}

/// lrab_hierarchical_allreduce through ccl_allreduce with one tile per
/// cube (`--cubes`, every cube a contributor), at two tile sizes; and
/// through the probe bench that places its tiles itself.
fn check_hierarchical(t: TopologySpec) {
    let cubes = (t.sip.cube_mesh.w * t.sip.cube_mesh.h).to_string();
    check_with(
        "lrab_hierarchical_allreduce",
        t.clone(),
        &["--cubes", &cubes],
    );
    let n = t.system.sips.count;
    let e = run(
        test_component("dist_probe"),
        t.clone(),
        ccl(),
        None,
        &["hier", &cubes],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains(&format!("hier ok ws={n}")),
        "{n} SIPs, {cubes} cubes: {e}"
    );
}

#[test]
fn lrab_hierarchical_allreduce_on_rings_tori_and_meshes() {
    for cubes in [(1, 1), (4, 4), (3, 2)] {
        for n in [1, 2, 3, 5] {
            check_hierarchical(machine(n, "ring_1d", None, cubes));
        }
        check_hierarchical(machine(6, "torus_2d", Some(3), cubes));
        check_hierarchical(machine(4, "torus_2d", Some(2), cubes));
        check_hierarchical(machine(6, "mesh_2d_no_wrap", Some(2), cubes));
    }
}

#[test]
fn a_tcm_filled_by_ipcq_rings_says_so() {
    // mesh_allreduce with its slots in TCM: the centre of a 3x3 mesh has
    // 4 directions x 4 slots x 1 MiB = the whole 16 MiB TCM.
    let text = kernbench::config::DEFAULT_CCL_YAML.replace(
        "buffer_kind: sram        # 4 directions",
        "buffer_kind: tcm         # 4 directions",
    );
    let c =
        kernbench::config::CclConfig::from_yaml(&text, kernbench::config::Origin::Embedded("t"))
            .unwrap();
    let t = machine(9, "mesh_2d_no_wrap", Some(3), (4, 4));
    let e = run(
        "ccl_allreduce",
        t,
        c,
        Some("mesh_allreduce"),
        &["-b", "16", "-e", "16"],
    )
    .unwrap_err()
    .to_string();
    assert_contains_all(
        &e,
        &[
            "sip4.cube0.pe0: sip4.cube0.pe0.tcm (4 IPCQ receive ring(s) hold 16.0 MiB of it",
            "buffer_kind",
            "is full",
        ],
    );
}

#[test]
fn ring_allreduce_on_a_mesh_table_names_the_edge_pe_and_its_missing_direction() {
    // A one-row mesh_2d table has no W at its west end and no E at its
    // east end: those kernels fail while their peers wait for them.
    let text = kernbench::config::DEFAULT_CCL_YAML.replace(
        "    topology: ring_1d        # E = rank+1, W = rank-1\n",
        "    topology: mesh_2d\n",
    );
    let c =
        kernbench::config::CclConfig::from_yaml(&text, kernbench::config::Origin::Embedded("t"))
            .unwrap();
    let e = run("ccl_allreduce", topo(4), c, None, &["-b", "8", "-e", "8"])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "tl.recv(dir=\"W\") on sip0.cube0.pe0: direction \"W\" is not installed on sip0.cube0.pe0 (installed: E)"
        ),
        "{e}"
    );
    assert!(
        // The guest backtrace names the algorithm's own code (its ring
        // helper may be inlined into its kernel).
        e.contains("ring_allreduce::helpers")
            || e.contains("helpers::ring_allreduce")
            || e.contains("ring_allreduce.wasm!<ring_allreduce::"),
        "backtrace: {e}"
    );
    assert!(!e.contains("deadlock"), "{e}");
}

#[test]
fn lrab_through_ccl_allreduce_needs_and_gets_one_tile_per_cube() {
    // The default machine: 4 SIPs of 4x4 cubes; every cube's tile is a
    // contribution (64 of them), as ccl_allreduce --cubes checks.
    let res = run(
        "ccl_allreduce",
        topo(4),
        ccl(),
        Some("lrab_hierarchical_allreduce"),
        &["-b", "2", "-e", "4K", "-f", "8", "--cubes", "16"],
    )
    .unwrap();
    // The ring cannot do that with per-cube tiles: it runs on cube 0 only.
    let ring = run(
        "ccl_allreduce",
        topo(4),
        ccl(),
        Some("ring_allreduce"),
        &["-b", "32", "-e", "32", "--cubes", "16"],
    )
    .unwrap_err()
    .to_string();
    assert!(ring.contains("single_shard_per_rank validator"), "{ring}");
    // Tiles of 2 B, 16 B, 128 B, 1 KiB (16 of them per rank).
    assert_eq!(res.rows.len(), 4 * 4, "{:?}", res.rows);
    assert_eq!(res.rows.iter().map(|r| r.size_bytes).max(), Some(1024));
    assert!(res.rows.iter().all(|r| r.wrong == 0), "{:?}", res.rows);
    // Without --cubes the bench asks the algorithm's placement and
    // places the tensor over the 16 cubes itself, saying so.
    let auto = run(
        "ccl_allreduce",
        topo(4),
        ccl(),
        Some("lrab_hierarchical_allreduce"),
        &["-b", "2", "-e", "4K", "-f", "8"],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        kernbench::report::aggregate(&auto.rows, None),
        kernbench::report::aggregate(&res.rows, None),
        "the same rows as --cubes 16"
    );
    assert!(
        auto.notes
            .iter()
            .any(|n| n.contains("16 tiles over 16 cubes")),
        "{:?}",
        auto.notes
    );
    // A placement the validator does not take is refused before any
    // kernel runs.
    let e = run(
        "ccl_allreduce",
        topo(4),
        ccl(),
        Some("lrab_hierarchical_allreduce"),
        &["-b", "32", "-e", "32", "--cubes", "4"],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("one_shard_per_cube validator of 'lrab_hierarchical_allreduce'")
            && e.contains("the tensor has 4 shard(s) on SIP")
            && e.contains("needs 16"),
        "{e}"
    );
}
