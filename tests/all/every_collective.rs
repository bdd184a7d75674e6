//! Every collective of `torch.distributed` through the real host with the
//! ring algorithms of the default ccl.yaml: the nccl-tests benches
//! (`ccl_allgather`, `ccl_reducescatter`, `ccl_broadcast`, `ccl_reduce`,
//! `ccl_alltoall`, `ccl_sendrecv`, and `ccl_allreduce` with
//! `ring_rsag_allreduce`) on rings, tori and meshes of several world sizes
//! (non-powers of two included), every dtype and the reductions' ops:
//! every element equals the independent reference of
//! `kernbench_guest::reference`, the run is deterministic, and its
//! second pass (`--verify-data`) finds no mismatch and no race.

use crate::common;
use common::*;
use kernbench::config::TopologySpec;

/// Run `bench` with `args` on `t`; every element right on every rank,
/// `sizes` rows per reporting rank, identical again with the second pass
/// clean.
fn check(bench: &str, algorithm: Option<&str>, t: &TopologySpec, args: &[&str], sizes: usize) {
    let n = t.system.sips.count;
    let what = format!(
        "{bench} {args:?} on {n} SIPs ({:?})",
        t.system.sips.topology
    );
    let res =
        run(bench, t.clone(), ccl(), algorithm, args).unwrap_or_else(|e| panic!("{what}: {e}"));
    let reporting = if bench == "ccl_sendrecv" {
        n - n % 2
    } else {
        n
    };
    assert_eq!(
        res.rows.len(),
        sizes * reporting as usize,
        "{what}: {:?}",
        res.rows
    );
    for r in &res.rows {
        assert_eq!(r.wrong, 0, "{what}: {r:?}");
        assert!(r.time_ps > 0, "{what}: {r:?}");
    }
    let again = run_verified(bench, t.clone(), ccl(), algorithm, args)
        .unwrap_or_else(|e| panic!("{what} verified: {e}"));
    assert_eq!(res.rows, again.rows, "{what}: deterministic");
    assert_eq!(res.end_time_ps, again.end_time_ps, "{what}");
    let v = again.verification.as_ref().expect("verified");
    assert!(
        v.mismatches.is_empty() && v.races.is_empty() && v.bytes > 0,
        "{what}:\n{}",
        v.report()
    );
}

fn machines() -> Vec<TopologySpec> {
    vec![
        machine(2, "ring_1d", None, (1, 1)),
        machine(3, "ring_1d", None, (1, 1)),
        machine(5, "ring_1d", None, (1, 1)),
        machine(4, "ring_1d", None, (4, 4)),
        machine(6, "torus_2d", Some(3), (1, 1)),
        machine(6, "mesh_2d_no_wrap", Some(2), (1, 1)),
    ]
}

/// 24 B .. 6 KiB: elements that do not divide by most world sizes, and
/// blocks below one element per rank at the smallest size.
const SWEEP: [&str; 6] = ["-b", "24", "-e", "6K", "-f", "16"];
const SIZES: usize = 3;

