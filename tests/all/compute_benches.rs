//! The compute benches a bench author launches kernels from
//! (`gpt3_qkv`, `va_offset_verify`), through the real host: their numbers
//! against their references on several topologies, their times against
//! the collective and kernel runs they are made of, and their errors.

use crate::common;
use common::*;
use kernbench::kernel_report::KernelRow;

fn gpt3(t: kernbench::config::TopologySpec, args: &[&str]) -> Vec<KernelRow> {
    let res = run("gpt3_qkv", t, ccl(), None, args).unwrap();
    res.kernel_rows
}

/// Megatron's block on 1, 2 and 4 ranks (and two cubes per rank, and a
/// topology with other link figures): every projection and the
/// all-reduced output within tolerance, every element checked, the block's
/// time the sum of its steps; the same inputs give the same rows.
#[test]
fn gpt3_qkv_checks_every_element_on_every_world_size() {
    let (s, h) = (32u64, 64u64);
    for (t, ranks, layout) in [
        (topo(1), 1u64, ["--pes", "4", "--cubes", "1"]),
        (topo(2), 2, ["--pes", "2", "--cubes", "2"]),
        (custom_topo(4), 4, ["--pes", "4", "--cubes", "1"]),
    ] {
        let mut args = vec!["--seq", "32", "--hidden", "64", "--tile-m", "4"];
        args.extend(layout);
        let rows = gpt3(t.clone(), &args);
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["qkv_proj", "out_proj", "all_reduce", "attn_block"]);
        for r in &rows {
            assert_eq!(r.wrong, 0, "{ranks} ranks: {r:?}");
        }
        let checked: Vec<u64> = rows.iter().map(|r| r.checked).collect();
        let (qkv, z) = (3 * s * h, s * h * ranks);
        assert_eq!(checked, [qkv, z, z, qkv + 2 * z], "{ranks} ranks");
        assert_eq!(
            rows[3].time_ps,
            rows[0].time_ps + rows[1].time_ps + rows[2].time_ps
        );
        assert_eq!(rows, gpt3(t, &args), "deterministic");
    }
}

/// The block's all-reduce is the collective `ccl_allreduce` measures for
/// the same bytes (Z is `[s, h]` f16 per rank): the same simulated time.
#[test]
fn gpt3_qkv_all_reduce_takes_what_the_collective_bench_measures() {
    let rows = gpt3(topo(4), &["--seq", "32", "--hidden", "64"]);
    let bytes = (32 * 64 * 2).to_string();
    let res = run(
        "ccl_allreduce",
        topo(4),
        ccl(),
        None,
        &["-b", &bytes, "-e", &bytes],
    )
    .unwrap();
    assert_eq!(rows[2].time_ps, res.rows[0].time_ps);
}

#[test]
fn gpt3_qkv_refuses_a_split_that_does_not_divide() {
    let e = run("gpt3_qkv", topo(3), ccl(), None, &["--hidden", "64"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("--hidden 64 must divide by the 3 ranks"), "{e}");
}

/// `va_offset_verify`: on 2 cubes x 2 PEs and on 4 cubes x 1 PE, in f16
/// and f32, every one of the 16 (cube, PE) mode pairs reaches exactly the
/// bytes its shards hold, through the PE each is placed on; a probe that
/// numbers the shards PE-major is caught on every layout, and the command
/// fails.
#[test]
fn va_offset_verify_checks_every_layout_and_catches_a_wrong_order() {
    for args in [
        vec!["--cubes", "2", "--pes", "2"],
        vec![
            "--cubes", "4", "--pes", "1", "--dtype", "f32", "--rows", "16",
        ],
    ] {
        let res = run("va_offset_verify", topo(1), ccl(), None, &args).unwrap();
        assert_eq!(res.kernel_rows.len(), 16);
        for r in &res.kernel_rows {
            assert_eq!(r.wrong, 0, "{args:?}: {r:?}");
            assert!(r.checked > 0);
        }
    }
    let swapped = test_component("swapped_va_probe");
    let res = run(
        "va_offset_verify",
        topo(1),
        ccl(),
        None,
        &["--kernel", swapped],
    )
    .unwrap();
    let caught: Vec<&str> = res
        .kernel_rows
        .iter()
        .filter(|r| r.wrong > 0)
        .map(|r| r.shape.as_str())
        .collect();
    // Shards 1 and 2 are reached by each other's PEs: the data still
    // arrive (each shard is copied once), but the signatures name the wrong
    // PE on every layout.
    assert_eq!(caught.len(), 16, "{caught:?}");
    let e = fails(kb().args(["run", "va_offset_verify", "--", "--kernel", swapped]));
    assert!(
        e.contains("differ from the reference by more than the tolerance"),
        "{e}"
    );
}
