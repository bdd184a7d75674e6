//! Tests of [`super`]: paths against Dijkstra's, the port bound between
//! far SIPs, tables made on a helper thread, exclusion zones and views.

use super::*;
use crate::topology::build;

fn router_for(edits: &[(&str, &str)]) -> PathRouter {
    let spec = crate::config::edited_default_topology(edits);
    PathRouter::new(Arc::new(build(&spec).unwrap()))
}

fn n(s: &str) -> NodeId {
    s.parse().unwrap()
}

#[test]
fn neighbour_sips_cross_exactly_one_inter_sip_link() {
    let r = router_for(&[]);
    let t = r.topology().clone();
    let p = r
        .find_path(n("sip0.cube0.pe0"), n("sip1.cube0.pe0"))
        .unwrap();
    let kinds: Vec<_> = p.iter().map(|&l| t.links[l as usize].kind).collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == LinkKind::InterSip).count(),
        1
    );
    assert_eq!(kinds.first(), Some(&LinkKind::PeAttach));
    assert_eq!(kinds.last(), Some(&LinkKind::PeAttach));
    for w in p.windows(2) {
        assert_eq!(t.links[w[0] as usize].to, t.links[w[1] as usize].from);
    }
}

#[test]
fn searches_while_the_tables_are_made_on_a_helper_find_the_same_paths() {
    let edits = [("count: 4", "count: 8")];
    let cold = router_for(&edits);
    let warming = Arc::new(router_for(&edits));
    let pairs: Vec<(NodeId, NodeId)> = (0..8)
        .map(|s| {
            (
                n(&format!("sip{s}.cube0.pe0")),
                n(&format!("sip{}.cube5.pe2", (s + 1) % 8)),
            )
        })
        .collect();
    let helper = warming.warm_in_background(View::Noc);
    for &(a, b) in &pairs {
        assert_eq!(
            warming.find_path(a, b).unwrap(),
            cold.find_path(a, b).unwrap()
        );
    }
    drop(helper);
    // Made once: the helper's tables are the ones the searches used.
    let noc = View::ALL.iter().position(|v| *v == View::Noc).unwrap();
    assert!(warming.views[noc].get().is_some() && warming.rank.get().is_some());
    let made = {
        let adjacency = warming.adjacency(View::Noc);
        let n = warming.topology().node_count();
        let scratch = warming.scratch[0].lock().unwrap();
        assert_eq!(scratch.dist.len(), n);
        // The second, as a second thread's search sizes it.
        let mut spare = warming.scratch[1].lock().unwrap();
        spare.size_for(n);
        adjacency.bytes() as usize
            + warming.rank().len()
            + std::mem::size_of_val(&warming.bound.get().unwrap().sip_of[..])
            + [&*scratch, &*spare]
                .iter()
                .map(|s| std::mem::size_of_val(&s.dist[..]) + std::mem::size_of_val(&s.pred[..]))
                .sum::<usize>()
    } as u64;
    let charged = warming.table_bytes();
    assert!(
        made <= charged && made * 100 >= charged * 99,
        "{made} of {charged}"
    );
}

/// Paths found in a batch, half on a helper thread with its own
/// tables, are the paths found one search after another; a pair with
/// no path is left for the caller's own search to report.
#[test]
fn paths_found_in_a_batch_on_two_threads_are_the_paths_found_one_by_one() {
    let edits = [("count: 4", "count: 8")];
    let (cold, batch) = (router_for(&edits), router_for(&edits));
    // Every PE of each SIP to a PE of the next: 512 pairs.
    let pes: Vec<PeCoord> = batch.topology().pes().collect();
    let pairs: Vec<(NodeId, NodeId)> = pes
        .iter()
        .map(|&p| {
            let next = PeCoord {
                sip: (p.sip + 1) % 8,
                ..p
            };
            (NodeId::Pe(p), NodeId::Pe(next))
        })
        .collect();
    assert!(pairs.len() >= ON_A_HELPER_FROM, "enough for the helper");
    let missing = n("sip9.cube0.pe0");
    let mut asked = pairs.clone();
    asked.push((n("sip0.cube0.pe0"), missing));
    batch.find_paths(&asked);
    assert_eq!(
        batch.cache.lock().unwrap().len(),
        pairs.len(),
        "each pair once"
    );
    for &(a, b) in &pairs {
        let cached = batch.cache.lock().unwrap()[&(View::Noc, a, b)].clone();
        assert_eq!(cached, cold.find_path(a, b).unwrap(), "{a} -> {b}");
    }
    assert!(batch.find_path(n("sip0.cube0.pe0"), missing).is_err());
}

