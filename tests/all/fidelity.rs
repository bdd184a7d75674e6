//! Fidelity against the standard cost model (issue 14): on the idealised
//! machine of `configs/ideal_ring.yaml` — only the inter-SIP links cost,
//! `L` = 500 ns and `B` = 100 GB/s each, everything inside a SIP (nearly)
//! free — every algorithm's simulated time, with real data checked, must
//! equal its textbook closed form within 1 % (the assertion is tighter:
//! [`TOLERANCE`]). The algorithms' IPCQ slots hold a whole ring step
//! (16 MiB), so each step is one message, as the closed forms assume.
//!
//! `cargo test --test all fidelity:: -- --nocapture` prints the whole table.
//!
//! Systematic differences, all below 0.031 %: the SIP-internal hops are not
//! exactly free (the validator caps paths at 1e6 GB/s and math at 1e7 G
//! elements/s, so a message of `m` bytes pays `m/1e6 GB/s` per internal
//! hop and an add of `e` elements `e/1e7 G/s`: ~1e-4 of its transfer time
//! each), and times are whole picoseconds.

use crate::common;
use common::*;
use kernbench::config::{CclConfig, Origin, TopologySpec, DEFAULT_CCL_YAML};
use kernbench::runtime::run_bench;

/// Required: 1 %. Asserted: 0.1 % (measured ≤ 0.031 %).
const TOLERANCE: f64 = 1e-3;
/// One inter-SIP link: latency (µs) and bandwidth (bytes per µs).
const L: f64 = 0.5;
const B: f64 = 100e3;
/// Rounds a ring phase keeps in flight (`kernbench_guest::ring::WAVE`).
const WAVE: f64 = 4.0;

fn ideal(n: u32, torus_w: Option<u32>) -> TopologySpec {
    let mut t = TopologySpec::from_yaml(
        include_str!("../../configs/ideal_ring.yaml"),
        Origin::Embedded("configs/ideal_ring.yaml"),
    )
    .unwrap();
    t.system.sips.count = n;
    if let Some(w) = torus_w {
        t.system.sips.topology = serde_yaml::from_str("torus_2d").unwrap();
        t.system.sips.w = Some(w);
        t.system.sips.h = Some(n / w);
    }
    t
}

/// The default ccl.yaml with slots big enough for one 16 MiB ring step,
/// in HBM, and every algorithm in one piece (the textbook algorithms send
/// each step as one message).
fn one_message_per_step() -> CclConfig {
    let mut text = big_slots();
    for ring in [
        "ring_rsag_allreduce",
        "ring_allgather",
        "ring_reducescatter",
        "ring_alltoall",
        "rabenseifner_allreduce",
        "binomial_broadcast",
        "binomial_reduce",
        "direct_alltoall",
    ] {
        let module = format!("    module: {ring}\n");
        assert!(text.contains(&module), "{ring} in the default ccl.yaml");
        text = text.replace(&module, &format!("{module}    chunk_size: 16777216\n"));
    }
    CclConfig::from_yaml(&text, Origin::Embedded("ccl.yaml, 16 MiB slots, one piece")).unwrap()
}

fn big_slots() -> String {
    DEFAULT_CCL_YAML
        .replace("slot_kib: 1024", "slot_kib: 16384")
        .replace("buffer_kind: tcm", "buffer_kind: hbm")
}

/// The ring algorithms with their default pieces (256 Ki elements).
fn pipelined() -> CclConfig {
    CclConfig::from_yaml(&big_slots(), Origin::Embedded("ccl.yaml, 16 MiB slots")).unwrap()
}

/// (size in bytes, simulated µs) of every row, data checked.
fn measure(
    bench: &str,
    algorithm: &str,
    t: TopologySpec,
    c: CclConfig,
    sizes: (&str, &str),
) -> Vec<(f64, f64)> {
    let mut req = request(
        bench,
        t,
        c,
        Some(algorithm),
        &["-b", sizes.0, "-e", sizes.1, "-f", "4"],
    );
    req.memory_digest = false;
    req.memory_budget = 12 << 30;
    let res = run_bench(&loader(), req).unwrap_or_else(|e| panic!("{algorithm}: {e}"));
    let rows = kernbench::report::aggregate(&res.rows, None);
    assert!(!rows.is_empty());
    rows.iter()
        .map(|r| {
            assert_eq!(r.wrong, 0, "{algorithm} at {} B: wrong data", r.size_bytes);
            (r.size_bytes as f64, r.time_ps as f64 / 1e6)
        })
        .collect()
}

