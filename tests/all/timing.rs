//! Timing against closed forms (DESIGN §4).
//!
//! The model (documented in hw/machine.rs and hw/link.rs):
//! * a DMA of s bytes from A to B takes `setup + Σ latency(A→B) + s/min bw`;
//! * a MATH op on n elements takes `overhead + n / throughput`;
//! * DMA and MATH engines are in-order queues.
//!
//! The seed's ring all-reduce on p ranks is then, uncontended:
//! `T = L + (p−1)·X + M + S` with L the load (HBM→PE), X one ring step
//! (PE→next PE), M one add, S the store (PE→HBM): each step's send of the
//! received tile overlaps the previous add (M ≤ X), so only the last add is
//! exposed.

use crate::common;
use common::*;
use kernbench::config::TopologySpec;
use kernbench::engine::Executor;
use kernbench::hw::dtype::Dtype;
use kernbench::hw::Machine;
use kernbench::routing::PathRouter;
use kernbench::topology::{build, NodeId, PeCoord};
use kernbench::units::{ns_to_ps, Rate};
use std::sync::Arc;

fn pe(sip: u32) -> NodeId {
    NodeId::Pe(PeCoord {
        sip,
        cube: 0,
        pe: 0,
    })
}

/// One DMA of `bytes` from a to b, uncontended.
fn dma(t: &TopologySpec, r: &PathRouter, a: NodeId, b: NodeId, bytes: u64) -> u64 {
    let p = r.find_path(a, b).unwrap();
    let d = r.distance(&p);
    let (lat, bw) = (d.latency_ps, d.bottleneck);
    ns_to_ps(t.pe.dma.setup_ns) + lat + bw.unwrap().duration_ps(bytes).unwrap()
}

fn ring_closed_form(t: &TopologySpec, p: u32, bytes: u64) -> u64 {
    let (r, load, add, store) = figures(t, bytes);
    let step = (0..p)
        .map(|s| dma(t, &r, pe(s), pe((s + 1) % p), bytes))
        .max()
        .unwrap();
    assert!(
        add <= step,
        "the closed form assumes the add hides behind the next step"
    );
    load + (p as u64 - 1) * step + add + store
}

fn check_ring(t: TopologySpec, p: u32) {
    let res = run(
        "ccl_allreduce",
        t.clone(),
        ccl(),
        None,
        &["-b", "8", "-e", "1M", "-f", "16"],
    )
    .unwrap();
    let rows = kernbench::report::aggregate(&res.rows, res.alpha_beta.as_ref());
    assert_eq!(rows.len(), 5); // 8 B, 128 B, 2 KiB, 32 KiB, 512 KiB
    for row in rows {
        let want = ring_closed_form(&t, p, row.size_bytes);
        let err = (row.time_ps as f64 - want as f64).abs() / want as f64;
        eprintln!(
            "p={p} size={} sim={} formula={}",
            row.size_bytes, row.time_ps, want
        );
        assert!(
            err <= 0.01,
            "p={p} size={}: simulated {} ps, closed form {} ps ({:.3}%)",
            row.size_bytes,
            row.time_ps,
            want,
            err * 100.0
        );
        assert_eq!(row.wrong, 0);
    }
}

#[test]
fn uncontended_ring_allreduce_matches_its_closed_form() {
    for p in [2, 4, 8] {
        check_ring(topo(p), p);
    }
    check_ring(custom_topo(3), 3);
}

