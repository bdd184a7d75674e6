//! Topologies of our own through the compile pipeline, the router and the
//! `topology` / `run` commands: hand-counted nodes and links, path lengths
//! against hand-computed Manhattan distances, the layout cache, and errors
//! that name the bad key.

use kernbench::config::{Origin, DEFAULT_TOPOLOGY_YAML};
use kernbench::routing::PathRouter;
use kernbench::topology::{compile, LayoutCache, LinkKind, NodeId, PeCoord, Topology};
use std::sync::Arc;

use crate::common;
use common::{fails, kb, ok};

const SHAPES: [&str; 3] = ["ring_1d", "torus_2d", "mesh_2d_no_wrap"];
const CUBE_MESHES: [(u32, u32); 4] = [(1, 1), (2, 3), (4, 4), (8, 8)];
const SIP_COUNTS: [u32; 4] = [1, 2, 8, 64];

/// SIP grid we ask for: square root when it is a square, else `w` given.
fn sip_grid(shape: &str, n: u32) -> (u32, u32) {
    match (shape, n) {
        ("ring_1d", _) => (n, 1),
        (_, 2) => (2, 1),
        (_, 8) => (4, 2),
        _ => (n.isqrt(), n.isqrt()),
    }
}

/// The default topology.yaml with another SIP count/shape and cube mesh,
/// plus textual edits.
fn yaml(shape: &str, n: u32, cubes: (u32, u32), edits: &[(&str, &str)]) -> String {
    let (w, _) = sip_grid(shape, n);
    let sips = if shape != "ring_1d" && w * w != n {
        format!("count: {n}\n    w: {w}")
    } else {
        format!("count: {n}")
    };
    let mut text = DEFAULT_TOPOLOGY_YAML
        .replace("count: 4", &sips)
        .replace("topology: ring_1d ", &format!("topology: {shape} "))
        .replace(
            "w: 4\n    h: 4\n  ucie",
            &format!("w: {}\n    h: {}\n  ucie", cubes.0, cubes.1),
        );
    for (a, z) in edits {
        assert!(text.contains(a), "{a}");
        text = text.replace(a, z);
    }
    text
}

fn build(text: &str) -> Arc<Topology> {
    Arc::new(compile(text, Origin::Embedded("test"), &LayoutCache::Off).unwrap())
}

fn pe(sip: u32, cube: u32, pe: u32) -> NodeId {
    NodeId::Pe(PeCoord { sip, cube, pe })
}

/// Inter-SIP links by hand: per dimension of length L > 1, L−1 links per
/// line, plus the wrap-around link on a ring or torus.
fn inter_sip_links(shape: &str, n: u32) -> u32 {
    let (w, h) = sip_grid(shape, n);
    let wrap = shape != "mesh_2d_no_wrap";
    let dim = |len: u32, lines: u32| {
        if len > 1 {
            lines * (len - 1 + u32::from(wrap))
        } else {
            0
        }
    };
    dim(w, h) + dim(h, w)
}

/// SIP hops by hand: Manhattan on the grid, the shorter way round where
/// it wraps.
fn sip_distance(shape: &str, n: u32, a: u32, b: u32) -> u32 {
    let (w, h) = sip_grid(shape, n);
    let d = |p: u32, q: u32, len: u32| {
        let s = p.abs_diff(q);
        if shape == "mesh_2d_no_wrap" {
            s
        } else {
            s.min(len - s)
        }
    };
    d(a % w, b % w, w) + d(a / w, b / w, h)
}

