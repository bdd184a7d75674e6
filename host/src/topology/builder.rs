//! Builds the machine graph from a [`TopologySpec`].
//!
//! Cube layout (cube NoC of `w × h` routers): PEs attach to the routers at
//! their corners (`pe_layout`), HBM to the middle of the north edge, SRAM
//! to the middle of the south edge, and the UCIe port of each side to the
//! middle router of that side. Cubes of a SIP form a `cube_w × cube_h` mesh
//! joined E–W and N–S by UCIe links. A SIP's inter-SIP port on side D
//! hangs off the edge router of the cube at that edge: E on cube
//! (cube_w−1, 0), W and N on cube (0, 0), S on cube (0, cube_h−1).
//! Every physical link is full duplex: two directed links with the same
//! figures.

use super::{Link, LinkId, LinkKind, NodeId, PeCoord, Side, Topology};
use crate::config::topology::{Corner, LinkSpec, SipTopology};
use crate::config::TopologySpec;
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::HashMap;

struct Builder {
    graph: DiGraph<NodeId, LinkId>,
    links: Vec<Link>,
    index: HashMap<NodeId, NodeIndex>,
}

impl Builder {
    fn node(&mut self, n: NodeId) -> NodeIndex {
        if let Some(&i) = self.index.get(&n) {
            return i;
        }
        let i = self.graph.add_node(n);
        self.index.insert(n, i);
        i
    }

    fn duplex(&mut self, a: NodeId, b: NodeId, kind: LinkKind, spec: LinkSpec) {
        for (from, to) in [(a, b), (b, a)] {
            let (fi, ti) = (self.node(from), self.node(to));
            let id = self.links.len() as LinkId;
            self.links.push(Link {
                kind,
                from,
                to,
                rate: spec.rate(),
                latency: spec.latency_ps(),
            });
            self.graph.add_edge(fi, ti, id);
        }
    }
}

/// Router a side's port attaches to, in a `w × h` NoC.
pub(crate) fn side_router(side: Side, w: u32, h: u32) -> (u32, u32) {
    match side {
        Side::N => (w / 2, 0),
        Side::S => (w / 2, h - 1),
        Side::E => (w - 1, h / 2),
        Side::W => (0, h / 2),
    }
}

fn corner_router(c: Corner, w: u32, h: u32) -> (u32, u32) {
    match c {
        Corner::Nw => (0, 0),
        Corner::Ne => (w - 1, 0),
        Corner::Sw => (0, h - 1),
        Corner::Se => (w - 1, h - 1),
    }
}

/// The cube of a SIP whose edge carries the inter-SIP port on `side`.
pub(crate) fn port_cube(spec: &TopologySpec, side: Side) -> u32 {
    let (cw, ch) = (spec.sip.cube_mesh.w, spec.sip.cube_mesh.h);
    match side {
        Side::E => cw - 1,
        Side::W | Side::N => 0,
        Side::S => (ch - 1) * cw,
    }
}

/// Inter-SIP links `(sip_a, side_a, sip_b)`: a's port `side_a` joins b's
/// opposite port.
pub(crate) fn sip_links(spec: &TopologySpec) -> Vec<(u32, Side, u32)> {
    let n = spec.n_sips();
    let (w, h) = spec.sip_grid();
    let mut v = Vec::new();
    match spec.system.sips.topology {
        SipTopology::Ring1d => {
            if n > 1 {
                v.extend((0..n).map(|s| (s, Side::E, (s + 1) % n)));
            }
        }
        t => {
            let wrap = t == SipTopology::Torus2d;
            for y in 0..h {
                for x in 0..w {
                    let s = y * w + x;
                    if w > 1 && (x + 1 < w || wrap) {
                        v.push((s, Side::E, y * w + (x + 1) % w));
                    }
                    if h > 1 && (y + 1 < h || wrap) {
                        v.push((s, Side::S, ((y + 1) % h) * w + x));
                    }
                }
            }
        }
    }
    v
}