#[test]
fn the_bound_column_is_a_true_lower_bound_from_the_machine_figures() {
    let t = custom_topo(3);
    let res = run(
        "ccl_allreduce",
        t.clone(),
        ccl(),
        None,
        &["-b", "8", "-e", "1M", "-f", "32"],
    )
    .unwrap();
    let ab = res.alpha_beta.unwrap();
    let r = PathRouter::new(Arc::new(build(&t).unwrap()));
    let path = r.find_path(pe(0), pe(1)).unwrap();
    let d = r.distance(&path);
    let (lat, bw) = (d.latency_ps, d.bottleneck);
    assert_eq!(ab.alpha_ps, ns_to_ps(t.pe.dma.setup_ns) + lat);
    assert_eq!(ab.bandwidth, bw.unwrap());
    assert_eq!(
        ab.bandwidth,
        Rate::from_giga_per_s(50.0),
        "the inter-SIP link is the bottleneck"
    );
    // 3 SIPs on a ring: every SIP is one hop from the others, and two
    // 50 GB/s links enter each.
    let b = ab.bound.unwrap();
    let (setup, lambda) = (
        ns_to_ps(t.pe.dma.setup_ns),
        ns_to_ps(t.system.inter_sip_link.latency_ns),
    );
    assert_eq!((b.diameter, b.link_latency), (1, lambda));
    assert_eq!(b.ingress, Rate::from_giga_per_s(100.0));
    let rows = kernbench::report::aggregate(&res.rows, Some(&ab));
    assert_eq!(rows.len(), 4);
    for row in &rows {
        let n = row.size_bytes;
        let want = (setup + lambda + Rate::from_giga_per_s(100.0).duration_ps(n).unwrap())
            .max(setup + lambda);
        assert_eq!(
            row.bound_us,
            Some(kernbench::units::ps_to_us(want)),
            "{n} B"
        );
        let eff = row.efficiency.unwrap();
        assert!(
            eff > 0.0 && eff <= 1.0,
            "{n} B: efficiency {eff} above 100 %"
        );
    }
    let n = 1u64 << 20;
    assert!(
        (rows[3].busbw_gbps - rows[3].algbw_gbps * 4.0 / 3.0).abs() < 1e-9,
        "{n}"
    );
}

/// Engine + hardware alone, no wasm: a DMA load lands exactly at
/// setup + Σ latency + s/bottleneck; two loads from one HBM share its link.
#[test]
fn native_dma_matches_the_formula_exactly_and_shares_links() {
    let t = topo(1);
    let topo = Arc::new(build(&t).unwrap());
    let r = PathRouter::new(topo.clone());
    let m = Machine::new(topo);
    let bytes = 1u64 << 20;
    let src = m
        .alloc_tensor(
            kernbench::address::Space::Hbm { sip: 0, cube: 0 },
            &[(bytes / 2) as u32],
            Dtype::F16,
        )
        .unwrap();
    let ex = Executor::new();
    let (m2, addr) = (m.clone(), src.addr());
    let h = ex.spawn(async move {
        let a = m2
            .load(
                PeCoord {
                    sip: 0,
                    cube: 0,
                    pe: 0,
                },
                addr,
                &[(bytes / 2) as u32],
                Dtype::F16,
            )
            .unwrap();
        let b = m2
            .load(
                PeCoord {
                    sip: 0,
                    cube: 0,
                    pe: 1,
                },
                addr,
                &[(bytes / 2) as u32],
                Dtype::F16,
            )
            .unwrap();
        a.ready.wait().await;
        let ta = kernbench::engine::now();
        b.ready.wait().await;
        (ta, kernbench::engine::now())
    });
    ex.run();
    let (ta, tb) = h.try_take().unwrap();
    let hbm = NodeId::Hbm {
        sip: 0,
        cube: 0,
        stack: 0,
    };
    assert_eq!(ta, dma(&t, &r, hbm, pe(0), bytes));
    // pe1 sits at another corner; both paths start on the HBM link, whose
    // 800 GB/s is shared: the second load ends one HBM-serialisation later
    // than it would alone.
    let alone = dma(
        &t,
        &r,
        hbm,
        NodeId::Pe(PeCoord {
            sip: 0,
            cube: 0,
            pe: 1,
        }),
        bytes,
    );
    assert!(
        tb > alone,
        "contention must delay the second load ({tb} vs {alone})"
    );
}

