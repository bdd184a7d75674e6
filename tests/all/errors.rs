//! Errors that point at the user's code: seed error semantics of
//! `torch.distributed`, guest traps, bad directions and addresses, runaway
//! guests, deadlocks and broken components. Never a host panic or a hang.

use crate::common;
use common::*;
use kernbench::error::SimError;

fn probe(scenario: &str, sips: u32) -> String {
    match run(
        test_component("dist_probe"),
        topo(sips),
        ccl(),
        None,
        &[scenario],
    ) {
        Ok(_) => panic!("scenario {scenario} was expected to report an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn init_process_group_with_nccl_is_a_value_error() {
    let e = probe("nccl", 2);
    assert!(e.contains("ValueError: Unsupported backend 'nccl'"), "{e}");
}

#[test]
fn collectives_before_init_are_runtime_errors() {
    let e = probe("before-init", 2);
    assert!(
        e.contains("RuntimeError: Default process group has not been initialized, please make sure to call init_process_group."),
        "{e}"
    );
    assert!(
        e.contains("get_rank: RuntimeError: Default process group has not been initialized"),
        "{e}"
    );
}

#[test]
fn second_init_and_unsupported_op_and_single_driver_collective() {
    assert!(probe("twice", 2)
        .contains("RuntimeError: trying to initialize the default process group twice!"));
    // An algorithm of the seed's ABI refuses max; the refusal names
    // those of ccl.yaml that do it.
    let e = run(
        test_component("dist_probe"),
        topo(2),
        ccl(),
        Some("hello_send"),
        &["bad-op"],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains(
            "NotImplementedError: all_reduce (max, f16): algorithm 'hello_send' refuses it \
             (component hello_send: kernel-args-for: implements only an f16 sum all_reduce \
             (the seed's ABI)); double_tree_allreduce, mesh_allreduce, rabenseifner_allreduce \
             do it: choose one with --algorithm all_reduce=double_tree_allreduce"
        ),
        "{e}"
    );
    assert!(e.contains("processes 0, 1 terminated"), "{e}");
    // A ccl.yaml whose only algorithm cannot do the call: the refusal
    // says that none can.
    let only_hello = kernbench::config::CclConfig::from_yaml(
        "defaults: {algorithm: hello_send}\nalgorithms:\n  hello_send: {module: hello_send, topology: ring_1d}\n",
        kernbench::config::Origin::Embedded("t"),
    )
    .unwrap();
    let e = run(
        test_component("dist_probe"),
        topo(2),
        only_hello,
        None,
        &["bad-op"],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("NotImplementedError: all_reduce (max, f16): algorithm 'hello_send' refuses it")
            && e.contains("no algorithm in ccl.yaml does it"),
        "{e}"
    );
    // Integers average as NCCL's do (the sum divided, truncated).
    let res = run(
        test_component("dist_probe"),
        topo(3),
        ccl(),
        None,
        &["avg-i32"],
    );
    assert!(res.is_ok(), "{res:?}");
    let e = probe("single-driver", 4);
    assert!(e.contains("single driver with world_size 4"), "{e}");
}

#[test]
fn a_tensor_filled_and_read_in_pieces_and_a_piece_outside_it() {
    let e = probe("pieces", 1);
    assert_contains_all(
        &e,
        &[
            "copy_from_f64_at: elements 3..3+2 are outside tensor 'probe' (4 elements)",
            "tensor.to_f64_range(): elements 18446744073709551615..18446744073709551615+2 are outside tensor 'probe' (4 elements)",
        ],
    );
}

#[test]
fn dp_policies_place_shards_and_a_policy_that_does_not_fit_is_a_value_error() {
    let e = probe("placement", 2);
    assert_contains_all(
        &e,
        &[
            "cube-rows: s1c0p0 r0+1 c0+8 @0, s1c1p0 r1+1 c0+8 @16, s1c2p0 r2+1 c0+8 @32, s1c3p0 r3+1 c0+8 @48",
            "pe-cols: s1c0p0 r0+4 c0+2 @0, s1c0p1 r0+4 c2+2 @16, s1c0p2 r0+4 c4+2 @32, s1c0p3 r0+4 c6+2 @48",
            "replicas: s1c0p0 r0+2 c0+8 @0, s1c0p1 r2+2 c0+8 @32, s1c1p0 r0+2 c0+8 @64, s1c1p1 r2+2 c0+8 @96",
            "tiles: s1c0p0 r0+2 c0+4 @0, s1c1p0 r0+2 c4+4 @16, s1c2p0 r2+2 c0+4 @32, s1c3p0 r2+2 c4+4 @48",
            "torch.zeros([4, 8], dtype=f16, name='bad'): ValueError: DPPolicy(cube='row_wise', pe='replicate', num_cubes=3, num_pes=1) on shape [4, 8]: cube='row_wise' over 3 cubes needs the rows (4) to divide evenly by 3",
            "pe='column_wise' over 3 PEs needs the columns (8) to divide evenly by 3",
            "num_cubes=99 but this topology has 16 cubes per SIP (1..=16)",
            "num_pes=5 but this topology has 4 PEs per cube (1..=4)",
        ],
    );
}

#[test]
fn the_validator_refuses_a_tensor_laid_out_for_another_algorithm() {
    let e = probe("validator", 1);
    assert!(
        e.contains("ValueError: all_reduce on rank 0 (single_shard_per_rank validator of 'ring_allreduce'): the tensor has 4 shard(s) on SIP 0, the algorithm needs 1"),
        "{e}"
    );
}

#[test]
fn rank_as_flat_pe_index_runs_from_the_single_driver() {
    // world_size 8 on one SIP: ranks are cube 0 PEs 0-3 and cube 1 PEs 0-3.
    let run_once = || {
        let text = kernbench::config::DEFAULT_CCL_YAML.replace(
            "    validator: single_shard_per_rank\n  # The seed's",
            "    world_size: 8\n  # The seed's",
        );
        let c = kernbench::config::CclConfig::from_yaml(
            &text,
            kernbench::config::Origin::Embedded("t"),
        )
        .unwrap();
        match run(
            test_component("dist_probe"),
            topo(1),
            c,
            None,
            &["legacy-driver"],
        ) {
            Ok(_) => panic!("the probe reports through its error"),
            Err(e) => e.to_string(),
        }
    };
    let e = run_once();
    assert!(e.contains("legacy ws=8 shards=8 wrong=0 time="), "{e}");
    assert_eq!(e, run_once(), "deterministic");
    // Past the machine's PEs it is refused up front.
    let text = kernbench::config::DEFAULT_CCL_YAML.replace("  # world_size: 4", "  world_size: 65");
    let c =
        kernbench::config::CclConfig::from_yaml(&text, kernbench::config::Origin::Embedded("t"))
            .unwrap();
    let e = run(
        test_component("dist_probe"),
        topo(1),
        c,
        None,
        &["legacy-driver"],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("world_size 65 exceeds the 64 PEs of the topology"),
        "{e}"
    );
}

#[test]
fn mapper_all_pes_runs_the_kernel_on_every_pe_of_every_cube() {
    let text = kernbench::config::DEFAULT_CCL_YAML.replace(
        "  hello_send:\n    module: hello_send\n",
        "  hello_send:\n    module: hello_send\n    mapper: all_pes\n",
    );
    assert!(text.contains("mapper: all_pes"));
    let c =
        kernbench::config::CclConfig::from_yaml(&text, kernbench::config::Origin::Embedded("t"))
            .unwrap();
    let e = run(
        test_component("dist_probe"),
        topo(2),
        c,
        None,
        &["all-pes-hello"],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("all-pes ok ws=2"), "{e}");
}

#[test]
fn a_rank_that_dies_is_reported_not_the_wait_it_causes() {
    let e = probe("rank-dies", 3);
    assert!(
        e.contains("rank 1") && e.contains("gives up before the collective"),
        "{e}"
    );
    assert!(!e.contains("deadlock"), "{e}");
}

#[test]
fn rank_world_size_backend_and_device_queries() {
    let e = probe("queries", 3);
    assert!(e.contains("ok world_size=3 devices=3"), "{e}");
}

fn faulty(bytes: &str, l: &std::sync::Arc<kernbench::runtime::Loader>) -> SimError {
    run_with(
        l,
        "ccl_allreduce",
        topo(2),
        faulty_ccl(),
        None,
        &["-b", bytes, "-e", bytes],
    )
    .unwrap_err()
}

#[test]
fn a_wrong_direction_names_the_component_the_pe_and_the_call() {
    let e = faulty("8", &loader()).to_string();
    assert!(e.contains("faulty_kernel"), "{e}");
    assert!(e.contains("tl.send(dir=\"N\")"), "{e}");
    assert!(e.contains("direction \"N\" is not installed on sip"), "{e}");
    assert!(e.contains("installed: E, W"), "{e}");
    // Handed over in a batch, the call is still named where it was made
    // (not where the SDK submitted it).
    assert!(
        e.contains("(the tl call at tests/components/algorithms/faulty_kernel/src/lib.rs:31:"),
        "{e}"
    );
    assert!(!e.contains("panicked at guest-sdk"), "{e}");
}

#[test]
fn a_panic_in_kernel_args_is_a_failure_not_a_refusal() {
    // Was: "NotImplementedError: ... algorithm 'faulty_kernel' refuses it".
    let e = faulty("2048", &loader()).to_string();
    assert!(
        e.contains("algorithm 'faulty' failed giving its kernel arguments")
            && e.contains("deliberate failure in kernel_args")
            && !e.contains("refuses it")
            && !e.contains("NotImplementedError"),
        "{e}"
    );
}

#[test]
fn a_guest_panic_is_an_error_with_the_guest_backtrace() {
    let e = faulty("16", &loader()).to_string();
    assert!(e.contains("faulty_kernel"), "{e}");
    // The panic's own message and place lead, not a bare `unreachable`.
    assert!(
        e.contains("the guest panicked at")
            && e.contains("src/lib.rs")
            && e.contains(": deliberate failure in faulty_kernel"),
        "{e}"
    );
    assert!(e.contains("on sip"), "{e}");
    assert!(
        e.contains("wasm backtrace") || e.contains("wasm trap"),
        "{e}"
    );
}

#[test]
fn a_runaway_guest_is_stopped_by_its_fuel_budget() {
    let e = faulty("32", &low_fuel_loader()).to_string();
    assert!(e.contains("fuel"), "{e}");
    assert!(e.contains("faulty_kernel"), "{e}");
}

#[test]
fn a_deadlock_is_reported_with_who_waits_for_what() {
    match faulty("64", &loader()) {
        SimError::Deadlock { report, .. } => {
            assert!(
                report.contains(
                    "sip0.cube0.pe0: recv(dir=W): waiting for a message from sip1.cube0.pe0"
                ),
                "{report}"
            );
            assert!(report.contains("IPCQ rings"), "{report}");
            // The seed's pointer dump: tail / head of every ring.
            assert!(
                report.contains("sip0.cube0.pe0 rx W: tail=0 (sent by sip1.cube0.pe0 E) head=0 (taken), 0 waiting; slots: 0 of 2 held"),
                "{report}"
            );
        }
        other => panic!("expected a deadlock, got {other}"),
    }
}

#[test]
fn an_unmapped_address_is_named() {
    let e = faulty("128", &loader()).to_string();
    assert!(e.contains("tl.load(addr=0x7000000000000000"), "{e}");
    assert!(e.contains("unknown memory kind 7"), "{e}");
}

#[test]
fn a_guest_over_its_memory_cap_or_stack_fails_cleanly() {
    let e = faulty("256", &loader()).to_string();
    assert!(e.contains("faulty_kernel") && e.contains("on sip"), "{e}");
    assert!(
        e.contains("linear memory would grow to 1024 MiB, over the per-instance cap of 256 MiB"),
        "{e}"
    );
    assert!(
        e.contains("--max-guest-memory") && e.contains("malloc"),
        "{e}"
    );
    // A Rust guest's stack lives in linear memory: overflowing it is an
    // out-of-bounds access; the (cut) backtrace shows the recursion.
    let e = faulty("512", &loader()).to_string();
    assert!(
        e.contains("faulty_kernel") && e.contains("wasm trap"),
        "{e}"
    );
    assert!(e.contains("recurse"), "{e}");
    assert!(e.lines().count() < 40, "{e}");
}

/// A recorded kernel's operands are checked as it records them: an add
/// of two shapes is refused with both, at the call's place.
#[test]
fn operands_of_different_shapes_are_named_with_the_call() {
    let e = faulty("1024", &loader()).to_string();
    assert!(e.contains("faulty_kernel") && e.contains("on sip"), "{e}");
    assert!(
        e.contains("add of tensors with different shapes/dtypes: [512] f16 and [256] f16"),
        "{e}"
    );
    assert!(
        e.contains("(the tl call at tests/components/algorithms/faulty_kernel/src/lib.rs:58:"),
        "{e}"
    );
}

#[test]
fn broken_and_mismatched_components_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.wasm");
    std::fs::write(&junk, b"\0asm\x0d\0\x01\0garbage").unwrap();
    let e = run(junk.to_str().unwrap(), topo(2), ccl(), None, &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("junk") && e.contains("not a valid WebAssembly component"),
        "{e}"
    );

    let algo = kernbench::runtime::loader::BUILTIN
        .iter()
        .find(|b| b.name == "ring_allreduce")
        .unwrap()
        .path;
    let e = run(algo, topo(2), ccl(), None, &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("is not a bench component") && e.contains("kernel"),
        "{e}"
    );

    let e = run("no_such_bench", topo(2), ccl(), None, &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no bench component named 'no_such_bench'") && e.contains("ccl_allreduce"),
        "{e}"
    );

    let text = "defaults: {algorithm: x}\nalgorithms:\n  x: {module: kernbench.ccl.algorithms.nonexistent, topology: ring_1d}\n";
    let c = kernbench::config::CclConfig::from_yaml(text, kernbench::config::Origin::Embedded("t"))
        .unwrap();
    let e = run("ccl_allreduce", topo(2), c, None, &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no algorithm component named 'nonexistent'"),
        "{e}"
    );
}

#[test]
fn too_large_a_message_for_the_slots_is_explained() {
    let text = kernbench::config::DEFAULT_CCL_YAML.replace("slot_kib: 1024\n", "slot_kib: 1\n");
    let c =
        kernbench::config::CclConfig::from_yaml(&text, kernbench::config::Origin::Embedded("t"))
            .unwrap();
    let e = run("ccl_allreduce", topo(2), c, None, &["-b", "4K", "-e", "4K"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not fit an IPCQ slot of 1024 bytes"), "{e}");
}

#[test]
fn a_component_built_against_another_wit_version_is_refused() {
    let text = format!(
        "defaults: {{algorithm: old}}\nalgorithms:\n  old: {{module: {}, topology: ring_1d}}\n",
        test_component("old_abi")
    );
    let c =
        kernbench::config::CclConfig::from_yaml(&text, kernbench::config::Origin::Embedded("t"))
            .unwrap();
    let e = run("ccl_allreduce", topo(2), c, None, &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("built against kernbench:sim@0.0.9")
            && e.contains(&format!(
                "implements kernbench:sim@{}",
                kernbench::components::compat::WIT_VERSION
            ))
            && e.contains(&format!(
                "runs guests of kernbench:sim@0.1.0 ..= {} only",
                kernbench::components::compat::WIT_VERSION
            )),
        "{e}"
    );
}

fn overlap_probe(mode: u32) -> kernbench::config::CclConfig {
    probe_ccl("overlap_probe", mode, "")
}

#[test]
fn a_recv_async_future_never_waited_for_fails_its_kernel_by_name() {
    for l in [loader(), in_step_loader()] {
        let e = run_with(
            &l,
            "ccl_allreduce",
            topo(2),
            overlap_probe(2),
            None,
            &["-e", "8"],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("tl.recv_async(dir=\"W\") on sip0.cube0.pe0")
                && e.contains("the kernel ended without waiting for 1 recv_async future(s)"),
            "{e}"
        );
    }
}

#[test]
fn a_wait_that_never_gets_its_message_is_in_the_deadlock_report() {
    match run(
        "ccl_allreduce",
        topo(2),
        overlap_probe(3),
        None,
        &["-e", "8"],
    )
    .unwrap_err()
    {
        SimError::Deadlock { report, .. } => assert!(
            report.contains(
                "sip0.cube0.pe0: wait(recv_async(dir=W)): waiting for a message from sip1.cube0.pe0"
            ),
            "{report}"
        ),
        other => panic!("expected a deadlock, got {other}"),
    }
}

#[test]
fn a_reduction_over_a_missing_axis_names_the_call_and_the_shape() {
    let c = probe_ccl("math_probe", 2, "");
    for l in [loader(), in_step_loader()] {
        let e = run_with(&l, "ccl_allreduce", topo(2), c.clone(), None, &["-e", "8"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("tl.reduce(sum, axis=3) on sip0.cube0.pe0")
                && e.contains("axis 3 of a 1-D tensor [4] (axes 0..1)"),
            "{e}"
        );
    }
}

#[test]
fn strict_validation_refuses_a_message_of_another_shape_and_dtype_and_size_checks_do_not() {
    let probe =
        |strict: bool| probe_ccl("recv_probe", 3, &format!(", strict_validation: {strict}"));
    // 8 B: the tile is [4] f16, received as [2] f32 (the same 8 bytes).
    let res = run("ccl_allreduce", topo(2), probe(false), None, &["-e", "8"]).unwrap();
    assert_eq!(res.rows.len(), 2, "the default checks the size only");
    let e = run("ccl_allreduce", topo(2), probe(true), None, &["-e", "8"])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("recv(dir=W) expected [2] f32 (8 bytes) but the message from sip")
            && e.contains("is [4] f16 (8 bytes) (strict_validation: shape and dtype must match)"),
        "{e}"
    );
}

#[test]
fn a_gemm_larger_than_the_unit_takes_names_the_call_and_the_limits() {
    let c = probe_ccl("math_probe", 3, "");
    let mut t = topo(1);
    t.pe.gemm.max_k = 2;
    for l in [loader(), in_step_loader()] {
        let e = run_with(
            &l,
            "ccl_allreduce",
            t.clone(),
            c.clone(),
            None,
            &["-b", "32", "-e", "32"],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("tl.gemm(out_dtype=f32) on sip0.cube0.pe0")
                && e.contains("gemm of m=4, n=4, k=4 is larger than the unit's largest command (pe.gemm max_m=4096, max_n=4096, max_k=2): tile it"),
            "{e}"
        );
    }
}

#[test]
fn collective_arguments_are_checked_as_pytorch_does() {
    let e = probe("arg-checks", 4);
    assert_contains_all(
        &e,
        &[
            "ValueError: broadcast: src=4 is not a rank of the process group (world_size 4: ranks 0..3)",
            "ValueError: reduce: unknown op 'band' (known: sum, prod, max, min, avg, premul_sum:<factor>)",
            "ValueError: all_reduce: op 'premul_sum' needs the rank's factor: premul_sum:<factor> (PyTorch: dist._make_nccl_premul_sum(factor))",
            "ValueError: all_reduce: op 'premul_sum:nan': the factor 'nan' is not a finite number (e.g. premul_sum:0.5)",
            "ValueError: reduce_scatter_tensor: op 'max:2': only premul_sum takes a factor (write 'max')",
            "ValueError: all_gather_into_tensor: the output tensor must have world_size (4) x the input's elements (4 x 4 = 16), it has 17",
            "ValueError: all_gather_into_tensor: the output tensor is f32 but the input is f16: they must have the same dtype",
            "ValueError: reduce_scatter_tensor: the input tensor must have world_size (4) x the output's elements (4 x 4 = 16), it has 17",
            "ValueError: all_to_all_single: 6 elements do not split equally over world_size 4",
            "ValueError: all_to_all_single: the output has 16 elements, the input 4",
            "ValueError: all_gather: the tensor list has 3 entries, it needs world_size (4)",
            "ValueError: send: Invalid destination rank: dst=0 is the rank of the current process",
            "ValueError: recv: src=7 is not a rank of the process group (world_size 4: ranks 0..3)",
        ],
    );
}

#[test]
fn premul_sum_takes_each_ranks_own_factor() {
    for n in [2, 3, 5] {
        let e = probe("premul", n);
        let ws = n;
        let f: f64 = (1..=ws).map(|r| 0.5 * f64::from(r * r)).sum();
        let i: u32 = (1..=ws).map(|r| 2 * r).sum();
        let rs: u32 = (1..=ws).map(|r| r * r).sum();
        assert!(
            e.contains(&format!("premul ok f32={f} i32={i} rs={rs}")),
            "{n} ranks: {e}"
        );
    }
}

#[test]
fn ranks_that_disagree_on_a_collective_are_told_so() {
    let e = probe("mismatch", 3);
    assert!(
        e.contains("rank 1 calls all_reduce (sum, f16) (4 elements per block) but rank 0 called broadcast (f16, root 0)")
            && e.contains("every rank must make the same collective calls"),
        "{e}"
    );
}

#[test]
fn send_and_recv_must_agree_and_be_matched() {
    let e = probe("p2p-sizes", 2);
    assert!(
        e.contains("ValueError: send from rank 0 to rank 1: it sends 16 B but the recv's tensor holds 8 B: the sizes must match"),
        "{e}"
    );
    let e = probe("p2p-unmatched", 2);
    assert!(
        e.contains("rank 0: send of 16 B to rank 1 waits for rank 1 to recv from 0"),
        "{e}"
    );
    let e = probe("p2p-driver", 2);
    assert!(
        e.contains("point-to-point calls need one worker per rank"),
        "{e}"
    );
}

#[test]
fn list_forms_of_all_gather_and_reduce_scatter_fill_every_entry() {
    let e = probe("lists", 4);
    assert!(e.contains("lists ok all_gather="), "{e}");
}
