//! A machine split into partitions (issue 9; `RunRequest::partitions`,
//! `--partitions`): a collective's kernels run in windows on a thread per
//! partition. What holds: every report row (simulated time and data
//! check), every command count, the run's end and the memory's bytes are
//! the one-partition run's; a bench the split path cannot take (a
//! host-side send) gives up with the reason. Until landings and credits
//! between SIPs became keyed events (`engine::keyed`), events of one
//! picosecond could run in another order split than on one executor: the
//! digests of ring_rsag_allreduce and ring_reducescatter differed (TCM
//! blocks freed and taken at one picosecond, in another order).

use crate::common;
use common::*;
use kernbench::error::SimError;
use kernbench::runtime::{run_bench, RunRequest, RunResult};
use std::sync::Arc;

fn run_split(bench: &str, algorithm: &str, n: u32, parts: usize) -> Result<RunResult, SimError> {
    run_split_with(ccl(), bench, algorithm, n, parts)
}

fn run_split_with(
    ccl: kernbench::config::CclConfig,
    bench: &str,
    algorithm: &str,
    n: u32,
    parts: usize,
) -> Result<RunResult, SimError> {
    let args = ["-b", "8", "-e", "64K", "-f", "8", "-n", "2", "-w", "1"];
    let mut req = request(
        bench,
        machine(n, "ring_1d", None, (2, 2)),
        ccl,
        Some(algorithm),
        &args,
    );
    req.partitions = Some(parts);
    run_bench(&loader(), req)
}

/// That `run` is `one`'s run to the bytes: every row and count, the
/// run's end and the memory digest (`what` names it in a failure).
fn assert_same_run(run: &RunResult, one: &RunResult, what: &str) {
    assert_eq!(rows_and_counts(run), rows_and_counts(one), "{what}");
    assert_eq!(run.end_time_ps, one.end_time_ps, "{what}");
    assert_eq!(run.memory_digest, one.memory_digest, "{what}");
}

/// Every row's simulated time and check, and the commands and bytes.
fn rows_and_counts(r: &RunResult) -> impl PartialEq + std::fmt::Debug {
    let rows: Vec<_> = r
        .rows
        .iter()
        .map(|x| (x.collective.clone(), x.size_bytes, x.time_ps, x.wrong))
        .collect();
    let s = r.stats;
    (rows, (s.dma_commands, s.math_commands, s.bytes_moved))
}

#[test]
fn a_split_machine_gives_the_one_partition_rows_or_gives_up() {
    let every = [
        ("ccl_allreduce", "ring_allreduce"),
        ("ccl_allreduce", "ring_rsag_allreduce"),
        ("ccl_allreduce", "rabenseifner_allreduce"),
        ("ccl_allgather", "ring_allgather"),
        ("ccl_reducescatter", "ring_reducescatter"),
        ("ccl_broadcast", "binomial_broadcast"),
        ("ccl_alltoall", "direct_alltoall"),
        ("ccl_sendrecv", "ring_allreduce"),
    ];
    let mut split_ran = Vec::new();
    for n in [8, 9] {
        for (bench, algorithm) in every {
            let one = run_split(bench, algorithm, n, 1).unwrap();
            assert!(one.rows.iter().all(|r| r.wrong == 0), "{bench} {algorithm}");
            match run_split(bench, algorithm, n, 2) {
                Ok(split) => {
                    let what = format!("{bench} {algorithm} on {n} SIPs");
                    assert_same_run(&split, &one, &what);
                    split_ran.push((bench, n));
                }
                Err(SimError::SplitGivenUp(why)) => {
                    // The bench's point-to-point send runs on the host.
                    assert_eq!(bench, "ccl_sendrecv", "{why}");
                    assert!(why.contains("outside the kernels"), "{why}");
                }
                Err(e) => panic!("{bench} {algorithm} on {n} SIPs: {e}"),
            }
        }
    }
    assert_eq!(split_ran.len(), 14, "{split_ran:?}");
}