#[test]
fn the_latency_back_is_the_least_latency_of_the_path_back() {
    for edits in [
        vec![],
        vec![
            ("count: 4", "count: 9"),
            ("topology: ring_1d ", "topology: torus_2d "),
        ],
    ] {
        let r = router_for(&edits);
        let pes: Vec<NodeId> = r.topology().pes().map(NodeId::Pe).collect();
        let hbm = n("sip1.cube5.hbm0");
        for (i, &a) in pes.iter().enumerate().step_by(7) {
            for b in [pes[(i * 13 + 5) % pes.len()], hbm] {
                let back = r.find_path(b, a).unwrap();
                assert_eq!(
                    r.latency_back(a, b).unwrap(),
                    r.distance(&back).latency_ps,
                    "{a} -> {b}"
                );
            }
        }
    }
}

#[test]
fn the_bounded_search_finds_dijkstras_paths_tie_break_included() {
    // A router whose bound is 0 everywhere searches as plain Dijkstra.
    let plain = |r: &PathRouter| {
        let bound = SipBound::new(&r.topo);
        assert!(bound.leave_sip > 0, "the topology has SIP links");
        let _ = r.bound.set(SipBound {
            leave_sip: 0,
            arrival_floor: false,
            by_ports: false,
            ..bound
        });
    };
    for edits in [
        vec![],
        vec![
            ("count: 4", "count: 6"),
            ("topology: ring_1d", "topology: torus_2d"),
            ("# w: 2 ", "w: 3 "),
            ("w: 4\n    h: 4\n    link", "w: 2\n    h: 3\n    link"),
        ],
        vec![
            ("topology: ring_1d", "topology: mesh_2d_no_wrap"),
            ("w: 4\n    h: 4\n    link", "w: 3\n    h: 2\n    link"),
        ],
    ] {
        let (a_star, dijkstra) = (router_for(&edits), router_for(&edits));
        plain(&dijkstra);
        let t = a_star.topology().clone();
        let nodes: Vec<NodeId> = t
            .graph
            .node_weights()
            .copied()
            .filter(|n| matches!(n, NodeId::Pe(_) | NodeId::Hbm { .. } | NodeId::MCpu { .. }))
            .collect();
        let mut compared = 0;
        // A spread of sources and destinations (coprime strides).
        for (i, &from) in nodes.iter().enumerate().step_by(11) {
            for &to in nodes.iter().skip(i % 13).step_by(13) {
                for view in View::ALL {
                    let (x, y) = (
                        a_star.find_path_in(view, from, to),
                        dijkstra.find_path_in(view, from, to),
                    );
                    assert_eq!(x, y, "{from} -> {to} in {view:?}");
                    compared += usize::from(x.is_ok_and(|p| !p.is_empty()));
                }
            }
        }
        assert!(compared > 300, "{compared} paths compared");
    }
}