/// Time for PE `pe` of sip0.cube0 to load `bytes` from its cube's HBM on
/// a machine built from `t`, engine and hardware only.
fn native_load_time(t: &TopologySpec, pe: u32, bytes: u64) -> u64 {
    let m = Machine::new(Arc::new(build(t).unwrap()));
    let n = (bytes / 2) as u32;
    let src = m
        .alloc_tensor(
            kernbench::address::Space::Hbm { sip: 0, cube: 0 },
            &[n],
            Dtype::F16,
        )
        .unwrap();
    let ex = Executor::new();
    let addr = src.addr();
    let h = ex.spawn(async move {
        let at = PeCoord {
            sip: 0,
            cube: 0,
            pe,
        };
        m.load(at, addr, &[n], Dtype::F16)
            .unwrap()
            .ready
            .wait()
            .await;
        kernbench::engine::now()
    });
    ex.run();
    h.try_take().unwrap()
}

/// Hop counts change simulated time by exactly their latency. By hand, on
/// the default 4x4 NoC (hbm 100 ns, NoC hop 1 ns, PE attach 1 ns, DMA
/// setup 20 ns, bottleneck the 256 GB/s PE attach):
/// - no zone: the HBM stack hangs off r2_0, PE2 off r0_3: 5 NoC hops;
/// - zone on row 1, columns 0–2: the stack moves to the router nearest
///   the zone's centre (1,1), r1_0; Manhattan to r0_3 is 4 hops, but the
///   zone blocks every short way: r1_0 → r2_0 → r3_0 → r3_1 → r3_2, then
///   3 hops west and 1 south: 8 hops.
#[test]
fn exclusion_zone_detour_costs_exactly_its_extra_hops() {
    let bytes = 1u64 << 20;
    let transfer = Rate::from_giga_per_s(256.0).duration_ps(bytes).unwrap();
    assert_eq!(
        native_load_time(&topo(1), 2, bytes),
        ns_to_ps(20.0 + 100.0 + 5.0 + 1.0) + transfer
    );
    let text = kernbench::config::DEFAULT_TOPOLOGY_YAML
        .replace("count: 4", "count: 1")
        .replace(
            "exclusion_zone: null",
            "exclusion_zone: {x: 0, y: 1, w: 3, h: 1}",
        );
    let detour = TopologySpec::from_yaml(&text, kernbench::config::Origin::Embedded("t")).unwrap();
    assert_eq!(
        native_load_time(&detour, 2, bytes),
        ns_to_ps(20.0 + 100.0 + 8.0 + 1.0) + transfer
    );
}
/// The ring's closed form on a chip laid out differently: 2x3 cubes, an
/// 8x8 NoC with an HBM exclusion zone, two HBM stacks, two UCIe ports
/// per edge.
#[test]
fn ring_closed_form_holds_on_a_laid_out_chip() {
    let text = kernbench::config::DEFAULT_TOPOLOGY_YAML
        .replace("w: 4\n    h: 4\n  ucie", "w: 2\n    h: 3\n  ucie")
        .replace("w: 4\n    h: 4\n    link", "w: 8\n    h: 8\n    link")
        .replace(
            "exclusion_zone: null",
            "exclusion_zone: {x: 2, y: 2, w: 4, h: 3}",
        )
        .replace("stacks: 1", "stacks: 2")
        .replace("ports_per_edge: 1", "ports_per_edge: 2");
    let t = TopologySpec::from_yaml(&text, kernbench::config::Origin::Embedded("t")).unwrap();
    assert_eq!(t.cube.hbm.stacks, 2);
    check_ring(t, 4);
}

/// The router and, for a tile of `bytes` on SIP 0, uncontended: its load
/// (HBM → PE), one add and its store (PE → HBM).
fn figures(t: &TopologySpec, bytes: u64) -> (PathRouter, u64, u64, u64) {
    let r = PathRouter::new(Arc::new(build(t).unwrap()));
    let hbm = NodeId::Hbm {
        sip: 0,
        cube: 0,
        stack: 0,
    };
    let load = dma(t, &r, hbm, pe(0), bytes);
    let store = dma(t, &r, pe(0), hbm, bytes);
    let add = ns_to_ps(t.pe.math.overhead_ns)
        + Rate::from_giga_per_s(t.pe.math.throughput_gflops)
            .duration_ps(bytes / 2)
            .unwrap();
    (r, load, add, store)
}

