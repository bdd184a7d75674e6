//! Process groups (`dist.new_group`, issue 63): every collective on
//! groups of several shapes — consecutive pairs, strided, single ranks,
//! the whole world — checked against its definition over the group's
//! ranks, each group with its own communicator; PyTorch's rules for a
//! rank outside a group and for ranks that disagree on a group.

use crate::common::guests;
use crate::common::*;
use kernbench::runtime::{ReportRecord, RunResult};

/// ccl.yaml with slots of 64 KiB: every group's communicator has rings
/// of its own, and the default 4 x 1 MiB a ring leaves no room in a
/// PE's 16 MiB TCM beside the default group's.
pub(crate) fn group_ccl() -> kernbench::config::CclConfig {
    let text = kernbench::config::DEFAULT_CCL_YAML.replace("slot_kib: 1024", "slot_kib: 64");
    kernbench::config::CclConfig::from_yaml(&text, kernbench::config::Origin::Embedded("t"))
        .unwrap()
}

/// `group_probe COLLECTIVE LAYOUT N [ALGORITHM]` on `t`: its rows.
fn probe(
    t: kernbench::config::TopologySpec,
    args: &[&str],
) -> Result<RunResult, kernbench::error::SimError> {
    run(test_component("group_probe"), t, group_ccl(), None, args)
}

/// The rows of a run, each checked: no wrong element, some time taken.
fn checked_rows(res: &RunResult, what: &str) -> Vec<ReportRecord> {
    assert!(!res.rows.is_empty(), "{what}: no rows");
    for r in &res.rows {
        assert_eq!(
            r.wrong, 0,
            "{what}: {} ({}) has wrong elements",
            r.collective, r.redop
        );
    }
    res.rows.clone()
}

const COLLECTIVES: [&str; 6] = [
    "all_reduce",
    "broadcast",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "send_recv",
];

/// Every collective on every layout of 4 ranks (a ring of 4 SIPs) gives
/// each group's definition: one row per group, from its rank 0.
#[test]
fn every_collective_runs_on_groups_of_every_shape() {
    for layout in ["pairs", "strided", "single", "world"] {
        let groups = match layout {
            "pairs" | "strided" => 2,
            "single" => 4,
            _ => 1,
        };
        for c in COLLECTIVES {
            let what = format!("{c} on {layout}");
            let res = probe(topo(4), &[c, layout, "24"]).unwrap_or_else(|e| panic!("{what}: {e}"));
            let rows = checked_rows(&res, &what);
            assert_eq!(rows.len(), groups, "{what}: {rows:?}");
            if layout != "single" && c != "send_recv" {
                assert!(rows.iter().all(|r| r.time_ps > 0), "{what}: {rows:?}");
            }
        }
    }
}

/// Strided groups on a torus and on 8 ranks, with more elements.
#[test]
fn groups_run_on_other_machines_and_sizes() {
    for (t, layout) in [
        (machine(8, "torus_2d", Some(4), (4, 4)), "strided"),
        (topo(8), "pairs"),
        (topo(5), "world"),
    ] {
        for c in ["all_reduce", "all_gather", "reduce_scatter"] {
            let what = format!("{c} on {layout}, {} SIPs", t.system.sips.count);
            let res =
                probe(t.clone(), &[c, layout, "1000"]).unwrap_or_else(|e| panic!("{what}: {e}"));
            checked_rows(&res, &what);
        }
    }
}

/// Every built-in all-reduce algorithm serves a group: consecutive and
/// strided pairs of a ring of 4, laid out as a ring of the group's size.
#[test]
fn every_built_in_all_reduce_algorithm_runs_on_groups() {
    for algo in [
        "ring_allreduce",
        "ring_rsag_allreduce",
        "tree_allreduce",
        "double_tree_allreduce",
        "rabenseifner_allreduce",
    ] {
        for layout in ["pairs", "strided", "world"] {
            let what = format!("{algo} on {layout}");
            let res = probe(topo(4), &["all_reduce", layout, "40", algo])
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            checked_rows(&res, &what);
            assert_eq!(res.algorithm.as_deref(), Some(algo), "{what}");
        }
    }
}