/// Between SIPs that are not neighbours, the port tables' least
/// latencies are the latencies of Dijkstra's paths, and the search
/// they bound finds those paths, tie-break included: on a ring, a
/// torus with two UCIe ports an edge, and a mesh whose edge SIPs lack
/// ports.
#[test]
fn the_port_bound_finds_dijkstras_paths_and_latencies_between_far_sips() {
    let cubes = |w: u32, h: u32| {
        (
            "w: 4\n    h: 4\n  ucie",
            format!("w: {w}\n    h: {h}\n  ucie"),
        )
    };
    let cases: Vec<Vec<(&str, String)>> = vec![
        vec![("count: 4", "count: 10".into()), cubes(2, 2)],
        vec![
            ("count: 4", "count: 16".into()),
            ("topology: ring_1d", "topology: torus_2d".into()),
            ("ports_per_edge: 1", "ports_per_edge: 2".into()),
            cubes(2, 1),
        ],
        vec![
            ("count: 4", "count: 12".into()),
            ("topology: ring_1d", "topology: mesh_2d_no_wrap".into()),
            ("# w: 2 ", "w: 4 ".into()),
            ("# h: 2 ", "h: 3 ".into()),
            (
                "w: 4\n    h: 4\n    link",
                "w: 3\n    h: 2\n    link".into(),
            ),
            cubes(2, 2),
        ],
    ];
    for edits in cases {
        let edits: Vec<(&str, &str)> = edits.iter().map(|(a, b)| (*a, b.as_str())).collect();
        let (ports, dijkstra) = (router_for(&edits), router_for(&edits));
        let bound = SipBound::new(&dijkstra.topo);
        let _ = dijkstra.bound.set(SipBound {
            leave_sip: 0,
            arrival_floor: false,
            by_ports: false,
            ..bound
        });
        let t = ports.topology().clone();
        assert!(
            SipPorts::of(&t, ports.adjacency(View::Noc)).is_some(),
            "{edits:?}: the machine has the port structure"
        );
        let nodes: Vec<NodeId> = t
            .graph
            .node_weights()
            .copied()
            .filter(|n| matches!(n, NodeId::Pe(_) | NodeId::Hbm { .. }))
            .collect();
        let far = |a: NodeId, b: NodeId| {
            let (sa, sb) = (a.sip(), b.sip());
            ports.bound().by_ports(sa, sb)
        };
        let mut compared = 0;
        for (i, &from) in nodes.iter().enumerate().step_by(5) {
            for &to in nodes.iter().skip(i % 7).step_by(7) {
                if !far(from, to) {
                    continue;
                }
                // The latency first: it makes the tables, no path.
                let least = ports.latency_back(from, to).unwrap();
                let searched = ports
                    .cache
                    .lock()
                    .unwrap()
                    .contains_key(&(View::Noc, from, to));
                assert!(!searched, "{from} -> {to}: a path searched for a latency");
                let expected = dijkstra.find_path(from, to).unwrap();
                assert_eq!(
                    least,
                    dijkstra.distance(&expected).latency_ps,
                    "{from} -> {to}"
                );
                assert_eq!(
                    ports.find_path(from, to).unwrap(),
                    expected,
                    "{from} -> {to}"
                );
                // Walked back, not searched.
                let sp = ports.ports.get().unwrap().as_ref().unwrap();
                let [ia, ib] = [from, to].map(|n| t.node_index(&n).unwrap().index());
                let from_a = sp.toward(ports.adjacency(View::Noc), ia).unwrap();
                let walked = walk_back(sp, &from_a, (&t, View::Noc, ports.rank()), ia, ib);
                assert_eq!(walked.as_deref(), Some(&expected[..]), "{from} -> {to}");
                compared += 1;
            }
        }
        assert!(compared > 200, "{edits:?}: {compared} far pairs compared");
    }
}

#[test]
fn same_node_is_an_empty_path() {
    let r = router_for(&[]);
    assert!(r
        .find_path(n("sip0.cube0.pe0"), n("sip0.cube0.pe0"))
        .unwrap()
        .is_empty());
}

#[test]
fn router_paths_are_manhattan_and_x_then_y() {
    let r = router_for(&[("w: 4\n    h: 4\n    link", "w: 8\n    h: 8\n    link")]);
    for (a, b) in [
        ((0, 0), (7, 7)),
        ((5, 1), (2, 6)),
        ((7, 7), (0, 0)),
        ((3, 3), (3, 0)),
    ] {
        let from = NodeId::Router {
            sip: 0,
            cube: 0,
            x: a.0,
            y: a.1,
        };
        let to = NodeId::Router {
            sip: 0,
            cube: 0,
            x: b.0,
            y: b.1,
        };
        let nodes = r
            .find_node_path(View::CubeLocal, &from.to_string(), &to.to_string())
            .unwrap();
        assert_eq!(
            nodes.len() as u32 - 1,
            a.0.abs_diff(b.0) + a.1.abs_diff(b.1)
        );
        // X first: once y changes, x never changes again.
        let mut turned = false;
        for w in nodes.windows(2) {
            let (NodeId::Router { x: x0, y: y0, .. }, NodeId::Router { x: x1, y: y1, .. }) =
                (w[0], w[1])
            else {
                panic!("left the NoC")
            };
            if y0 != y1 {
                turned = true;
            }
            assert!(!(turned && x0 != x1), "{nodes:?}");
        }
    }
}

