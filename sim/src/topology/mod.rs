//! The modelled machine as a graph: named nodes (routers, PEs, HBM stacks,
//! SRAM, M_CPUs, UCIe ports, SIP ports, IO_CPUs, PCIe endpoints) and
//! directed, typed links with bandwidth and latency. Pure data plus the
//! builder ([`compile`]: the six-stage pipeline) and the view projections;
//! routing lives in [`crate::routing`].

mod builder;
pub mod export;
pub mod layout;
pub mod naming;
mod node_index;
pub mod summary;

pub use builder::{build, build_with, compile, LayoutCache};
pub use layout::{CubeLayout, LayoutSource};
pub use naming::{CubePart, NodeId, PeCoord, Side};

use crate::config::TopologySpec;
use crate::units::{Ps, Rate};
use petgraph::graph::{DiGraph, NodeIndex};

/// The edge-kind catalog: what a link is. Every physical link is full
/// duplex (two directed links of the same kind and figures).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LinkKind {
    /// Router to neighbouring router inside a cube (NoC figures).
    Noc,
    /// PE to its router (`pe.attach`).
    PeAttach,
    /// HBM stack to its router (`cube.hbm`).
    Hbm,
    /// SRAM to its router (`cube.sram`).
    Sram,
    /// M_CPU to its router (`cube.m_cpu`).
    MCpuAttach,
    /// Router to a UCIe port of its cube (NoC figures).
    UcieAttach,
    /// Die-to-die link between facing UCIe ports of neighbouring cubes.
    Ucie,
    /// Router to the SIP's inter-SIP port (NoC figures).
    SipPortAttach,
    /// SIP port to SIP port (`system.inter_sip_link`).
    InterSip,
    /// Router to a PCIe endpoint (NoC figures).
    PcieAttach,
    /// PCIe endpoint to the SIP's IO_CPU (`sip.pcie`).
    Pcie,
}

impl LinkKind {
    pub const ALL: [LinkKind; 11] = [
        LinkKind::Noc,
        LinkKind::PeAttach,
        LinkKind::Hbm,
        LinkKind::Sram,
        LinkKind::MCpuAttach,
        LinkKind::UcieAttach,
        LinkKind::Ucie,
        LinkKind::SipPortAttach,
        LinkKind::InterSip,
        LinkKind::PcieAttach,
        LinkKind::Pcie,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LinkKind::Noc => "noc",
            LinkKind::PeAttach => "pe_attach",
            LinkKind::Hbm => "hbm",
            LinkKind::Sram => "sram",
            LinkKind::MCpuAttach => "m_cpu_attach",
            LinkKind::UcieAttach => "ucie_attach",
            LinkKind::Ucie => "ucie",
            LinkKind::SipPortAttach => "sip_port_attach",
            LinkKind::InterSip => "inter_sip",
            LinkKind::PcieAttach => "pcie_attach",
            LinkKind::Pcie => "pcie",
        }
    }
}

/// A projection of the graph: the links a kind of traffic may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum View {
    /// Every link.
    Full,
    /// Device traffic (PE and memory transfers, IPCQ): everything but the
    /// host interface, so no path shortcuts through an IO_CPU.
    Noc,
    /// M_CPU DMAs: stay inside their SIP (no inter-SIP, no host).
    MCpuDma,
    /// Inside one cube: no UCIe, no inter-SIP, no host.
    CubeLocal,
}

impl View {
    pub const ALL: [View; 4] = [View::Full, View::Noc, View::MCpuDma, View::CubeLocal];

    pub fn name(self) -> &'static str {
        match self {
            View::Full => "full",
            View::Noc => "noc",
            View::MCpuDma => "m_cpu_dma",
            View::CubeLocal => "cube_local",
        }
    }

    pub fn parse(s: &str) -> Option<View> {
        View::ALL.into_iter().find(|v| v.name() == s)
    }

    /// The edge kinds this view leaves out.
    pub fn excluded(self) -> &'static [LinkKind] {
        use LinkKind::*;
        match self {
            View::Full => &[],
            View::Noc => &[Pcie, PcieAttach],
            View::MCpuDma => &[Pcie, PcieAttach, InterSip, SipPortAttach],
            View::CubeLocal => &[Pcie, PcieAttach, InterSip, SipPortAttach, Ucie, UcieAttach],
        }
    }

    pub fn allows(self, k: LinkKind) -> bool {
        !self.excluded().contains(&k)
    }
}

/// Index of a directed link in [`Topology::links`].
pub type LinkId = u32;

/// One direction of a physical link. Its ends are graph indices (4 bytes
/// each, not a 20-byte [`NodeId`]: a link is 32 bytes, and a 4096-SIP
/// machine has 4.7 M of them); [`Topology::ends`] names them.
///
/// Every link is full duplex: links `2k` and `2k + 1` are the two
/// directions of one, of the same kind, rate and latency (the build makes
/// them together), so the graph is the same read backwards and the least
/// latency from `a` to `b` is the least from `b` to `a`.
#[derive(Debug, Clone)]
pub struct Link {
    pub kind: LinkKind,
    pub from: NodeIndex,
    pub to: NodeIndex,
    pub rate: Rate,
    pub latency: Ps,
}