fn sweep(extra: &[&'static str]) -> Vec<&'static str> {
    SWEEP.iter().chain(extra).copied().collect()
}

#[test]
fn data_moving_collectives_deliver_every_element() {
    for t in machines() {
        for bench in [
            "ccl_allgather",
            "ccl_broadcast",
            "ccl_alltoall",
            "ccl_sendrecv",
        ] {
            for dtype in ["f16", "i32"] {
                check(bench, None, &t, &sweep(&["-d", dtype]), SIZES);
            }
        }
        let last = (t.system.sips.count - 1).to_string();
        let root: &'static str = Box::leak(last.into_boxed_str());
        check(
            "ccl_broadcast",
            None,
            &t,
            &sweep(&["-r", root, "-d", "bf16"]),
            SIZES,
        );
    }
}

#[test]
fn reducing_collectives_reduce_every_element_with_every_op() {
    for t in machines() {
        for bench in ["ccl_reducescatter", "ccl_reduce"] {
            for (dtype, op) in [
                ("f16", "sum"),
                ("bf16", "max"),
                ("f32", "avg"),
                ("i32", "prod"),
                ("f32", "mulsum"),
                ("i8", "mulsum"),
            ] {
                check(bench, None, &t, &sweep(&["-d", dtype, "-o", op]), SIZES);
            }
        }
        check(
            "ccl_reduce",
            None,
            &t,
            &sweep(&["-r", "1", "-o", "min"]),
            SIZES,
        );
        check(
            "ccl_allreduce",
            Some("ring_rsag_allreduce"),
            &t,
            &sweep(&["-d", "f32", "-o", "min"]),
            SIZES,
        );
    }
}

/// The seed's all-reduce algorithms (sum of f16 only, once) do every op
/// and dtype, the hierarchical one over every cube of its SIPs.
#[test]
fn the_seed_all_reduce_algorithms_do_every_op_and_dtype() {
    for t in machines() {
        for (algorithm, dtype, op) in [
            ("ring_allreduce", "bf16", "prod"),
            ("ring_allreduce", "f32", "avg"),
            ("tree_allreduce", "i32", "max"),
            ("tree_allreduce", "f16", "avg"),
            ("mesh_allreduce", "f32", "min"),
            ("mesh_allreduce", "bf16", "avg"),
            ("ring_allreduce", "f16", "mulsum"),
            ("tree_allreduce", "u8", "mulsum"),
            ("mesh_allreduce", "f64", "mulsum"),
            ("rabenseifner_allreduce", "bf16", "mulsum"),
            ("double_tree_allreduce", "i64", "mulsum"),
            ("ring_rsag_allreduce", "u32", "mulsum"),
        ] {
            let args = sweep(&["-d", dtype, "-o", op]);
            check("ccl_allreduce", Some(algorithm), &t, &args, SIZES);
        }
        let cube = t.sip.cube_mesh;
        let cubes: &'static str = Box::leak((cube.w * cube.h).to_string().into_boxed_str());
        for (dtype, op) in [
            ("f32", "avg"),
            ("i32", "max"),
            ("f16", "sum"),
            ("f16", "mulsum"),
        ] {
            let args = sweep(&["-d", dtype, "-o", op, "--cubes", cubes]);
            check(
                "ccl_allreduce",
                Some("lrab_hierarchical_allreduce"),
                &t,
                &args,
                SIZES,
            );
        }
    }
}

/// `-d all`, `-o all` and `-r all` loop as nccl-tests (dtype, op, root),
/// every case checked; `-c N` checks N runs and reports the same rows.
#[test]
fn all_dtypes_ops_and_roots_loop_and_check_iterations_repeat() {
    let t = topo(3);
    let sizes = ["-b", "8", "-e", "64", "-f", "8"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        sizes.iter().chain(extra).copied().collect()
    };
    let res = run(
        "ccl_allreduce",
        t.clone(),
        ccl(),
        None,
        &with(&["-d", "all", "-o", "all"]),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // The ten dtypes in nccl-tests' order, each with 6 ops; 2 sizes, 3 ranks.
    assert_eq!(res.rows.len(), 10 * 6 * 2 * 3);
    assert!(res.rows.iter().all(|r| r.wrong == 0), "{:?}", res.rows);
    let pairs: Vec<(String, String)> = res
        .rows
        .iter()
        .map(|r| (r.dtype.name().to_string(), r.redop.clone()))
        .collect();
    let first = |d: &str, o: &str| pairs.iter().position(|p| p == &(d.into(), o.into()));
    assert!(first("i8", "sum") < first("u8", "sum"), "{pairs:?}");
    assert!(first("i32", "max") < first("u32", "sum"), "{pairs:?}");
    assert!(first("u64", "min") < first("f16", "sum"), "{pairs:?}");
    assert!(first("f16", "avg") < first("f32", "sum"), "{pairs:?}");
    assert!(first("f64", "avg") < first("bf16", "sum"), "{pairs:?}");
    assert!(first("i8", "avg") < first("i8", "mulsum"), "{pairs:?}");
    assert!(first("bf16", "mulsum").is_some(), "{pairs:?}");
    assert!(first("i32", "avg") < first("u32", "sum"), "{pairs:?}");
    let res = run(
        "ccl_reduce",
        t.clone(),
        ccl(),
        None,
        &with(&["-r", "all", "-d", "f32", "-o", "max"]),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let rows = kernbench::report::aggregate(&res.rows, None);
    let roots: Vec<i64> = rows.iter().map(|r| r.root).collect();
    assert_eq!(roots, [0, 0, 1, 1, 2, 2], "root, then size");
    assert!(rows.iter().all(|r| r.wrong == 0), "{rows:?}");
    let once = run("ccl_broadcast", t.clone(), ccl(), None, &with(&[])).unwrap();
    let thrice = run("ccl_broadcast", t.clone(), ccl(), None, &with(&["-c", "3"])).unwrap();
    // The same rows (the ranks may report in another order).
    assert_eq!(
        kernbench::report::aggregate(&once.rows, None),
        kernbench::report::aggregate(&thrice.rows, None)
    );
    assert!(
        thrice.end_time_ps > once.end_time_ps,
        "the further checks run"
    );
    let e = run("ccl_allreduce", t, ccl(), None, &with(&["-d", "f8e4m3"]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("-d f8e4m3: fp8 is not modelled"), "{e}");
}

/// Every algorithm of the embedded ccl.yaml (but `hello_send`, a
/// stand-in that does not reduce) through its nccl-tests bench with every
/// dtype (`-d all`), op (`-o all`) and root (`-r all`) on rings of 2, 3,
/// 4, 5 and 8 SIPs of 2×2 cubes, in both of nccl-tests' variants (out
/// of place where the algorithm runs it): every element of every case
/// equals the reference. Exactly: the inputs make every reduction exact in every
/// dtype and order, so nccl-tests' tolerance of 0 holds for every dtype
/// and op (its 2 ULP for floating `avg` are not needed: the sum is exact
/// and scaled once).
#[test]
fn every_builtin_algorithm_does_every_dtype_op_and_root_on_2_to_8_ranks() {
    const BENCH_OF: [(&str, &str, &str); 21] = [
        ("ring_allreduce", "all_reduce", "ccl_allreduce"),
        ("ring_allreduce_tcm", "all_reduce", "ccl_allreduce"),
        ("ring_allreduce_sram", "all_reduce", "ccl_allreduce"),
        ("ring_allreduce_hbm", "all_reduce", "ccl_allreduce"),
        ("ring_allreduce_chunked", "all_reduce", "ccl_allreduce"),
        ("ring_rsag_allreduce", "all_reduce", "ccl_allreduce"),
        ("ring_rsag_allreduce_groups", "all_reduce", "ccl_allreduce"),
        ("rabenseifner_allreduce", "all_reduce", "ccl_allreduce"),
        ("double_tree_allreduce", "all_reduce", "ccl_allreduce"),
        ("tree_allreduce", "all_reduce", "ccl_allreduce"),
        ("mesh_allreduce", "all_reduce", "ccl_allreduce"),
        ("lrab_hierarchical_allreduce", "all_reduce", "ccl_allreduce"),
        ("ring_allgather", "all_gather", "ccl_allgather"),
        ("ring_reducescatter", "reduce_scatter", "ccl_reducescatter"),
        ("ring_broadcast", "broadcast", "ccl_broadcast"),
        ("binomial_broadcast", "broadcast", "ccl_broadcast"),
        ("ring_reduce", "reduce", "ccl_reduce"),
        ("binomial_reduce", "reduce", "ccl_reduce"),
        ("ring_alltoall", "all_to_all", "ccl_alltoall"),
        ("direct_alltoall", "all_to_all", "ccl_alltoall"),
        ("hello_send", "", ""),
    ];
    // A new built-in algorithm must join the table.
    let ours: std::collections::BTreeSet<&str> = BENCH_OF.iter().map(|&(a, _, _)| a).collect();
    let embedded = ccl();
    let theirs: std::collections::BTreeSet<&str> =
        embedded.algorithms.keys().map(String::as_str).collect();
    assert_eq!(ours, theirs, "every built-in algorithm is checked here");
    // The algorithms that run in place only (no `out-of-place` export):
    // none of the built-ins.
    const IN_PLACE_ONLY: [&str; 0] = [];
    let dtypes = [
        "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
        "bfloat16",
    ];
    for ws in [2u32, 3, 4, 5, 8] {
        let t = machine(ws, "ring_1d", None, (2, 2));
        for (algorithm, collective, bench) in BENCH_OF.iter().filter(|b| !b.1.is_empty()) {
            let choice = format!("{collective}={algorithm}");
            let reduces = matches!(*collective, "all_reduce" | "reduce_scatter" | "reduce");
            let rooted = matches!(*collective, "broadcast" | "reduce");
            let mut args = vec!["-b", "64", "-e", "64", "-d", "all"];
            if reduces {
                args.extend(["-o", "all"]);
            }
            if rooted {
                args.extend(["-r", "all"]);
            }
            let what = format!("{algorithm} on {ws} ranks");
            let res = run(bench, t.clone(), ccl(), Some(&choice), &args)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let rows = kernbench::report::aggregate(&res.rows, None);
            // Every dtype with every op; every root.
            let ops = if reduces { 10 * 6 } else { 10 };
            let roots = if rooted { ws as usize } else { 1 };
            assert_eq!(rows.len(), ops * roots, "{what}: {rows:?}");
            // Both of nccl-tests' blocks, each checked, where the
            // algorithm runs both; else the out-of-place block is N/A and
            // the header says why.
            let both = !IN_PLACE_ONLY.contains(algorithm);
            for r in &rows {
                assert!(dtypes.contains(&r.dtype.as_str()), "{what}: {r:?}");
                assert_eq!(r.wrong, 0, "{what}: {r:?}");
                assert!(r.time_ps > 0, "{what}: {r:?}");
                let ip = r.in_place.as_ref().expect("the in-place block runs");
                assert_eq!(ip.wrong, Some(0), "{what}: {r:?}");
                match &r.out_of_place {
                    Some(oop) => {
                        assert!(both, "{what}: {r:?}");
                        assert_eq!(oop.wrong, Some(0), "{what}: {r:?}");
                    }
                    None => assert!(!both, "{what}: {r:?}"),
                }
            }
            let noted = res.notes.iter().any(|n| {
                n.starts_with("out-of-place block N/A: ") && n.contains(&format!("'{algorithm}'"))
            });
            assert_eq!(noted, !both, "{what}: {:?}", res.notes);
        }
    }
}

/// An algorithm that runs all-reduce in place only (the seed's ABI, no
/// `out-of-place` export): its out-of-place block is N/A, the header says
/// why and names the ccl.yaml algorithm that does it, the in-place block
/// runs and is checked; the kernels get no `out-ptr` they do not expect.
#[test]
fn an_in_place_only_algorithm_leaves_the_out_of_place_block_na_and_says_why() {
    let text = format!(
        "defaults: {{algorithm: ring_allreduce}}\nalgorithms:\n  minimal: {{module: {}}}\n  ring_allreduce: {{module: ring_allreduce}}\n",
        test_component("minimal_algo")
    );
    let c = kernbench::config::CclConfig::from_yaml(
        &text,
        kernbench::config::Origin::Embedded("test ccl.yaml"),
    )
    .unwrap();
    let args = ["-b", "8", "-e", "64"];
    let res = run(
        "ccl_allreduce",
        topo(2),
        c,
        Some("all_reduce=minimal"),
        &args,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let rows = kernbench::report::aggregate(&res.rows, None);
    assert_eq!(rows.len(), 4, "{rows:?}");
    for r in &rows {
        assert_eq!(r.out_of_place, None, "{r:?}");
        let ip = r.in_place.as_ref().expect("in place runs");
        assert_eq!(ip.wrong, Some(0), "{r:?}");
        assert_eq!(r.time_ps, ip.time_ps, "the headline is the in-place block");
    }
    let note = res
        .notes
        .iter()
        .find(|n| n.starts_with("out-of-place block N/A: "))
        .unwrap_or_else(|| panic!("{:?}", res.notes));
    assert_contains_all(
        note,
        &[
            "all_reduce (sum, f16) out of place: algorithm 'minimal' runs it in place only",
            "ring_allreduce does it: choose one with --algorithm all_reduce=ring_allreduce",
        ],
    );
    assert_eq!(
        res.notes.iter().filter(|n| n.contains("N/A")).count(),
        1,
        "one note, not one per size: {:?}",
        res.notes
    );
}

/// In place, an all-to-all loads a round's p pieces before the first
/// arrives: its rounds are p times smaller, so 16 ranks of 1 MiB f32
/// pieces fit the TCM beside the ring's 8 MiB of slots (the pieces at
/// once did not: `tcm ... is full`).
#[test]
fn an_in_place_all_to_all_of_large_pieces_fits_the_tcm() {
    let res = run(
        "ccl_alltoall",
        topo(16),
        ccl(),
        Some("all_to_all=ring_alltoall"),
        &["-d", "float", "-b", "16M", "-e", "16M"],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let rows = kernbench::report::aggregate(&res.rows, None);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0];
    assert_eq!(
        r.out_of_place.as_ref().and_then(|b| b.wrong),
        Some(0),
        "{r:?}"
    );
    assert_eq!(r.in_place.as_ref().and_then(|b| b.wrong), Some(0), "{r:?}");
}

#[test]
fn iterations_report_the_mean_and_warmups_are_untimed() {
    let t = topo(4);
    let args = ["-b", "4K", "-e", "4K"];
    let one = run("ccl_allgather", t.clone(), ccl(), None, &args).unwrap();
    let many = run(
        "ccl_allgather",
        t,
        ccl(),
        None,
        &["-b", "4K", "-e", "4K", "-n", "3", "-w", "2"],
    )
    .unwrap();
    // The simulation is deterministic: every iteration takes as long.
    assert_eq!(one.rows.len(), many.rows.len());
    for (a, b) in one.rows.iter().zip(&many.rows) {
        assert_eq!(a.time_ps, b.time_ps, "{a:?} vs {b:?}");
        assert_eq!(b.wrong, 0);
    }
    assert!(
        many.end_time_ps > 4 * one.end_time_ps,
        "five runs took longer than four"
    );
}

#[test]
fn a_collective_without_an_algorithm_is_refused_clearly() {
    let mut c = ccl();
    c.defaults.algorithms.clear();
    let e = run("ccl_alltoall", topo(2), c, None, &["-b", "64", "-e", "64"])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("all_to_all: no algorithm for it; tried 'ring_allreduce' (all_reduce)")
            && e.contains("--algorithm all_to_all=<name>"),
        "{e}"
    );
    // Asked for by the command line: an algorithm that does not implement
    // it is refused, naming what it does implement.
    let e = run(
        "ccl_alltoall",
        topo(2),
        ccl(),
        Some("all_to_all=ring_allgather"),
        &["-b", "64", "-e", "64"],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("algorithm 'ring_allgather' (chosen by --algorithm all_to_all=ring_allgather) does not implement it; it implements all_gather"),
        "{e}"
    );
}

/// The algorithms on the `full_mesh` table (one queue per pair of ranks),
/// their directions added to the ring installed for the all-reduce.
#[test]
fn direct_and_tree_algorithms_deliver_every_element() {
    for t in machines() {
        let n = t.system.sips.count;
        let last: &'static str = Box::leak((n - 1).to_string().into_boxed_str());
        check(
            "ccl_allreduce",
            Some("rabenseifner_allreduce"),
            &t,
            &sweep(&["-d", "bf16", "-o", "max"]),
            SIZES,
        );
        check(
            "ccl_allreduce",
            Some("all_reduce=rabenseifner_allreduce"),
            &t,
            &sweep(&["-d", "f32", "-o", "avg"]),
            SIZES,
        );
        check(
            "ccl_broadcast",
            Some("broadcast=binomial_broadcast"),
            &t,
            &sweep(&["-r", last, "-d", "i32"]),
            SIZES,
        );
        check(
            "ccl_reduce",
            Some("reduce=binomial_reduce"),
            &t,
            &sweep(&["-r", last, "-o", "sum"]),
            SIZES,
        );
        check(
            "ccl_alltoall",
            Some("all_to_all=direct_alltoall"),
            &t,
            &sweep(&["-d", "f16"]),
            SIZES,
        );
        check(
            "ccl_allreduce",
            Some("double_tree_allreduce"),
            &t,
            &sweep(&["-d", "i32", "-o", "min"]),
            SIZES,
        );
        check(
            "ccl_allreduce",
            Some("double_tree_allreduce"),
            &t,
            // several waves of pieces (the roots hold one wave at a time)
            &["-b", "6M", "-e", "6M", "-d", "f16"],
            1,
        );
    }
}

#[test]
fn an_algorithm_whose_queues_clash_with_the_installed_ones_is_refused() {
    // ring_allgather with other slots on the installed ring's directions.
    let mut c = ccl();
    let e = c.algorithms.get_mut("ring_allgather").unwrap();
    (e.slot_kib, e.slot_size) = (None, Some(16 * 1024));
    let e = run("ccl_allgather", topo(2), c, None, &["-b", "64", "-e", "64"])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("all_gather: algorithm 'ring_allgather' (chosen by ccl.yaml defaults.algorithms.all_gather) cannot share the process group's IPCQ: IPCQ direction E of sip0.cube0.pe0: installed with 4 slots of 1048576 bytes")
            && e.contains("asked for 4 slots of 16384 bytes"),
        "{e}"
    );
}