#[test]
fn every_shape_builds_with_hand_counted_nodes_links_and_sip_distances() {
    for &(cw, ch) in &CUBE_MESHES {
        for &n in &SIP_COUNTS {
            for shape in SHAPES {
                let t = build(&yaml(shape, n, (cw, ch), &[]));
                let what = format!("{shape} x{n}, cubes {cw}x{ch}");
                let cubes = n * cw * ch;
                let pairs = (cw - 1) * ch + cw * (ch - 1);
                let links = inter_sip_links(shape, n);
                // per cube: 16 routers, 4 PEs, HBM, SRAM, M_CPU; 2 UCIe
                // ports per neighbour pair; IO_CPU + PCIe per SIP; 2 ports
                // per inter-SIP link.
                let nodes = cubes * 23 + n * 2 * pairs + n * 2 + 2 * links;
                assert_eq!(t.node_count() as u32, nodes, "{what}");
                let count = |k: LinkKind| t.links.iter().filter(|l| l.kind == k).count() as u32 / 2;
                assert_eq!(count(LinkKind::InterSip), links, "{what}");
                assert_eq!(count(LinkKind::Ucie), n * pairs, "{what}");
                assert_eq!(count(LinkKind::Noc), cubes * 24, "{what}");
                // Every SIP reachable, crossing exactly the hand-computed
                // number of inter-SIP links.
                let r = PathRouter::new(t.clone());
                let step = if n > 8 { 7 } else { 1 };
                for s in (0..n).step_by(step) {
                    let p = r.find_path(pe(0, 0, 0), pe(s, 0, 0)).unwrap();
                    let hops = p
                        .iter()
                        .filter(|&&l| t.links[l as usize].kind == LinkKind::InterSip)
                        .count() as u32;
                    assert_eq!(hops, sip_distance(shape, n, 0, s), "{what}: sip0 -> sip{s}");
                }
            }
        }
    }
}

#[test]
fn paths_across_cubes_follow_the_hand_formula() {
    // Default 4x4 NoC: PE1 sits at the NE corner (3,0), the E UCIe port at
    // (3,2), the W port at (0,2), PE0 at the NW corner (0,0). From cube 0's
    // PE1 to PE0 of the cube k steps east: 2 PE attaches, 2 + 3(k−1) + 2 NoC
    // hops, and k UCIe crossings of 3 links (attach, die-to-die, attach).
    // Latency: 2·1 + (4 + 3(k−1))·1 + k·(1 + 10 + 1) ns = 15k + 3 ns.
    // Going south from PE2 (SW corner) is the same by symmetry.
    let t = build(&yaml("ring_1d", 1, (8, 8), &[]));
    let r = PathRouter::new(t.clone());
    for k in 1..8 {
        for (from, to) in [(pe(0, 0, 1), pe(0, k, 0)), (pe(0, 0, 2), pe(0, 8 * k, 0))] {
            let (p, d) = r.find_path_with_distance(from, to).unwrap();
            assert_eq!(d.hops, 6 * k + 3, "{from} -> {to}");
            assert_eq!(d.latency_ps, (15 * k as u64 + 3) * 1000, "{from} -> {to}");
            let ucie = p
                .iter()
                .filter(|&&l| t.links[l as usize].kind == LinkKind::Ucie)
                .count() as u32;
            assert_eq!(ucie, k);
        }
    }
    // Diagonal: Manhattan in cubes (3 east + 2 south) UCIe crossings.
    let p = r.find_path(pe(0, 0, 0), pe(0, 2 * 8 + 3, 0)).unwrap();
    let ucie = p
        .iter()
        .filter(|&&l| t.links[l as usize].kind == LinkKind::Ucie)
        .count();
    assert_eq!(ucie, 5);
}

#[test]
fn routing_is_deterministic_across_builds() {
    let text = yaml(
        "torus_2d",
        8,
        (2, 3),
        &[("ports_per_edge: 1", "ports_per_edge: 2")],
    );
    let names = |t: Arc<Topology>| {
        let r = PathRouter::new(t.clone());
        let mut v = Vec::new();
        for s in 0..8 {
            for c in [0, 5] {
                let p = r.find_path(pe(0, 0, 0), pe(s, c, 3)).unwrap();
                v.push(r.nodes_of(pe(0, 0, 0), &p));
            }
        }
        v
    };
    assert_eq!(names(build(&text)), names(build(&text)));
}

// ---- the command line ----