/// The built machine graph.
#[derive(Debug)]
pub struct Topology {
    pub spec: TopologySpec,
    /// The layout every cube uses.
    pub layout: CubeLayout,
    /// Where the layout came from (cache hit, regenerated, ...).
    pub layout_source: LayoutSource,
    pub graph: DiGraph<NodeId, LinkId>,
    pub links: Vec<Link>,
    index: node_index::NodeIndexMap,
}

impl Topology {
    pub fn node_index(&self, n: &NodeId) -> Option<NodeIndex> {
        self.index.get(n)
    }

    /// The node at graph index `i`.
    pub fn node(&self, i: NodeIndex) -> NodeId {
        self.graph[i]
    }

    /// The nodes link `l` leads from and to.
    pub fn ends(&self, l: &Link) -> (NodeId, NodeId) {
        (self.graph[l.from], self.graph[l.to])
    }

    /// Nodes in each SIP's block of graph indices: SIP `s`'s nodes are
    /// `s * n .. (s + 1) * n`, each SIP's in SIP 0's order (the same code
    /// built them); the SIP ports come after the last block.
    pub fn nodes_per_sip(&self) -> usize {
        self.index.per_sip() as usize
    }

    pub fn node_count(&self) -> usize {
        self.graph.node_count()
    }

    /// Every PE of the machine, in (sip, cube, pe) order.
    pub fn pes(&self) -> impl Iterator<Item = PeCoord> + '_ {
        let (s, c, p) = (
            self.spec.n_sips(),
            self.spec.cubes_per_sip(),
            self.spec.pes_per_cube(),
        );
        (0..s).flat_map(move |sip| {
            (0..c).flat_map(move |cube| (0..p).map(move |pe| PeCoord { sip, cube, pe }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_is_32_bytes_and_names_its_ends_through_the_graph() {
        // 4.7 M links at 4096 SIPs: each byte here is ~5 MB there.
        assert_eq!(std::mem::size_of::<Link>(), 32);
        let t = build(&TopologySpec::default_embedded()).unwrap();
        for l in t.links.iter().take(1000) {
            let (from, to) = t.ends(l);
            assert_eq!(t.node_index(&from), Some(l.from));
            assert_eq!(t.node_index(&to), Some(l.to));
            assert_ne!(from, to);
        }
    }

    #[test]
    fn every_link_has_its_reverse_beside_it_with_the_same_figures() {
        let torus = crate::config::edited_default_topology(&[
            ("count: 4", "count: 9"),
            ("topology: ring_1d ", "topology: torus_2d "),
            ("ports_per_edge: 1", "ports_per_edge: 2"),
        ]);
        for spec in [TopologySpec::default_embedded(), torus] {
            let t = build(&spec).unwrap();
            assert_eq!(t.links.len() % 2, 0);
            for (id, l) in t.links.iter().enumerate() {
                // Links 2k and 2k + 1 (see `Link`).
                let r = &t.links[id ^ 1];
                assert_eq!((r.from, r.to), (l.to, l.from), "link {id}");
                assert_eq!((r.kind, r.rate, r.latency), (l.kind, l.rate, l.latency));
            }
        }
    }

    /// The node index (SIP 0's names and each SIP's block) names every
    /// node of machines of each SIP shape, PCIe endpoints and UCIe ports
    /// varied, at its graph index, and no node that is not there.
    #[test]
    fn every_node_is_found_at_its_graph_index_and_no_other_is() {
        let edited = |e: &[(&str, &str)]| crate::config::edited_default_topology(e);
        let specs = [
            TopologySpec::default_embedded(),
            edited(&[
                ("count: 4", "count: 9"),
                ("topology: ring_1d ", "topology: torus_2d "),
                ("ports_per_edge: 1", "ports_per_edge: 2"),
            ]),
            edited(&[
                ("count: 4", "count: 6"),
                ("topology: ring_1d ", "topology: mesh_2d_no_wrap "),
                ("# w: 2 ", "w: 3 "),
                ("# h: 2 ", "h: 2 "),
                ("endpoints: 1 ", "endpoints: 2 "),
            ]),
            edited(&[("count: 4", "count: 1"), ("endpoints: 1 ", "endpoints: 0 ")]),
        ];
        for spec in specs {
            let t = build(&spec).unwrap();
            let sips = spec.n_sips();
            for i in t.graph.node_indices() {
                let n = t.graph[i];
                assert_eq!(t.node_index(&n), Some(i), "{n}");
                assert_eq!(t.node_index(&n.with_sip(sips)), None, "{n} in SIP {sips}");
            }
            // A SIP port where the shape has none (the mesh's edges).
            if spec.system.sips.topology == crate::config::topology::SipTopology::Mesh2dNoWrap {
                let west = NodeId::SipPort {
                    sip: 0,
                    side: Side::W,
                };
                assert_eq!(t.node_index(&west), None);
            }
        }
    }
}