/// tree_allreduce and mesh_allreduce on 3 SIPs of a ring, where every
/// tree edge and every mesh-line edge is one SIP hop of the same cost X:
/// * tree (root 0, leaves 1 and 2): the leaves' partial sums reach the
///   root after L + X; its two adds run back to back; it then sends the
///   total to C0 and C1, the second one DMA set-up later; the slower leaf
///   stores last: `T = L + X + 2M + setup + X + S`.
/// * mesh (one row 0-1-2): the east end's tile reaches 1 after L + X, 1
///   adds and passes west, 0 adds and sends back east through 1:
///   `T = L + X'₂₁ + M + X'₁₀ + M + X'₀₁ + Y₁₂ + S₂`, X'ab a hop from
///   a's PE into b's SRAM, where mesh_allreduce's slots live (the E and W
///   ports sit at different routers, so the hops differ), Y₁₂ the forward
///   from slot to slot and S₂ the store from rank 2's slot.
#[test]
fn tree_and_mesh_allreduce_match_their_closed_forms() {
    let t = topo(3);
    let bytes = 16;
    let (r, load, add, store) = figures(&t, bytes);
    let x = (0..3)
        .flat_map(|a| (0..3).filter(move |&b| b != a).map(move |b| (a, b)))
        .map(|(a, b)| dma(&t, &r, pe(a), pe(b), bytes))
        .collect::<Vec<_>>();
    assert!(
        x.iter().all(|&v| v == x[0]),
        "every hop costs the same: {x:?}"
    );
    let x = x[0];
    let setup = ns_to_ps(t.pe.dma.setup_ns);
    // mesh_allreduce keeps its slots in the peer cube's SRAM (ccl.yaml).
    let xs = |a: u32, b: u32| dma(&t, &r, pe(a), NodeId::Sram { sip: b, cube: 0 }, bytes);
    let sram = |s: u32| NodeId::Sram { sip: s, cube: 0 };
    let hbm2 = NodeId::Hbm {
        sip: 2,
        cube: 0,
        stack: 0,
    };
    // Rank 1 forwards the total straight from its slot, and rank 2 stores
    // it from its slot: those two DMAs start in SRAM.
    let mesh_path = xs(2, 1)
        + xs(1, 0)
        + xs(0, 1)
        + dma(&t, &r, sram(1), sram(2), bytes)
        + dma(&t, &r, sram(2), hbm2, bytes);
    for (algorithm, want) in [
        ("tree_allreduce", load + x + 2 * add + setup + x + store),
        ("mesh_allreduce", load + mesh_path + 2 * add),
    ] {
        let res = run(
            "ccl_allreduce",
            t.clone(),
            ccl(),
            Some(algorithm),
            &["-b", "16", "-e", "16"],
        )
        .unwrap();
        let got = res.rows.iter().map(|r| r.time_ps).max().unwrap();
        assert_eq!(
            got, want,
            "{algorithm}: simulated {got} ps, closed form {want} ps"
        );
    }
}

/// `NodeId` of PE 0 of `cube` of `sip`, its cube's SRAM and HBM stack 0.
fn pe_at(sip: u32, cube: u32) -> NodeId {
    NodeId::Pe(PeCoord { sip, cube, pe: 0 })
}
fn sram_at(sip: u32, cube: u32) -> NodeId {
    NodeId::Sram { sip, cube }
}
fn hbm_at(sip: u32, cube: u32) -> NodeId {
    NodeId::Hbm {
        sip,
        cube,
        stack: 0,
    }
}