#[test]
fn across_cubes_the_rule_is_per_node() {
    // Documented in routing/mod.rs: the PE at cube (1,1) is entered
    // from the west, so the cube-level route is south, then east.
    let r = router_for(&[]);
    let t = r.topology().clone();
    let p = r
        .find_path(n("sip0.cube0.pe0"), n("sip0.cube5.pe0"))
        .unwrap();
    let ucie: Vec<String> = p
        .iter()
        .map(|&l| &t.links[l as usize])
        .filter(|l| l.kind == LinkKind::Ucie)
        .map(|l| {
            let (from, to) = t.ends(l);
            format!("{from}>{to}")
        })
        .collect();
    assert_eq!(
        ucie,
        [
            "sip0.cube0.ucie_S0>sip0.cube4.ucie_N0",
            "sip0.cube4.ucie_E0>sip0.cube5.ucie_W0"
        ]
    );
    // Repeated and reversed queries reuse the scratch buffers cleanly.
    let again = r
        .find_path_in(View::Full, n("sip0.cube0.pe0"), n("sip0.cube5.pe0"))
        .unwrap();
    assert_eq!(&*again, &*p);
    assert!(r
        .find_path(n("sip0.cube5.pe0"), n("sip0.cube0.pe0"))
        .is_ok());
}

#[test]
fn exclusion_zone_makes_paths_go_around() {
    let r = router_for(&[(
        "exclusion_zone: null",
        "exclusion_zone: {x: 1, y: 1, w: 2, h: 2}",
    )]);
    let p = r
        .find_node_path(View::CubeLocal, "sip0.cube0.r0_1", "sip0.cube0.r3_1")
        .unwrap();
    // straight line blocked: around via row 0 (ties: north-south first)
    let names: Vec<String> = p.iter().map(|n| n.to_string()).collect();
    assert_eq!(
        names,
        ["r0_1", "r0_0", "r1_0", "r2_0", "r3_0", "r3_1"].map(|l| format!("sip0.cube0.{l}"))
    );
}

#[test]
fn views_exclude_their_edge_kinds() {
    let r = router_for(&[("endpoints: 1", "endpoints: 2")]);
    // PCIe endpoints are not on device paths...
    let e = r
        .find_path(n("sip0.cube0.pe0"), n("sip0.io_cpu"))
        .unwrap_err();
    assert!(matches!(e, RouteError::NoPath { view: "noc", .. }), "{e}");
    // ...but the full view reaches the IO_CPU.
    assert!(r
        .find_path_in(View::Full, n("sip0.cube0.pe0"), n("sip0.io_cpu"))
        .is_ok());
    // M_CPU DMAs stay in their SIP, cube-local paths in their cube.
    let hbm_other_sip = crate::address::Space::Hbm { sip: 1, cube: 0 }.addr(0);
    let e = r.find_mcpu_dma_path(0, 0, hbm_other_sip, 64).unwrap_err();
    assert!(e.to_string().contains("m_cpu_dma"), "{e}");
    let hbm_same_sip = crate::address::Space::Hbm { sip: 0, cube: 5 }.addr(0);
    assert!(r.find_mcpu_dma_path(0, 0, hbm_same_sip, 64).is_ok());
    assert!(r
        .find_path_in(View::CubeLocal, n("sip0.cube0.pe0"), n("sip0.cube1.pe0"))
        .is_err());
}

#[test]
fn memory_path_goes_to_the_stack_holding_the_address() {
    let r = router_for(&[("stacks: 1", "stacks: 2")]);
    let stack = r.topology().spec.hbm_stack_bytes();
    let hbm = crate::address::Space::Hbm { sip: 0, cube: 0 };
    let pe = PeCoord {
        sip: 0,
        cube: 0,
        pe: 0,
    };
    for (off, want) in [(0, "sip0.cube0.hbm0"), (stack, "sip0.cube0.hbm1")] {
        let p = r.find_memory_path(pe, hbm.addr(off), 64).unwrap();
        let t = r.topology();
        let last = t.node(t.links[*p.last().unwrap() as usize].to);
        assert_eq!(last.to_string(), want);
    }
    let past = hbm.addr(2 * stack - 8);
    assert!(r.find_memory_path(pe, past, 64).is_err());
}