#[test]
fn malformed_topologies_fail_validation_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &[&str]); 8] = [
        ("wdith: 4", "unknown key", &["wdith", "line"]),
        ("count: four", "wrong type", &["system.sips.count", "line"]),
        ("topology: torus_3d", "bad shape", &["torus_3d", "ring_1d"]),
        (
            "count: 6\n    topology: torus_2d\n    w: 4",
            "w*h",
            &["w*h == count (6), got w=4 h=1"],
        ),
        (
            "exclusion_zone: {x: 1, y: 0, w: 1, h: 4}",
            "split NoC",
            &["cube.hbm.exclusion_zone", "cuts the 4x4 cube NoC in two"],
        ),
        (
            "latency_ns: 500 ",
            "negative latency",
            &["system.inter_sip_link.latency_ns"],
        ),
        ("pe_per_corner: 0", "no PEs", &["cube.pe_layout"]),
        (
            "cubes: [99]",
            "endpoint cube",
            &["sip.pcie.cubes: cube 99 does not exist"],
        ),
    ];
    for (i, (edit, what, expect)) in cases.iter().enumerate() {
        let text = match *what {
            "unknown key" => DEFAULT_TOPOLOGY_YAML.replacen("w: 4", edit, 1),
            "wrong type" => DEFAULT_TOPOLOGY_YAML.replace("count: 4", edit),
            "bad shape" => DEFAULT_TOPOLOGY_YAML.replace("topology: ring_1d", edit),
            "w*h" => DEFAULT_TOPOLOGY_YAML.replace("count: 4\n    topology: ring_1d", edit),
            "split NoC" => DEFAULT_TOPOLOGY_YAML.replace("exclusion_zone: null", edit),
            "negative latency" => DEFAULT_TOPOLOGY_YAML.replace(edit, "latency_ns: -5 "),
            "no PEs" => DEFAULT_TOPOLOGY_YAML.replace("pe_per_corner: 1", edit),
            _ => DEFAULT_TOPOLOGY_YAML.replace("# cubes: [0]", edit),
        };
        assert_ne!(text, DEFAULT_TOPOLOGY_YAML, "{what}: edit applied");
        let f = dir.path().join(format!("bad{i}.yaml"));
        std::fs::write(&f, text).unwrap();
        let err = fails(kb().args(["topology", "validate"]).arg(&f));
        assert!(err.contains(&format!("bad{i}.yaml")), "{what}: {err}");
        for e in *expect {
            assert!(err.contains(e), "{what}: {err} lacks {e}");
        }
        // run refuses it the same way
        let err = fails(kb().args(["run", "ccl_allreduce", "--topology"]).arg(&f));
        assert!(err.contains(expect[0]), "{what}: {err}");
    }
}

#[test]
fn layout_cache_misses_hits_and_regenerates() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("chip.yaml");
    let cache = dir.path().join("cube_mesh.yaml");
    let validate = || ok(kb().args(["topology", "validate"]).arg(&f));
    std::fs::write(&f, DEFAULT_TOPOLOGY_YAML).unwrap();
    assert!(validate().contains("cache miss: created"), "first run");
    let text = std::fs::read_to_string(&cache).unwrap();
    assert!(
        text.contains("source_hash: sha256:") && text.contains("pe0: r0_0"),
        "{text}"
    );
    assert!(validate().contains("cache hit"), "unchanged inputs");
    // A figure that does not move anything: still a hit.
    std::fs::write(
        &f,
        DEFAULT_TOPOLOGY_YAML.replace("hop_latency_ns: 1", "hop_latency_ns: 2"),
    )
    .unwrap();
    assert!(
        validate().contains("cache hit"),
        "NoC latency is not a layout input"
    );
    // One of the five inputs: regenerated.
    std::fs::write(
        &f,
        DEFAULT_TOPOLOGY_YAML.replace("pe_per_corner: 1", "pe_per_corner: 2"),
    )
    .unwrap();
    assert!(validate().contains("cache miss: regenerated"));
    assert!(std::fs::read_to_string(&cache)
        .unwrap()
        .contains("pe7: r3_3"));
    // --no-layout-cache touches nothing; --layout-cache picks the file.
    std::fs::remove_file(&cache).unwrap();
    assert!(ok(kb()
        .args(["topology", "validate", "--no-layout-cache"])
        .arg(&f))
    .contains("computed (no cache)"));
    assert!(!cache.exists());
    let other = dir.path().join("elsewhere.yaml");
    ok(kb()
        .args(["topology", "validate", "--layout-cache"])
        .arg(&other)
        .arg(&f));
    assert!(other.exists());
    // A hand edit is honoured by run as well (the M_CPU is not on the
    // all-reduce's paths, so the result is unchanged).
    let edited = std::fs::read_to_string(&other)
        .unwrap()
        .replace("m_cpu: r2_2", "m_cpu: r1_1");
    std::fs::write(&other, edited).unwrap();
    let out = ok(kb()
        .args([
            "topology",
            "path",
            "sip0.cube0.m_cpu",
            "sip0.cube0.r1_1",
            "--layout-cache",
        ])
        .arg(&other)
        .arg("--topology")
        .arg(&f));
    assert!(out.contains("1 hops"), "{out}");
}