/// lrab_hierarchical_allreduce, uncontended, its slots in SRAM (the
/// algorithm's default: 3 slots, so no send waits for a slot's credit),
/// 16 B tiles, on a ring of p SIPs:
/// * one cube per SIP (the single-cube skip): the seed's ring on cube 0
///   over `global_E` / `global_W`: the first send goes from the PE's TCM
///   into the next SIP's SRAM (X), every later one forwards the received
///   tile from SRAM to SRAM (Y), the last add (M) and the store (S) follow:
///   `T = L + X + (p−2)·Y + M + S`.
/// * two cubes side by side (1 row): cube 1 loads (L₁) and sends its tile
///   west into cube 0's SRAM (C); cube 0 adds (M), runs that ring, then
///   sends the sum east into cube 1's SRAM (C′) and stores it (S₀) behind
///   that send on its DMA queue; cube 1 stores from its slot (S′₁):
///   `T = L₁ + C + M + [X + (p−2)·Y + M] + C′ + max(S₀, S′₁)`.
#[test]
fn lrab_hierarchical_allreduce_matches_its_closed_form() {
    let bytes = 16u64;
    for (p, cubes) in [(2u32, 1u32), (3, 1), (5, 1), (3, 2), (4, 2)] {
        let mut t = topo(p);
        t.sip.cube_mesh.w = cubes;
        t.sip.cube_mesh.h = 1;
        let (r, load, add, store) = figures(&t, bytes);
        let d = |a: NodeId, b: NodeId| dma(&t, &r, a, b, bytes);
        let worst = |f: &dyn Fn(u32) -> u64| (0..p).map(f).max().unwrap();
        let x = worst(&|s| d(pe_at(s, 0), sram_at((s + 1) % p, 0)));
        let y = worst(&|s| d(sram_at(s, 0), sram_at((s + 1) % p, 0)));
        let ring = x + (p as u64 - 2) * y + add;
        let want = if cubes == 1 {
            load + ring + store
        } else {
            let l1 = worst(&|s| d(hbm_at(s, 1), pe_at(s, 1)));
            let c = worst(&|s| d(pe_at(s, 1), sram_at(s, 0)));
            let c_back = worst(&|s| d(pe_at(s, 0), sram_at(s, 1)));
            let s1 = worst(&|s| d(sram_at(s, 1), hbm_at(s, 1)));
            l1.max(load) + c + add + ring + c_back + store.max(s1)
        };
        let e = run(
            test_component("dist_probe"),
            t,
            ccl(),
            None,
            &["hier", &cubes.to_string()],
        )
        .unwrap_err()
        .to_string();
        let got: u64 = e
            .split(" at ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no time in {e}"));
        assert!(e.contains(&format!("hier ok ws={p}")), "{e}");
        eprintln!("lrab {p} SIPs x {cubes} cubes: {got} ps (closed form {want} ps)");
        assert_eq!(
            got, want,
            "{p} SIPs x {cubes} cubes: simulated {got} ps, closed form {want} ps"
        );
    }
}

/// tree_allreduce on 4 SIPs of a 2x2 torus, where every tree edge (0–1,
/// 0–2, 1–3) is one SIP hop of the same cost X. Leaf 3's tile reaches 1
/// after L + X; 1 adds and passes up (X); the root adds its two children
/// one after the other (2M) and sends the total down to 1, which forwards
/// it from its slot to 3 (2X); 3 stores from its slot:
/// `T = L + X + M + X + 2M + X + X + S = L + 4X + 3M + S`.
#[test]
fn tree_allreduce_on_a_2x2_torus_matches_its_closed_form() {
    let mut t = topo(4);
    t.system.sips.topology = serde_yaml::from_str("torus_2d").unwrap();
    let bytes = 16;
    let (r, load, add, store) = figures(&t, bytes);
    let edges = [(0, 1), (1, 0), (0, 2), (2, 0), (1, 3), (3, 1)];
    let x: Vec<u64> = edges
        .iter()
        .map(|&(a, b)| dma(&t, &r, pe(a), pe(b), bytes))
        .collect();
    assert!(x.iter().all(|&v| v == x[0]), "one hop each: {x:?}");
    let want = load + 4 * x[0] + 3 * add + store;
    let res = run(
        "ccl_allreduce",
        t,
        ccl(),
        Some("tree_allreduce"),
        &["-b", "16", "-e", "16"],
    )
    .unwrap();
    let got = res.rows.iter().map(|r| r.time_ps).max().unwrap();
    assert_eq!(got, want, "simulated {got} ps, closed form {want} ps");
}