/// Build the graph.
pub fn build(spec: &TopologySpec) -> Topology {
    let mut b = Builder {
        graph: DiGraph::new(),
        links: Vec::new(),
        index: HashMap::new(),
    };
    let (nw, nh) = (spec.cube.noc.w, spec.cube.noc.h);
    let (cw, ch) = (spec.sip.cube_mesh.w, spec.sip.cube_mesh.h);
    let noc = spec.cube.noc.link();
    let hbm = LinkSpec {
        bandwidth_gbps: spec.cube.hbm.bandwidth_gbps,
        latency_ns: spec.cube.hbm.latency_ns,
    };
    let sram = LinkSpec {
        bandwidth_gbps: spec.cube.sram.bandwidth_gbps,
        latency_ns: spec.cube.sram.latency_ns,
    };
    for sip in 0..spec.n_sips() {
        for cube in 0..spec.cubes_per_sip() {
            let r = |x, y| NodeId::Router { sip, cube, x, y };
            for y in 0..nh {
                for x in 0..nw {
                    b.node(r(x, y));
                    if x + 1 < nw {
                        b.duplex(r(x, y), r(x + 1, y), LinkKind::Noc, noc);
                    }
                    if y + 1 < nh {
                        b.duplex(r(x, y), r(x, y + 1), LinkKind::Noc, noc);
                    }
                }
            }
            let pl = &spec.cube.pe_layout;
            for (ci, &corner) in pl.corners.iter().enumerate() {
                let (x, y) = corner_router(corner, nw, nh);
                for k in 0..pl.pe_per_corner {
                    let pe = PeCoord {
                        sip,
                        cube,
                        pe: ci as u32 * pl.pe_per_corner + k,
                    };
                    b.duplex(NodeId::Pe(pe), r(x, y), LinkKind::PeAttach, spec.pe.attach);
                }
            }
            let (x, y) = side_router(Side::N, nw, nh);
            b.duplex(NodeId::Hbm { sip, cube }, r(x, y), LinkKind::Hbm, hbm);
            let (x, y) = side_router(Side::S, nw, nh);
            b.duplex(NodeId::Sram { sip, cube }, r(x, y), LinkKind::Sram, sram);
            let (cx, cy) = (cube % cw, cube / cw);
            for side in Side::ALL {
                let has_neighbour = match side {
                    Side::E => cx + 1 < cw,
                    Side::W => cx > 0,
                    Side::N => cy > 0,
                    Side::S => cy + 1 < ch,
                };
                if has_neighbour {
                    let (x, y) = side_router(side, nw, nh);
                    b.duplex(
                        NodeId::Ucie { sip, cube, side },
                        r(x, y),
                        LinkKind::Noc,
                        noc,
                    );
                }
            }
            if cx + 1 < cw {
                let east = cube + 1;
                b.duplex(
                    NodeId::Ucie {
                        sip,
                        cube,
                        side: Side::E,
                    },
                    NodeId::Ucie {
                        sip,
                        cube: east,
                        side: Side::W,
                    },
                    LinkKind::Ucie,
                    spec.sip.ucie_link,
                );
            }
            if cy + 1 < ch {
                let south = cube + cw;
                b.duplex(
                    NodeId::Ucie {
                        sip,
                        cube,
                        side: Side::S,
                    },
                    NodeId::Ucie {
                        sip,
                        cube: south,
                        side: Side::N,
                    },
                    LinkKind::Ucie,
                    spec.sip.ucie_link,
                );
            }
        }
    }
    for (a, side, peer) in sip_links(spec) {
        for (s, d) in [(a, side), (peer, side.opposite())] {
            let cube = port_cube(spec, d);
            let (x, y) = side_router(d, nw, nh);
            let port = NodeId::SipPort { sip: s, side: d };
            if b.index.contains_key(&port) {
                continue;
            }
            b.duplex(
                port,
                NodeId::Router { sip: s, cube, x, y },
                LinkKind::Noc,
                noc,
            );
        }
        b.duplex(
            NodeId::SipPort { sip: a, side },
            NodeId::SipPort {
                sip: peer,
                side: side.opposite(),
            },
            LinkKind::InterSip,
            spec.system.inter_sip_link,
        );
    }
    Topology {
        spec: spec.clone(),
        graph: b.graph,
        links: b.links,
        index: b.index,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_machine_has_expected_counts() {
        let spec = TopologySpec::default_embedded();
        let t = build(&spec);
        // per cube: 16 routers + 4 PEs + hbm + sram + ucie ports
        assert_eq!(t.pes().count(), 4 * 16 * 4);
        let inter: Vec<_> = t
            .links
            .iter()
            .filter(|l| l.kind == LinkKind::InterSip)
            .collect();
        assert_eq!(inter.len(), 2 * 4, "4 duplex ring links");
        assert!(t.node_index(&"sip3.port_E".parse().unwrap()).is_some());
        assert!(t.node_index(&"sip0.port_W".parse().unwrap()).is_some());
    }

    #[test]
    fn two_sip_ring_has_two_distinct_links() {
        let text = crate::config::DEFAULT_TOPOLOGY_YAML.replace("count: 4", "count: 2");
        let spec = TopologySpec::from_yaml(&text, crate::config::Origin::Embedded("t")).unwrap();
        let t = build(&spec);
        assert_eq!(
            t.links
                .iter()
                .filter(|l| l.kind == LinkKind::InterSip)
                .count(),
            4
        );
    }
}
