//! Counts per node kind and per link kind, and the bisection cut, for
//! `topology show`.
//!
//! **Bisection** is the geometric cut of the machine's top level into two
//! halves: the SIPs when there are several (ring: SIPs `0..n/2` against
//! the rest; 2-D: across the longer axis of the SIP grid, `x < w/2`, or
//! `y < h/2` when the grid is taller than wide), else the cubes of the
//! one SIP (across the longer axis of the cube mesh), else the routers of
//! the one cube. Its bandwidth is the sum of the rates of the device
//! links (view `noc`) from one half to the other, per direction.

use super::{LinkKind, NodeId, Topology, View};
use crate::config::topology::SipTopology;
use std::collections::BTreeMap;

/// What `topology show` prints besides the diameter.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Summary {
    pub nodes: usize,
    /// Directed links (every physical link is two).
    pub directed_links: usize,
    pub nodes_by_kind: BTreeMap<&'static str, usize>,
    /// Physical (duplex) links per kind, in catalog order.
    pub links_by_kind: Vec<(&'static str, usize)>,
    pub bisection: Option<Bisection>,
}

/// The bisection cut.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Bisection {
    /// What was cut, e.g. "SIP grid (4x2) at x < 2".
    pub cut: String,
    /// Members on each side (SIPs, cubes or routers).
    pub halves: (u32, u32),
    /// Directed links from the first half to the second.
    pub links: usize,
    /// GB/s per direction.
    pub bandwidth_gbps: f64,
}

pub fn summarize(t: &Topology) -> Summary {
    let mut nodes_by_kind = BTreeMap::new();
    for n in t.graph.node_weights() {
        *nodes_by_kind.entry(n.kind()).or_insert(0) += 1;
    }
    let mut per_kind: BTreeMap<LinkKind, usize> = BTreeMap::new();
    for l in &t.links {
        *per_kind.entry(l.kind).or_insert(0) += 1;
    }
    Summary {
        nodes: t.node_count(),
        directed_links: t.links.len(),
        nodes_by_kind,
        links_by_kind: LinkKind::ALL
            .iter()
            .filter_map(|k| per_kind.get(k).map(|&c| (k.name(), c / 2)))
            .collect(),
        bisection: bisection(t),
    }
}

/// Split of a `w × h` grid across its longer axis.
struct GridCut {
    what: String,
    across_x: bool,
    half: u32,
    halves: (u32, u32),
}

impl GridCut {
    fn new(what: &str, w: u32, h: u32) -> Self {
        let across_x = w >= h;
        let (len, other) = if across_x { (w, h) } else { (h, w) };
        let half = len / 2;
        let axis = if across_x { "x" } else { "y" };
        GridCut {
            what: format!("{what} ({w}x{h}) at {axis} < {half}"),
            across_x,
            half,
            halves: (half * other, (len - half) * other),
        }
    }

    /// Is grid position (x, y) in the first half?
    fn first(&self, x: u32, y: u32) -> bool {
        (if self.across_x { x } else { y }) < self.half
    }
}

/// Grid coordinates of a node at the cut's level (None: not on that
/// level's grid, so its links never cross).
type Coord = Box<dyn Fn(&NodeId) -> Option<(u32, u32)>>;

