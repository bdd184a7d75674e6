//! Whole-graph figures for `topology show`: the PE-to-PE diameter.
//!
//! The diameter is the largest hop count of a shortest device path (view
//! `noc`) between two PEs. It is exact: breadth-first search from a set
//! of source PEs that provably contains an end of a longest pair —
//! every PE when there is one SIP; the PEs of SIP 0 on a ring or torus
//! (shifting every SIP index by one maps the graph onto itself, so every
//! SIP sees the same distances); the PEs of the four corner SIPs on a
//! mesh (checked against all-pairs search in the tests).

use super::PathRouter;
use crate::config::topology::SipTopology;
use crate::topology::{NodeId, View};
use crate::units::Ps;
use std::collections::VecDeque;

/// The longest shortest PE-to-PE path.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Diameter {
    pub hops: u32,
    pub from: String,
    pub to: String,
    /// Σ latency of the routed path between the two.
    pub latency_ps: Ps,
    /// PEs searched from.
    pub sources: usize,
}

/// SIPs whose PEs are searched from (see the module doc).
fn source_sips(r: &PathRouter) -> Vec<u32> {
    let s = &r.topology().spec;
    let n = s.n_sips();
    if n == 1 || s.system.sips.topology != SipTopology::Mesh2dNoWrap {
        return vec![0];
    }
    let (w, h) = s.sip_grid();
    let mut v = vec![0, w - 1, (h - 1) * w, w * h - 1];
    v.sort();
    v.dedup();
    v
}

/// Exact PE-to-PE diameter; None when no two PEs are connected.
pub fn pe_diameter(r: &PathRouter) -> Option<Diameter> {
    pe_diameter_from(r, &source_sips(r))
}

fn pe_diameter_from(r: &PathRouter, sips: &[u32]) -> Option<Diameter> {
    let t = r.topology();
    let adj = r.adjacency(View::Noc);
    let n = t.node_count();
    let is_pe: Vec<bool> = (0..n)
        .map(|i| matches!(t.graph[petgraph::graph::NodeIndex::new(i)], NodeId::Pe(_)))
        .collect();
    let mut dist = vec![u32::MAX; n];
    let mut queue = VecDeque::new();
    let mut best: Option<(u32, NodeId, NodeId)> = None;
    let mut sources = 0;
    for pe in t.pes().filter(|p| sips.contains(&p.sip)) {
        sources += 1;
        let src = NodeId::Pe(pe);
        let s = t.node_index(&src).expect("PE node").index();
        dist.fill(u32::MAX);
        dist[s] = 0;
        queue.push_back(s);
        let mut far = (0, s);
        while let Some(u) = queue.pop_front() {
            if is_pe[u] && (dist[u], std::cmp::Reverse(u)) > (far.0, std::cmp::Reverse(far.1)) {
                far = (dist[u], u);
            }
            for e in adj.out(u) {
                let v = e.to as usize;
                if dist[v] == u32::MAX {
                    dist[v] = dist[u] + 1;
                    queue.push_back(v);
                }
            }
        }
        let to = t.graph[petgraph::graph::NodeIndex::new(far.1)];
        if best.is_none_or(|b| far.0 > b.0) {
            best = Some((far.0, src, to));
        }
    }
    let (hops, from, to) = best.filter(|b| b.0 > 0)?;
    let (_, d) = r.find_path_with_distance(from, to).ok()?;
    Some(Diameter {
        hops,
        from: from.to_string(),
        to: to.to_string(),
        latency_ps: d.latency_ps,
        sources,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::build;
    use std::sync::Arc;

    fn router(edits: &[(&str, &str)]) -> PathRouter {
        let spec = crate::config::edited_default_topology(edits);
        PathRouter::new(Arc::new(build(&spec).unwrap()))
    }

    #[test]
    fn shortcut_sources_give_the_all_pairs_diameter() {
        let small = ("w: 4\n    h: 4\n  ucie", "w: 2\n    h: 2\n  ucie");
        let noc = ("w: 4\n    h: 4\n    link", "w: 3\n    h: 2\n    link");
        for (count, topo) in [
            ("count: 9", "mesh_2d_no_wrap"),
            ("count: 8\n    w: 4", "mesh_2d_no_wrap"),
            ("count: 6\n    w: 3", "torus_2d"),
            ("count: 5", "ring_1d"),
        ] {
            let r = router(&[
                ("count: 4", count),
                ("topology: ring_1d ", &format!("topology: {topo} ")),
                small,
                noc,
            ]);
            let all: Vec<u32> = (0..r.topology().spec.n_sips()).collect();
            let fast = pe_diameter(&r).unwrap();
            let full = pe_diameter_from(&r, &all).unwrap();
            assert_eq!(fast.hops, full.hops, "{count} {topo}");
        }
    }

    #[test]
    fn single_cube_diameter_is_corner_to_corner() {
        let r = router(&[
            ("count: 4", "count: 1"),
            ("w: 4\n    h: 4\n  ucie", "w: 1\n    h: 1\n  ucie"),
        ]);
        let d = pe_diameter(&r).unwrap();
        // PE attach + 3 + 3 NoC hops + PE attach
        assert_eq!(d.hops, 8);
        assert_eq!(
            (d.from.as_str(), d.to.as_str()),
            ("sip0.cube0.pe0", "sip0.cube0.pe3")
        );
    }
}