/// `recv_async` overlaps a receive with other work (test component
/// `overlap_probe`, 2 SIPs, 4 KiB): rank 1 loads its tile and sends it to
/// rank 0, where it lands at `L + X`. Rank 0 serial (`recv`, then load,
/// add, store) ends at `L + X + L + M + S`; overlapped (`recv_async`,
/// load, `wait`, add, store) its load runs while the message comes and it
/// ends at `L + X + M + S`: exactly one load `L` earlier.
#[test]
fn recv_async_saves_exactly_the_load_it_overlaps() {
    let t = topo(2);
    let bytes = 4096;
    let (r, load, add, store) = figures(&t, bytes);
    let x = dma(&t, &r, pe(1), pe(0), bytes);
    let time_with = |l: &std::sync::Arc<kernbench::runtime::Loader>, mode: u32| {
        let c = probe_ccl("overlap_probe", mode, "");
        let res = run_with(
            l,
            "ccl_allreduce",
            t.clone(),
            c,
            None,
            &["-b", "4K", "-e", "4K"],
        )
        .unwrap();
        res.rows.iter().map(|r| r.time_ps).max().unwrap()
    };
    let (serial, overlapped) = (time_with(&loader(), 0), time_with(&loader(), 1));
    // A kernel recorded ahead of time and one run in step agree.
    assert_eq!(overlapped, time_with(&in_step_loader(), 1));
    assert_eq!(serial, load + x + load + add + store, "serial");
    assert_eq!(overlapped, load + x + add + store, "overlapped");
    assert_eq!(serial - overlapped, load);
}

fn math_probe(mode: u32) -> kernbench::config::CclConfig {
    probe_ccl("math_probe", mode, "")
}

/// Casts, unary ops and reductions cost `overhead + elements / throughput`
/// on the MATH unit, a reduction one element of work per input element.
/// On one SIP (no ring step), 16 B: mode 0 is load, cast to f32, cast
/// back, store: `L + 2M + S`; mode 1 is load, reduce, neg, neg, store:
/// `L + 3M + S` (M for 8 elements in each case). On 2–5 SIPs both modes
/// sum every element (the bench's reference).
#[test]
fn casts_unary_ops_and_reductions_take_the_math_units_time_and_keep_the_sums() {
    let t = topo(1);
    let (_, load, add, store) = figures(&t, 16);
    let time = |mode| {
        let res = run(
            "ccl_allreduce",
            t.clone(),
            math_probe(mode),
            None,
            &["-b", "16", "-e", "16"],
        )
        .unwrap();
        assert!(res.rows.iter().all(|r| r.wrong == 0), "{:?}", res.rows);
        res.rows[0].time_ps
    };
    // `add` is the MATH cost of 8 elements (16 B of f16).
    assert_eq!(time(0), load + 2 * add + store, "cast, cast back");
    assert_eq!(time(1), load + 3 * add + store, "reduce, neg, neg");
    for n in [2, 3, 5] {
        for mode in [0, 1] {
            let res = run(
                "ccl_allreduce",
                topo(n),
                math_probe(mode),
                None,
                &["-b", "8", "-e", "4K", "-f", "8"],
            )
            .unwrap();
            assert!(
                res.rows.iter().all(|r| r.wrong == 0),
                "mode {mode} on {n}: {:?}",
                res.rows
            );
        }
    }
}

fn recv_probe(mode: u32) -> kernbench::config::CclConfig {
    probe_ccl("recv_probe", mode, "")
}