/// Rings of two slots, the sender sleeping or polling for one: a send
/// often waits for a credit (one slot deadlocks: a kernel holds the message it took while it sends), and a credit, a landing and a
/// partition's own events often share a picosecond. The split run is the
/// one-partition run to the bytes (landings and credits between SIPs are
/// keyed events, `engine::keyed`).
#[test]
fn two_slot_rings_give_the_one_partition_run_to_the_bytes() {
    let text = |backpressure: &str| {
        format!(
            "defaults: {{algorithm: tight}}\nalgorithms:\n  tight: {{module: ring_rsag_allreduce, topology: ring_1d, buffer_kind: tcm, n_slots: 2, slot_kib: 64, backpressure: {backpressure}, validator: single_shard_per_rank}}\n  tight_chunked: {{module: ring_allreduce, topology: ring_1d, buffer_kind: tcm, n_slots: 2, slot_kib: 64, backpressure: {backpressure}, validator: single_shard_per_rank, chunk_size: 8}}\n"
        )
    };
    for backpressure in ["sleep", "poll"] {
        let ccl = kernbench::config::CclConfig::from_yaml(
            &text(backpressure),
            kernbench::config::Origin::Embedded("two-slot ccl"),
        )
        .unwrap();
        for algorithm in ["tight", "tight_chunked"] {
            let one = run_split_with(ccl.clone(), "ccl_allreduce", algorithm, 8, 1).unwrap();
            let split = run_split_with(ccl.clone(), "ccl_allreduce", algorithm, 8, 2).unwrap();
            let what = format!("{algorithm}, backpressure {backpressure}");
            assert!(one.rows.iter().all(|r| r.wrong == 0), "{what}");
            assert_same_run(&split, &one, &what);
        }
    }
}

/// With `split_falls_back` (the command line's `--partitions`), a run the
/// split path gives up runs again on one partition: the caller gets the
/// one-partition run. A run that records an op log is refused a split.
#[test]
fn a_run_that_gives_up_the_split_runs_on_one_partition() {
    let mut req = request(
        "ccl_sendrecv",
        machine(8, "ring_1d", None, (2, 2)),
        ccl(),
        Some("ring_allreduce"),
        &["-b", "8", "-e", "64", "-n", "1", "-w", "0"],
    );
    let one = run_bench(&loader(), req.clone()).unwrap();
    req.partitions = Some(2);
    req.split_falls_back = true;
    let again = run_bench(&loader(), req.clone()).unwrap();
    assert_eq!(rows_and_counts(&again), rows_and_counts(&one));
    assert_eq!(again.memory_digest, one.memory_digest);
    req.record_ops = true;
    let refused = run_bench(&loader(), req).unwrap_err().to_string();
    assert!(refused.contains("op log"), "{refused}");
}