/// A group made with `pg_options` (`new_group_with_algorithm`) is
/// served by that algorithm, not by the default group's: its times are
/// those of a run whose default group (and so every group) asked for it,
/// and differ from the default group's algorithm's.
#[test]
fn a_group_s_own_algorithm_serves_its_collectives() {
    let time = |args: &[&str]| -> Vec<u64> {
        let res = probe(topo(4), args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        checked_rows(&res, &format!("{args:?}"))
            .iter()
            .map(|r| r.time_ps)
            .collect()
    };
    for layout in ["pairs", "world"] {
        let own = time(&[
            "all_reduce",
            layout,
            "4096",
            "ring_allreduce",
            "tree_allreduce",
        ]);
        let inherited = time(&["all_reduce", layout, "4096", "tree_allreduce"]);
        let world_s = time(&["all_reduce", layout, "4096", "ring_allreduce"]);
        assert_eq!(own, inherited, "{layout}: pg_options tree_allreduce");
        assert_ne!(own, world_s, "{layout}: ring and tree take the same time");
    }
}

/// A 2-D algorithm serves groups too: a group is laid out as a ring of
/// its size (a torus of one row), whatever the machine's network.
/// (lrab_hierarchical_allreduce wants a shard per cube, which this probe's
/// single-shard tensors do not give.)
#[test]
fn two_dimensional_algorithms_run_on_groups_of_a_torus() {
    for algo in ["mesh_allreduce"] {
        for layout in ["pairs", "strided"] {
            let what = format!("{algo} on {layout}");
            let t = machine(8, "torus_2d", Some(4), (2, 2));
            let res = probe(t, &["all_reduce", layout, "64", algo])
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            checked_rows(&res, &what);
        }
    }
}

/// Two groups whose rings share no link take the time one group alone
/// takes; the same calls, the same simulated times, run after run.
#[test]
fn disjoint_groups_run_at_once_and_repeat_exactly() {
    let both = probe(topo(4), &["all_reduce", "pairs", "4096"]).unwrap();
    let alone = probe(topo(4), &["all_reduce", "outsider", "4096"]).unwrap();
    let (both, alone) = (checked_rows(&both, "pairs"), checked_rows(&alone, "alone"));
    assert_eq!(both.len(), 2);
    assert_eq!(alone.len(), 1);
    // Pairs (0, 1) and (2, 3) of a ring of 4 use links 0-1 and 2-3 only.
    assert_eq!(both[0].time_ps, alone[0].time_ps, "{both:?} vs {alone:?}");
    assert_eq!(both[1].time_ps, alone[0].time_ps, "{both:?} vs {alone:?}");
    let again = probe(topo(4), &["all_reduce", "pairs", "4096"]).unwrap();
    let times = |rows: &[ReportRecord]| {
        rows.iter()
            .map(|r| (r.collective.clone(), r.time_ps))
            .collect::<Vec<_>>()
    };
    assert_eq!(times(&both), times(&again.rows));
}

/// PyTorch's rules: a rank outside the group returns at once from a call
/// on it (the bench checks it took no time and left its tensor as it
/// was); ranks that name different ranks for one `new_group` are refused,
/// naming both lists; ranks are sorted as PyTorch sorts them.
#[test]
fn outsiders_return_at_once_and_disagreeing_ranks_are_refused() {
    let res = probe(topo(4), &["all_reduce", "outsider", "16"]).unwrap();
    assert_eq!(checked_rows(&res, "outsider").len(), 1);
    let e = probe(topo(3), &["all_reduce", "mismatch", "16"])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("new_group call 1 names ranks [0, 2], but rank 0 named [0, 1] for it")
            || e.contains("new_group call 1 names ranks [0, 1], but rank"),
        "{e}"
    );
    assert!(
        e.contains("every rank calls new_group in the same order"),
        "{e}"
    );
    let sorted = probe(topo(4), &["all_gather", "reversed", "8"]).unwrap();
    let world = probe(topo(4), &["all_gather", "world", "8"]).unwrap();
    assert_eq!(
        checked_rows(&sorted, "reversed")[0].time_ps,
        checked_rows(&world, "world")[0].time_ps
    );
}

/// A Python bench makes the same groups with PyTorch's calls
/// (`new_subgroups`, `new_subgroups_by_enumeration`, `init_device_mesh`)
/// and gets the Rust probe's rows to the picosecond.
#[test]
fn python_groups_give_the_rust_probe_s_rows() {
    let bench = guests::python(
        "bench",
        "tests/components/python/group_probe/group_probe.py",
    );
    for (c, layout) in [("all_reduce", "pairs"), ("all_gather", "strided")] {
        let py = run(&bench, topo(4), group_ccl(), None, &[c, layout, "48"]).unwrap();
        let rust = probe(topo(4), &[c, layout, "48"]).unwrap();
        assert_eq!(checked_rows(&py, layout), rust.rows, "{c} on {layout}");
    }
    // A device mesh of 2 x 2: the tensor-parallel groups are the pairs.
    let mesh = run(
        &bench,
        topo(4),
        group_ccl(),
        None,
        &["all_reduce", "mesh-tp", "48"],
    )
    .unwrap();
    let rows = checked_rows(&mesh, "mesh-tp");
    let ranks: Vec<&str> = rows.iter().map(|r| r.redop.as_str()).collect();
    assert_eq!(ranks, ["ranks 0+1", "ranks 2+3"]);
    let dp = run(
        &bench,
        topo(4),
        group_ccl(),
        None,
        &["all_gather", "mesh-dp", "48"],
    )
    .unwrap();
    let ranks: Vec<String> = checked_rows(&dp, "mesh-dp")
        .iter()
        .map(|r| r.redop.clone())
        .collect();
    assert_eq!(ranks, ["ranks 0+2", "ranks 1+3"]);
}