/// Round-robin `recv`, `recv_into` and `send_addr` through the host, both
/// ways a kernel runs: every sum right. `send_addr` reads the tile from HBM
/// into the peer's slot in one DMA (`Xh`), so on 2 SIPs, 16 B, a rank ends
/// at `Xh + L + M + S` (its own load waits for the receive).
#[test]
fn round_robin_recv_recv_into_and_send_addr_keep_the_sums_and_time() {
    for l in [loader(), in_step_loader()] {
        for (mode, n) in [(0, 3), (1, 2), (2, 2)] {
            let res = run_with(
                &l,
                "ccl_allreduce",
                topo(n),
                recv_probe(mode),
                None,
                &["-b", "8", "-e", "4K", "-f", "8"],
            )
            .unwrap_or_else(|e| panic!("mode {mode}: {e}"));
            assert!(
                res.rows.iter().all(|r| r.wrong == 0),
                "mode {mode}: {:?}",
                res.rows
            );
        }
    }
    let t = topo(2);
    let (r, load, add, store) = figures(&t, 16);
    let xh = (0..2)
        .map(|s| dma(&t, &r, hbm_at(s, 0), pe((s + 1) % 2), 16))
        .max()
        .unwrap();
    let res = run(
        "ccl_allreduce",
        t,
        recv_probe(2),
        None,
        &["-b", "16", "-e", "16"],
    )
    .unwrap();
    let got = res.rows.iter().map(|r| r.time_ps).max().unwrap();
    assert_eq!(got, xh + load + add + store);
}

/// `backpressure: poll`: a sender with no free slot sees one only at its
/// next look, every `poll_interval_ns` from when it started waiting;
/// `sleep` (the default) sees it as soon as the credit is back. The ring on
/// 3 SIPs in 8 chunks with two slots per direction runs its senders into
/// full rings: polling every picosecond equals sleeping; polling every
/// 10 µs costs each wait up to one interval. (With one slot the seed's
/// ring deadlocks: each rank holds its only slot with the tile it
/// forwards.)
#[test]
fn polling_senders_see_a_freed_slot_only_at_their_next_look() {
    let time = |extra: &str| {
        let text = kernbench::config::DEFAULT_CCL_YAML.replace(
            "    module: kernbench.ccl.algorithms.ring_allreduce\n",
            &format!("    module: kernbench.ccl.algorithms.ring_allreduce\n    {extra}\n"),
        );
        let text = text.replacen(
            "    n_slots: 4\n",
            "    n_slots: 2\n    chunk_size: 64\n",
            1,
        );
        let c = kernbench::config::CclConfig::from_yaml(
            &text,
            kernbench::config::Origin::Embedded("t"),
        )
        .unwrap();
        let res = run("ccl_allreduce", topo(3), c, None, &["-b", "1K", "-e", "1K"]).unwrap();
        assert!(res.rows.iter().all(|r| r.wrong == 0));
        res.rows.iter().map(|r| r.time_ps).max().unwrap()
    };
    let sleep = time("backpressure: sleep");
    assert_eq!(
        time("strict_validation: false"),
        sleep,
        "sleep is the default"
    );
    assert_eq!(
        time("backpressure: poll\n    poll_interval_ns: 0.001"),
        sleep
    );
    let slow = time("backpressure: poll\n    poll_interval_ns: 10000");
    let interval = 10_000_000;
    eprintln!("sleep {sleep} ps, poll every 10 us {slow} ps");
    assert!(
        slow > sleep + interval / 2,
        "sleep {sleep} ps, poll every 10 us {slow} ps"
    );
}

/// The matrix unit's time for a 4x4 f16 tile squared (`overhead + 2·4·4·4
/// / rate(f16)`) and the vector unit's for casting its 16 elements.
fn square_4x4_f16(t: &TopologySpec) -> (u64, u64) {
    let g = &t.pe.gemm;
    let gemm = ns_to_ps(g.overhead_ns)
        + Rate::from_giga_per_s(g.throughput_tflops.f16 * 1000.0)
            .duration_ps(2 * 4 * 4 * 4)
            .unwrap();
    let cast = ns_to_ps(t.pe.math.overhead_ns)
        + Rate::from_giga_per_s(t.pe.math.throughput_gflops)
            .duration_ps(16)
            .unwrap();
    (gemm, cast)
}