/// Compare every row with `form(n, S)`; print the table lines.
fn check(
    c: &CclConfig,
    bench: &str,
    algorithm: &str,
    n: u32,
    torus_w: Option<u32>,
    sizes: (&str, &str),
    form: impl Fn(f64, f64) -> f64,
) {
    for (s, got) in measure(bench, algorithm, ideal(n, torus_w), c.clone(), sizes) {
        let want = form(n as f64, s);
        let err = (got - want) / want;
        eprintln!(
            "{algorithm:24} N={n:3} S={s:>9} B  simulated {got:10.3} us  closed form {want:10.3} us  {:+.4} %",
            err * 100.0
        );
        assert!(
            err.abs() <= TOLERANCE,
            "{algorithm}, N={n}, S={s} B: simulated {got} us, closed form {want} us ({:+.3} %)",
            err * 100.0
        );
    }
}

const ALL: (&str, &str) = ("1K", "16M");

/// Bandwidth-optimal ring all-reduce (reduce-scatter then all-gather):
/// `T = 2(N−1)·(L + (S/N)/B)`, N from 4 to 64, S from 1 KiB to 16 MiB.
#[test]
fn ring_reduce_scatter_all_gather_matches_2_n_minus_1_alpha_plus_s_over_nb() {
    let one = one_message_per_step();
    let form = |n: f64, s: f64| 2.0 * (n - 1.0) * (L + s / n / B);
    for n in [4, 5, 8, 16, 64] {
        check(
            &one,
            "ccl_allreduce",
            "ring_rsag_allreduce",
            n,
            None,
            ALL,
            form,
        );
    }
}

/// The same rings in their default pieces (256 Ki elements, 512 KiB of
/// f16, at least two per block here): the pieces pipeline across the
/// steps, every link is busy from the first byte to the last, and each
/// phase adds one latency (its last piece crossing the last hop) per wave
/// of [`WAVE`] rounds (a wave's pieces drain before the next wave starts):
/// `T = 2(N−1)·(S/N)/B + 2L·w` for the all-reduce, `(N−1)·(S/N)/B + L·w`
/// for all-gather and reduce-scatter, `w = ⌈k/4⌉` waves of the `k` pieces
/// of a block — below the one-message forms by about `2(N−2)·L`.
#[test]
fn pipelined_ring_phases_keep_every_link_busy() {
    let pipelined = pipelined();
    let waves = |n: f64, s: f64| ((s / n / 524288.0).ceil() / WAVE).ceil();
    for (n, sizes) in [(4, ("4M", "16M")), (8, ("8M", "8M")), (16, ("16M", "16M"))] {
        check(
            &pipelined,
            "ccl_allreduce",
            "ring_rsag_allreduce",
            n,
            None,
            sizes,
            |n, s| 2.0 * (n - 1.0) * s / n / B + 2.0 * L * waves(n, s),
        );
        for (bench, algorithm) in [
            ("ccl_allgather", "ring_allgather"),
            ("ccl_reducescatter", "ring_reducescatter"),
        ] {
            check(&pipelined, bench, algorithm, n, None, sizes, |n, s| {
                (n - 1.0) * s / n / B + L * waves(n, s)
            });
        }
    }
}

/// The seed's ring (the whole tensor every step): `(N−1)·(L + S/B)`;
/// ring all-gather and reduce-scatter: `(N−1)·(L + (S/N)/B)` (S the
/// larger buffer, nccl-tests' size).
#[test]
fn seed_ring_and_ring_all_gather_and_reduce_scatter_match_their_forms() {
    let one = one_message_per_step();
    for n in [4, 7, 16] {
        check(
            &one,
            "ccl_allreduce",
            "ring_allreduce",
            n,
            None,
            ALL,
            |n, s| (n - 1.0) * (L + s / B),
        );
        for (bench, algorithm) in [
            ("ccl_allgather", "ring_allgather"),
            ("ccl_reducescatter", "ring_reducescatter"),
        ] {
            check(&one, bench, algorithm, n, None, ALL, |n, s| {
                (n - 1.0) * (L + s / n / B)
            });
        }
    }
}

