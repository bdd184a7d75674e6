//! The modelled machine as a graph: named nodes (routers, PEs, HBM, SRAM,
//! UCIe ports, SIP ports) and directed, typed links with bandwidth and
//! latency. Pure data plus the builder; routing lives in [`crate::routing`].

mod builder;
pub mod naming;

pub use builder::build;
pub use naming::{NodeId, PeCoord, Side};

use crate::config::TopologySpec;
use crate::units::{Ps, Rate};
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::HashMap;

/// What a link is, for reports and for choosing figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkKind {
    /// Router to router inside a cube, or router to a port node.
    Noc,
    /// PE to its corner router.
    PeAttach,
    /// HBM stack to its router.
    Hbm,
    /// SRAM to its router.
    Sram,
    /// Die-to-die link between neighbouring cubes.
    Ucie,
    /// SIP to SIP.
    InterSip,
}

/// Index of a directed link in [`Topology::links`].
pub type LinkId = u32;

/// One direction of a physical link.
#[derive(Debug, Clone)]
pub struct Link {
    pub kind: LinkKind,
    pub from: NodeId,
    pub to: NodeId,
    pub rate: Rate,
    pub latency: Ps,
}

/// The built machine graph.
#[derive(Debug)]
pub struct Topology {
    pub spec: TopologySpec,
    pub graph: DiGraph<NodeId, LinkId>,
    pub links: Vec<Link>,
    index: HashMap<NodeId, NodeIndex>,
}

impl Topology {
    pub fn node_index(&self, n: &NodeId) -> Option<NodeIndex> {
        self.index.get(n).copied()
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