fn bisection(t: &Topology) -> Option<Bisection> {
    let s = &t.spec;
    let n = s.n_sips();
    let (cw, ch) = (s.sip.cube_mesh.w, s.sip.cube_mesh.h);
    let (cut, coord): (GridCut, Coord) = if n > 1 {
        // A ring's grid is n x 1: the cut is SIPs 0..n/2 against the rest.
        let (w, h) = s.sip_grid();
        let mut g = GridCut::new("SIP grid", w, h);
        if s.system.sips.topology == SipTopology::Ring1d {
            g.what = format!("SIP ring ({n}) at sip < {}", g.half);
        }
        (g, Box::new(move |v| Some((v.sip() % w, v.sip() / w))))
    } else if cw * ch > 1 {
        (
            GridCut::new("cube mesh", cw, ch),
            Box::new(move |v| v.cube_part().map(|(c, _)| (c % cw, c / cw))),
        )
    } else {
        let (w, h) = (t.layout.w, t.layout.h);
        if w * h == 1 {
            return None;
        }
        // Routers decide; a component goes with the router it hangs off,
        // so only NoC links can cross.
        (
            GridCut::new("cube NoC", w, h),
            Box::new(|v| match *v {
                NodeId::Router { x, y, .. } => Some((x, y)),
                _ => None,
            }),
        )
    };
    let first = |v: &NodeId| coord(v).map(|(x, y)| cut.first(x, y));
    let mut links = 0;
    let mut bytes_per_s = 0.0;
    for l in t.links.iter().filter(|l| View::Noc.allows(l.kind)) {
        let (from, to) = t.ends(l);
        if first(&from) == Some(true) && first(&to) == Some(false) {
            links += 1;
            bytes_per_s += l.rate.giga_per_s();
        }
    }
    Some(Bisection {
        cut: cut.what,
        halves: cut.halves,
        links,
        bandwidth_gbps: bytes_per_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::build;

    fn topo(edits: &[(&str, &str)]) -> Topology {
        build(&crate::config::edited_default_topology(edits)).unwrap()
    }

    #[test]
    fn counts_per_kind() {
        let s = summarize(&topo(&[]));
        assert_eq!(s.nodes_by_kind["router"], 4 * 16 * 16);
        assert_eq!(s.nodes_by_kind["pe"], 4 * 16 * 4);
        assert_eq!(s.nodes_by_kind["io_cpu"], 4);
        assert_eq!(s.nodes_by_kind["sip_port"], 8);
        // 4x4 cube mesh: 24 neighbour pairs per SIP
        assert!(s.links_by_kind.contains(&("ucie", 4 * 24)));
        assert!(s.links_by_kind.contains(&("inter_sip", 4)));
        assert_eq!(s.nodes, s.nodes_by_kind.values().sum::<usize>());
    }

    #[test]
    fn bisection_matches_the_hand_formula_at_each_level() {
        // ring of 4: 2 links x 100 GB/s
        let b = summarize(&topo(&[])).bisection.unwrap();
        assert_eq!((b.links, b.bandwidth_gbps, b.halves), (2, 200.0, (2, 2)));
        // 4x4 torus: cut 4 rows, 2 links each (one wrap)
        let b = summarize(&topo(&[
            ("count: 4", "count: 16"),
            ("topology: ring_1d ", "topology: torus_2d "),
        ]))
        .bisection
        .unwrap();
        assert_eq!((b.links, b.bandwidth_gbps), (8, 800.0));
        // 4x2 mesh: cut across x, 2 rows x 1 link
        let b = summarize(&topo(&[
            ("count: 4", "count: 8\n    w: 4"),
            ("topology: ring_1d ", "topology: mesh_2d_no_wrap "),
        ]))
        .bisection
        .unwrap();
        assert_eq!((b.links, b.halves), (2, (4, 4)));
        // 1 SIP, 4x4 cubes with 2 UCIe ports per edge: 4 rows x 2 x 256
        let b = summarize(&topo(&[
            ("count: 4", "count: 1"),
            ("ports_per_edge: 1", "ports_per_edge: 2"),
        ]))
        .bisection
        .unwrap();
        assert_eq!((b.links, b.bandwidth_gbps), (8, 2048.0));
        // 1 SIP, 1 cube: cut the 4x4 NoC, 4 links x 512
        let b = summarize(&topo(&[
            ("count: 4", "count: 1"),
            ("w: 4\n    h: 4\n  ucie", "w: 1\n    h: 1\n  ucie"),
        ]))
        .bisection
        .unwrap();
        assert_eq!((b.links, b.bandwidth_gbps), (4, 2048.0));
    }
}