/// Pipelined ring broadcast and reduce along the chain of `N − 1` hops,
/// `k` chunks of `c` = 64 Ki f16 (128 KiB), the last `c_l`: chunk `j`
/// enters hop `h` at `h·(L + c/B) + j·c/B` (a link carries one chunk after
/// another at its bandwidth, the latencies of back-to-back chunks overlap),
/// so `T = (N−1)·L + (N−2 + k−1)·c/B + c_l/B`.
#[test]
fn pipelined_ring_broadcast_and_reduce_match_the_chain_pipeline() {
    let one = one_message_per_step();
    let form = |n: f64, s: f64| {
        let c = s.min(131072.0);
        let k = (s / c).ceil();
        let last = s - (k - 1.0) * c;
        (n - 1.0) * L + (n - 2.0 + k - 1.0) * c / B + last / B
    };
    for n in [4, 5, 16] {
        check(&one, "ccl_broadcast", "ring_broadcast", n, None, ALL, form);
        check(&one, "ccl_reduce", "ring_reduce", n, None, ALL, form);
    }
}

/// Ring all-to-all by relay: `N(N−1)/2` messages of `S/N` per rank, each
/// waiting for the one before it: `T = N(N−1)/2 · (L + (S/N)/B)`.
#[test]
fn relay_ring_all_to_all_matches_its_form() {
    let one = one_message_per_step();
    for n in [4, 5, 8] {
        check(
            &one,
            "ccl_alltoall",
            "ring_alltoall",
            n,
            None,
            ALL,
            |n, s| n * (n - 1.0) / 2.0 * (L + s / n / B),
        );
    }
}

/// The algorithms that talk to distant ranks, where their partners are
/// links apart without sharing a link (a ring of 3, a 2×2 torus; on bigger
/// rings their messages share links, see `tests/all/contention.rs`):
///
/// * Rabenseifner: `Σ_k 2·(d_k·L + S/2^(k+1)/B)` over the halving steps,
///   `d_k` the partner's distance in hops (2×2 torus, ranks placed along
///   the ring: 1 then 2 hops, `6L + 1.5·S/B`); with the non-power-of-two
///   fix-up on 3 ranks: `(L + S/B)` in, one exchange `2(L + S/2/B)`,
///   `(L + S/B)` out: `4L + 3·S/B`;
/// * binomial broadcast and reduce: the tree's depth (the largest
///   popcount of a relative rank below N) times `(L + S/B)`: a node's
///   sends to its children go out at once, each on its own link;
/// * direct all-to-all on 3 ranks: `(N−1)·(L + (S/N)/B)` (each receive
///   waits for its message before the next send is issued);
/// * double binary tree on 2 ranks (on more, its edges span several ring
///   hops and share links).
#[test]
fn direct_algorithms_match_their_forms_where_partners_share_no_link() {
    let one = one_message_per_step();
    check(
        &one,
        "ccl_allreduce",
        "rabenseifner_allreduce",
        4,
        Some(2),
        ALL,
        |_, s| 6.0 * L + 1.5 * s / B,
    );
    check(
        &one,
        "ccl_allreduce",
        "rabenseifner_allreduce",
        3,
        None,
        ALL,
        |_, s| 4.0 * L + 3.0 * s / B,
    );
    let depth = |n: f64| (0..n as u32).map(u32::count_ones).max().unwrap() as f64;
    for (n, w) in [(4, Some(2)), (3, None)] {
        for (bench, algorithm) in [
            ("ccl_broadcast", "binomial_broadcast"),
            ("ccl_reduce", "binomial_reduce"),
        ] {
            check(&one, bench, algorithm, n, w, ALL, |n, s| {
                depth(n) * (L + s / B)
            });
        }
    }
    // Double binary tree on 2 ranks: each half goes up one edge and back
    // in pieces of 128 KiB that pipeline, in waves of 16 pieces per half
    // (a root holds a wave's results until it has sent them down), both
    // directions of the link busy: `2L·w + S/B`, w = ⌈⌈(S/2)/c⌉/16⌉.
    let waves = |s: f64| ((s / 2.0 / 131072.0).ceil() / 16.0).ceil().max(1.0);
    check(
        &one,
        "ccl_allreduce",
        "double_tree_allreduce",
        2,
        None,
        ALL,
        |_, s| 2.0 * L * waves(s) + s / B,
    );
    check(
        &one,
        "ccl_alltoall",
        "direct_alltoall",
        3,
        None,
        ALL,
        |n, s| (n - 1.0) * (L + s / n / B),
    );
}