#[test]
fn show_and_export_agree_and_match_hand_figures() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("mesh.yaml");
    std::fs::write(&f, yaml("mesh_2d_no_wrap", 8, (2, 3), &[])).unwrap();
    let show: serde_json::Value = serde_json::from_str(&ok(kb()
        .args(["topology", "show", "--format", "json"])
        .arg(&f)))
    .unwrap();
    let nodes = show["summary"]["nodes"].as_u64().unwrap();
    // 8 SIPs x 6 cubes x 23 + 8 x 2 x 7 UCIe ports + 8 x 2 IO + 2 x 10 SIP ports
    assert_eq!(nodes, 8 * 6 * 23 + 8 * 2 * 7 + 8 * 2 + 2 * 10);
    // 4x2 mesh cut across x: 2 links of 100 GB/s
    assert_eq!(show["summary"]["bisection"]["links"], 2);
    assert_eq!(show["summary"]["bisection"]["bandwidth_gbps"], 200.0);
    assert!(show["diameter"]["hops"].as_u64().unwrap() > 0);
    let table = ok(kb().args(["topology", "show"]).arg(&f));
    for want in [
        "nodes by kind:",
        "inter_sip",
        "diameter:",
        "bisection: 200.0 GB/s",
    ] {
        assert!(table.contains(want), "{want}:\n{table}");
    }
    let js = dir.path().join("g.json");
    ok(kb()
        .args(["topology", "export", "--format", "json", "-o"])
        .arg(&js)
        .arg(&f));
    let g: serde_json::Value = serde_json::from_slice(&std::fs::read(&js).unwrap()).unwrap();
    assert_eq!(g["nodes"].as_array().unwrap().len() as u64, nodes);
    let directed = show["summary"]["directed_links"].as_u64().unwrap();
    assert_eq!(g["links"].as_array().unwrap().len() as u64, directed);
    let dot = ok(kb().args(["topology", "export", "--format", "dot"]).arg(&f));
    assert!(dot.starts_with("// kernbench topology") && dot.contains("graph kernbench {"));
    assert_eq!(dot.matches(" -- ").count() as u64, directed / 2);
}

#[test]
fn path_command_and_views() {
    let out = ok(kb().args(["topology", "path", "sip0.cube0.r0_0", "sip0.cube0.r3_3"]));
    assert!(out.contains("6 hops, latency 6.000 ns"), "{out}");
    let cases: [(&[&str], &[&str]); 3] = [
        (
            &["sip0.cube0.pe0", "sip0.cube1.pe0", "--view", "cube_local"],
            &["no path", "cube_local"],
        ),
        (
            &["sip0.cube0.pe9", "sip0.cube1.pe0"],
            &["unknown node sip0.cube0.pe9"],
        ),
        (
            &["sip0.cube0.pe0", "sip0.cube1.pe0", "--view", "nope"],
            &["unknown view 'nope'"],
        ),
    ];
    for (args, expect) in cases {
        let err = fails(kb().args(["topology", "path"]).args(args));
        for e in expect {
            assert!(err.contains(e), "{args:?}: {err}");
        }
    }
}

#[test]
fn ring_allreduce_is_correct_on_our_topologies() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        yaml("torus_2d", 2, (1, 1), &[]),
        yaml(
            "mesh_2d_no_wrap",
            8,
            (2, 3),
            &[
                (
                    "exclusion_zone: null",
                    "exclusion_zone: {x: 1, y: 1, w: 2, h: 1}",
                ),
                ("stacks: 1", "stacks: 2"),
                ("ports_per_edge: 1", "ports_per_edge: 2"),
            ],
        ),
        yaml("ring_1d", 8, (8, 8), &[]),
        yaml("torus_2d", 64, (1, 1), &[]),
    ];
    for (i, text) in cases.iter().enumerate() {
        let f = dir.path().join(format!("t{i}.yaml"));
        std::fs::write(&f, text).unwrap();
        let out = ok(kb()
            .args(["run", "ccl_allreduce", "--format", "json", "--topology"])
            .arg(&f)
            .args(["--", "-b", "1K", "-e", "64K", "-f", "8"]));
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["wrong_total"], 0, "case {i}");
        assert_eq!(v["rows"].as_array().unwrap().len(), 3, "case {i}");
    }
}
