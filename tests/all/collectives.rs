//! Ring all-reduce and hello_send through the real host and real
//! components: correct data for several world sizes and topologies, and
//! determinism.

use crate::common;
use common::*;

fn check_allreduce(t: kernbench::config::TopologySpec, ws: u32) {
    let res = run(
        "ccl_allreduce",
        t,
        ccl(),
        None,
        &["-b", "8", "-e", "64K", "-f", "8"],
    )
    .unwrap();
    assert_eq!(res.algorithm.as_deref(), Some("ring_allreduce"));
    // 8, 64, 512, 4K, 32K: one row per rank per size
    assert_eq!(res.rows.len(), 5 * ws as usize, "rows: {:?}", res.rows);
    for r in &res.rows {
        assert_eq!(r.wrong, 0, "world size {ws}: {r:?}");
        assert!(r.time_ps > 0);
    }
}

#[test]
fn ring_allreduce_is_correct_for_2_3_4_and_8_ranks() {
    for ws in [2, 3, 4, 8] {
        check_allreduce(topo(ws), ws);
    }
}

#[test]
fn the_reference_check_is_exact_beyond_f16s_integer_range() {
    // 300 ranks: sums of 0..16 from every rank would pass 2048, where f16
    // stops being exact, and the check would report false "wrong"s.
    let l = std::sync::Arc::new(
        kernbench::runtime::Loader::new(kernbench::runtime::LoaderOptions {
            pool_instances: 700,
            ..kernbench::runtime::LoaderOptions::default()
        })
        .unwrap(),
    );
    let res = run_with(
        &l,
        "ccl_allreduce",
        topo(300),
        ccl(),
        None,
        &["-b", "64", "-e", "64"],
    )
    .unwrap();
    assert_eq!(res.rows.len(), 300);
    assert!(
        res.rows.iter().all(|r| r.wrong == 0),
        "{:?}",
        res.rows.iter().find(|r| r.wrong > 0)
    );
}

#[test]
fn ring_allreduce_is_correct_on_a_custom_topology() {
    check_allreduce(custom_topo(5), 5);
}

#[test]
fn ring_allreduce_runs_on_torus_and_mesh_sip_topologies() {
    for kind in ["torus_2d", "mesh_2d_no_wrap"] {
        let mut t = topo(4);
        t.system.sips.topology = serde_yaml::from_str(kind).unwrap();
        check_allreduce(t, 4);
    }
}

#[test]
fn ring_allreduce_with_slots_in_hbm_and_sram() {
    for kind in ["hbm", "sram"] {
        let text = kernbench::config::DEFAULT_CCL_YAML.replace(
            "buffer_kind: tcm         #",
            &format!("buffer_kind: {kind}         #"),
        );
        let c = kernbench::config::CclConfig::from_yaml(
            &text,
            kernbench::config::Origin::Embedded("t"),
        )
        .unwrap();
        let res = run("ccl_allreduce", topo(3), c, None, &["-b", "1K", "-e", "1K"]).unwrap();
        assert!(
            res.rows.iter().all(|r| r.wrong == 0),
            "{kind}: {:?}",
            res.rows
        );
    }
}

#[test]
fn world_size_from_ccl_yaml_overrides_the_sip_count() {
    let text = kernbench::config::DEFAULT_CCL_YAML.replace("# world_size: 4 ", "world_size: 3 ");
    let c =
        kernbench::config::CclConfig::from_yaml(&text, kernbench::config::Origin::Embedded("t"))
            .unwrap();
    let res = run("ccl_allreduce", topo(4), c, None, &["-b", "64", "-e", "64"]).unwrap();
    assert_eq!(res.rows.len(), 3);
    assert_eq!(res.alpha_beta.unwrap().world_size, 3);
    assert!(res.rows.iter().all(|r| r.wrong == 0));
}

#[test]
fn hello_send_shifts_data_by_one_rank() {
    for ws in [2, 4] {
        let res = run("ccl_hello", topo(ws), ccl(), Some("hello_send"), &[]).unwrap();
        assert_eq!(res.rows.len(), ws as usize);
        for r in &res.rows {
            assert_eq!(r.wrong, 0, "{r:?}");
        }
    }
    // The wrong algorithm is caught by the check, not silently accepted.
    let res = run("ccl_hello", topo(4), ccl(), Some("ring_allreduce"), &[]).unwrap();
    assert!(res.rows.iter().all(|r| r.wrong == 8));
}

#[test]
fn hello_send_moves_exact_data_across_4096_ranks() {
    // The validator's largest machine: 4096 SIPs (1.7 M graph nodes), one
    // rank per SIP, each with its own bench and kernel instance. Every
    // tile is a per-rank pattern exact in f16, so a rank that received
    // the wrong neighbour's data (or nothing) is counted.
    let ranks = 4096;
    let l = std::sync::Arc::new(
        kernbench::runtime::Loader::new(kernbench::runtime::LoaderOptions {
            pool_instances: kernbench::runtime::limits::instances_needed(ranks),
            ..kernbench::runtime::LoaderOptions::default()
        })
        .unwrap(),
    );
    let res = run_with(&l, "ccl_hello", topo(ranks), ccl(), Some("hello_send"), &[]).unwrap();
    assert_eq!(res.rows.len(), ranks as usize);
    assert!(
        res.rows.iter().all(|r| r.wrong == 0),
        "{:?}",
        res.rows.iter().find(|r| r.wrong > 0)
    );
    // One send per rank, all at once on disjoint links: every rank takes
    // the same time as in a 4-rank ring.
    let small = run("ccl_hello", topo(4), ccl(), Some("hello_send"), &[]).unwrap();
    assert!(res.rows.iter().all(|r| r.time_ps == small.rows[0].time_ps));
}