/// Not told how many partitions (`partitions: None`, the command line
/// without `--partitions`), a run splits in two where it pays: more than
/// one core and at least `AUTO_SPLIT_SIPS` SIPs, nothing recorded that one
/// executor alone records. The split run gives the one-partition rows and
/// bytes; a bench the split gives up (a host-side send) runs again on one
/// partition, says so in `partitions`, and is remembered (`split_memo`).
#[test]
fn a_run_not_told_how_to_split_splits_where_it_pays() {
    use kernbench::runtime::sim::AUTO_SPLIT_SIPS;
    let args = ["-b", "8", "-e", "4K", "-f", "8", "-n", "1", "-w", "0"];
    let req = |bench: &str, algorithm: &str, n: u32| {
        let machine = machine(n, "ring_1d", None, (2, 2));
        request(bench, machine, ccl(), Some(algorithm), &args)
    };
    // The choice.
    let big = req("ccl_allreduce", "ring_allreduce", AUTO_SPLIT_SIPS);
    assert_eq!(big.partitions, None, "the default request chooses");
    assert_eq!(big.auto_partitions(2), 2);
    assert_eq!(big.auto_partitions(1), 1, "one core: one executor");
    let small = req("ccl_allreduce", "ring_allreduce", AUTO_SPLIT_SIPS - 1);
    assert_eq!(small.auto_partitions(2), 1, "too few SIPs to pay");
    let recorded = [
        RunRequest {
            trace: true,
            ..big.clone()
        },
        RunRequest {
            record_ops: true,
            ..big.clone()
        },
        RunRequest {
            verify_data: Some(kernbench::verify::Strictness::Warn),
            ..big.clone()
        },
        RunRequest {
            ccl_trace: Some(Arc::new(|_: String| {})),
            ..big.clone()
        },
    ];
    for r in recorded {
        assert_eq!(r.auto_partitions(2), 1, "one executor records it");
    }
    let mut unlinked = big.clone();
    let mut spec = unlinked.topology.spec.clone();
    spec.system.inter_sip_link.latency_ns = 0.0;
    unlinked.topology = Arc::new(kernbench::topology::build(&spec).unwrap());
    assert_eq!(unlinked.auto_partitions(2), 1, "no lookahead");

    // The runs.
    let two = kernbench::cores::more_than_one_core();
    let expected = if two { 2 } else { 1 };
    for (bench, algorithm) in [
        ("ccl_allreduce", "ring_allreduce"),
        ("ccl_sendrecv", "ring_allreduce"),
    ] {
        let r = req(bench, algorithm, AUTO_SPLIT_SIPS);
        let one = run_bench(
            &loader(),
            RunRequest {
                partitions: Some(1),
                ..r.clone()
            },
        )
        .unwrap();
        let chosen = run_bench(&loader(), r.clone()).unwrap();
        assert_eq!(one.partitions, 1);
        let what = format!("{bench} on {AUTO_SPLIT_SIPS} SIPs");
        let memo = loader().split_memo();
        match bench {
            "ccl_sendrecv" => {
                assert_eq!(chosen.partitions, 1, "{what}: given up, run again");
                // Remembered (where there is a cache): the next such run
                // does not try.
                if let (Some(memo), true) = (memo, two) {
                    let why = memo.gave_up(&r).expect("the give-up is remembered");
                    assert!(why.contains("outside the kernels"), "{why}");
                }
            }
            _ => {
                assert_eq!(chosen.partitions, expected, "{what}");
                assert!(memo.and_then(|m| m.gave_up(&r)).is_none(), "{what}");
            }
        }
        assert!(one.rows.iter().all(|r| r.wrong == 0), "{what}");
        assert_same_run(&chosen, &one, &what);
    }
}

/// The algorithms that talk to every rank, on 128 SIPs of a ring and 64
/// of an 8 x 8 torus: most of their pairs are SIPs that are not
/// neighbours, whose rings' credit latencies come from the router's SIP
/// port tables and whose paths are walked back on them
/// (`routing::sip_ports`). Every element right, as `run` chooses (split
/// in two on more than one core) and on one executor alike, to the bytes.
#[test]
fn full_mesh_algorithms_between_far_sips_are_right_split_or_not() {
    let machines = [
        ("a 128-SIP ring", machine(128, "ring_1d", None, (2, 2))),
        ("an 8 x 8 torus", machine(64, "torus_2d", Some(8), (2, 2))),
    ];
    let args = ["-b", "8", "-e", "512", "-f", "8", "-n", "1", "-w", "0"];
    let loader = Arc::new(
        kernbench::runtime::Loader::new(kernbench::runtime::LoaderOptions {
            pool_instances: kernbench::runtime::limits::instances_needed(128),
            ..kernbench::runtime::LoaderOptions::default()
        })
        .unwrap(),
    );
    for (shape, t) in machines {
        for (bench, algorithm) in [
            ("ccl_broadcast", "binomial_broadcast"),
            ("ccl_reduce", "binomial_reduce"),
            ("ccl_allreduce", "rabenseifner_allreduce"),
            ("ccl_alltoall", "direct_alltoall"),
        ] {
            let what = format!("{algorithm} on {shape}");
            let go = |partitions| {
                let mut req = request(bench, t.clone(), ccl(), Some(algorithm), &args);
                req.partitions = partitions;
                run_bench(&loader, req).unwrap_or_else(|e| panic!("{what}: {e}"))
            };
            let (chosen, one) = (go(None), go(Some(1)));
            assert!(!one.rows.is_empty(), "{what}");
            let wrong = one.rows.iter().find(|r| r.wrong > 0);
            assert!(wrong.is_none(), "{what}: {wrong:?}");
            assert_same_run(&chosen, &one, &what);
        }
    }
}