/// The matrix unit: on one SIP, 32 B (a 4x4 f16 tile), `math_probe` mode
/// 3 loads the tile, squares it with `tl.gemm` (f32 out), casts it back
/// and stores it: `L + G + M + S` with `G = overhead + 2·4·4·4 / rate(f16)`
/// from topology.yaml's `pe.gemm`, M the cast of 16 elements.
#[test]
fn a_gemm_takes_its_overhead_and_flops_at_the_dtypes_rate() {
    let t = topo(1);
    let (_, load, _, store) = figures(&t, 32);
    let (gemm, cast) = square_4x4_f16(&t);
    let res = run(
        "ccl_allreduce",
        t.clone(),
        math_probe(3),
        None,
        &["-b", "32", "-e", "32"],
    )
    .unwrap();
    assert_eq!(res.rows[0].time_ps, load + gemm + cast + store);
    assert_eq!(res.stats.gemm_commands, 1);
}

/// `torch.launch` from a bench: `math_probe` mode 3 squares a 4x4 f16 tile
/// on the matrix unit; the bench checks the product and reads the time,
/// `L + G + M + S` as in the collective run; mode 4 does `x + x·x` in one
/// `tl.composite` (gemm-acc), `L + G + E + S` with the epilogue E = M;
/// mode 5's bias of the wrong shape fails naming the call; a launch on a tensor of
/// another device, or of an unknown component, is an error saying so.
#[test]
fn a_bench_launches_a_kernel_on_its_tensor_and_reads_its_time() {
    let t = topo(2);
    let (_, load, _, store) = figures(&t, 32);
    let (gemm, cast) = square_4x4_f16(&t);
    let e = run(
        test_component("dist_probe"),
        t,
        ccl(),
        None,
        &["launch", test_component("math_probe")],
    )
    .unwrap_err()
    .to_string();
    let want = load + gemm + cast + store;
    assert!(e.contains(&format!("launch wrong=0 time={want} |")), "{e}");
    // The gemm-acc composite's epilogue (16 elements on the MATH unit)
    // costs what the cast did.
    assert!(
        e.contains(&format!("composite wrong=0 time={want} |")),
        "{e}"
    );
    assert!(
        e.contains("tl.composite(gemm-bias, out_dtype=f16)")
            && e.contains("needs c of shape [4], got [4, 4]")
            && e.contains("sip0.cube0.pe0"),
        "{e}"
    );
    assert!(
        e.contains("the tensor lives on SIP 0 but the current device is 1"),
        "{e}"
    );
    assert!(
        e.contains("torch.launch:") && e.contains("no_such_kernel"),
        "{e}"
    );
}

/// The `gemm_single_pe` bench (the `gemm` kernel, launched on one PE):
/// with n = k = 512 and 32-row blocks the matrix unit is the bottleneck
/// (the next block's load and this block's store take less than a block's
/// GEMM), so each further block adds exactly one
/// `G = overhead + 2·32·512·512 / rate(dtype)`, for every float dtype;
/// and every element is within the dtype's rounding of the reference.
#[test]
fn the_gemm_bench_adds_one_gemm_time_per_row_block_in_every_dtype() {
    let t = topo(1);
    let g = &t.pe.gemm;
    for (dtype, tflops) in [
        ("f16", g.throughput_tflops.f16),
        ("bf16", g.throughput_tflops.bf16),
        ("f32", g.throughput_tflops.f32),
    ] {
        let block = ns_to_ps(g.overhead_ns)
            + Rate::from_giga_per_s(tflops * 1000.0)
                .duration_ps(2 * 32 * 512 * 512)
                .unwrap();
        let time = |m: u32| {
            let m = m.to_string();
            let args = [
                "-m", &m, "-n", "512", "-k", "512", "--dtype", dtype, "--tile-m", "32",
            ];
            let res = run("gemm_single_pe", t.clone(), ccl(), None, &args).unwrap();
            let row = &res.kernel_rows[0];
            assert_eq!(
                (row.wrong, row.checked),
                (0, u64::from(m.parse::<u32>().unwrap()) * 512)
            );
            assert_eq!(
                res.stats.gemm_commands,
                u64::from(m.parse::<u32>().unwrap() / 32)
            );
            row.time_ps
        };
        let (t2, t3, t4) = (time(64), time(96), time(128));
        assert_eq!((t3 - t2, t4 - t3), (block, block), "{dtype}");
    }
}