#[test]
fn two_runs_give_identical_bytes_and_times() {
    let sweep = |sips| {
        run(
            "ccl_allreduce",
            topo(sips),
            ccl(),
            None,
            &["-b", "8", "-e", "256K", "-f", "4"],
        )
        .unwrap()
    };
    let (a, b) = (sweep(4), sweep(4));
    assert_eq!(a.rows, b.rows);
    assert_eq!(a.end_time_ps, b.end_time_ps);
    assert!(a.memory_digest.is_some());
    assert_eq!(a.memory_digest, b.memory_digest);
    assert_eq!(a.events, b.events);
    let c = sweep(3);
    assert_ne!(a.memory_digest, c.memory_digest, "the digest sees the data");
}

#[test]
fn a_bench_loads_from_a_file_path() {
    let path = kernbench::runtime::loader::BUILTIN
        .iter()
        .find(|b| b.name == "ccl_allreduce")
        .unwrap()
        .path;
    let res = run(path, topo(2), ccl(), None, &["-b", "8", "-e", "8"]).unwrap();
    assert_eq!(res.rows.len(), 2);
}

#[test]
fn a_component_without_the_sdk_and_without_topo_name_to_kind_runs() {
    let text = format!(
        "defaults: {{algorithm: minimal}}\nalgorithms:\n  minimal: {{module: {}, topology: ring_1d}}\n",
        test_component("minimal_algo")
    );
    let c =
        kernbench::config::CclConfig::from_yaml(&text, kernbench::config::Origin::Embedded("t"))
            .unwrap();
    let res = run(
        "ccl_allreduce",
        topo(2),
        c,
        None,
        &["-b", "8", "-e", "4K", "-f", "8"],
    )
    .unwrap();
    assert_eq!(res.rows.len(), 2 * 4);
    assert!(res.rows.iter().all(|r| r.wrong == 0), "{:?}", res.rows);
}

#[test]
fn recorded_kernels_run_exactly_as_kernels_in_step() {
    // Kernels are recorded ahead of simulated time and their calls
    // replayed; the same run in step with simulated time is the
    // reference: same rows, times, event count, commands and bytes.
    let mut torus = topo(4);
    torus.system.sips.topology = serde_yaml::from_str("torus_2d").unwrap();
    let cases: Vec<(
        &str,
        kernbench::config::TopologySpec,
        Option<&str>,
        Vec<&str>,
    )> = vec![
        (
            "ccl_allreduce",
            topo(3),
            None,
            vec!["-b", "8", "-e", "64K", "-f", "8"],
        ),
        ("ccl_allreduce", topo(8), None, vec!["-b", "2K", "-e", "2K"]),
        (
            "ccl_allreduce",
            torus,
            None,
            vec!["-b", "64", "-e", "4K", "-f", "8"],
        ),
        (
            "ccl_allreduce",
            custom_topo(5),
            None,
            vec!["-b", "1K", "-e", "1K"],
        ),
        ("ccl_hello", topo(5), Some("hello_send"), vec![]),
        // An integer avg finishes with a `tl.fill` of the divisor.
        (
            "ccl_allreduce",
            topo(3),
            None,
            vec!["-b", "8", "-e", "1K", "-f", "8", "-d", "i32", "-o", "avg"],
        ),
    ];
    for (bench, t, algorithm, args) in cases {
        let what = format!("{bench} {args:?} on {} SIPs", t.system.sips.count);
        let a = run_with(&loader(), bench, t.clone(), ccl(), algorithm, &args).unwrap();
        let b = run_with(&in_step_loader(), bench, t, ccl(), algorithm, &args).unwrap();
        assert_eq!(a.rows, b.rows, "{what}");
        assert_eq!(a.end_time_ps, b.end_time_ps, "{what}");
        assert_eq!(a.events, b.events, "{what}");
        assert_eq!(a.stats.dma_commands, b.stats.dma_commands, "{what}");
        assert_eq!(a.stats.math_commands, b.stats.math_commands, "{what}");
        assert_eq!(a.memory_digest, b.memory_digest, "{what}");
    }
}

#[test]
fn kernels_launched_again_with_the_same_inputs_replay_their_kept_recording() {
    // nccl-tests' habit: warm-up and timed iterations launch the same
    // kernels again. Each launch after the first of a size, on each PE,
    // replays the recording kept from the one before (a new size maps new
    // tensors and passes new arguments: recorded again). The run equals
    // the one in step with simulated time, which records nothing.
    use kernbench::runtime::recording_memo::RecordingCounts;
    let args = ["-b", "1K", "-e", "4K", "-f", "4", "-n", "3", "-w", "1"];
    let a = run_with(&loader(), "ccl_allreduce", topo(4), ccl(), None, &args).unwrap();
    let b = run_with(
        &in_step_loader(),
        "ccl_allreduce",
        topo(4),
        ccl(),
        None,
        &args,
    )
    .unwrap();
    assert_eq!(a.rows, b.rows);
    assert!(a.rows.iter().all(|r| r.wrong == 0), "{:?}", a.rows);
    assert_eq!(a.end_time_ps, b.end_time_ps);
    assert_eq!(a.events, b.events);
    assert_eq!(a.stats.dma_commands, b.stats.dma_commands);
    assert_eq!(a.memory_digest, b.memory_digest);
    // 2 sizes x 2 variants (out of place, in place: other tensors) x 4
    // launches (1 warm-up, 3 timed) x 4 ranks.
    assert_eq!(
        a.recordings,
        RecordingCounts {
            recorded: 2 * 2 * 4,
            reused: 2 * 2 * 3 * 4
        }
    );
    assert_eq!(b.recordings, RecordingCounts::default());
}
