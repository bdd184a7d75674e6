//! Where a named node is in the graph: the topology's node index.
//!
//! Every SIP is built by the same code from the same spec, so SIP `s`'s
//! nodes are one block of graph indices, `s * per_sip ..`, in the order
//! SIP 0's were added. The index keeps SIP 0's names only (a few hundred:
//! they stay in cache) and finds a node of any SIP from its name with the
//! SIP set to 0, plus its SIP's block; the nodes added after the SIP blocks
//! (the SIP ports, which differ from SIP to SIP) are kept by name. A map of
//! every node (430 K at 1024 SIPs) was written in random order while the
//! graph was built: a cache miss, and often a page fault, per node (a
//! 1024-SIP build 122-142 -> 50-57 ms, `hello_send`'s RSS 275 -> 265 MB).

use super::NodeId;
use petgraph::graph::NodeIndex;
use rustc_hash::FxHashMap;

/// The node index by name (see the module doc). Filled by the builder,
/// SIP by SIP ([`NodeIndexMap::begin_sip`], [`NodeIndexMap::insert`],
/// [`NodeIndexMap::end_sip`]), then with the nodes after the SIP blocks.
#[derive(Debug, Default)]
pub struct NodeIndexMap {
    /// SIP 0's nodes (their SIP is 0): index within a SIP's block.
    block: FxHashMap<NodeId, u32>,
    /// Nodes in a SIP's block (SIP 0's count, once it is complete).
    per_sip: u32,
    /// SIP blocks complete.
    sips: u32,
    /// The SIP being built (`None`: none, nodes go to `rest`).
    building: Option<u32>,
    /// Nodes outside the SIP blocks.
    rest: FxHashMap<NodeId, NodeIndex>,
}

/// Where a node would go in the graph, as [`NodeIndexMap::place`] finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// It is in the graph already, at this index.
    At(NodeIndex),
    /// It is new: the graph's next node, to be told with
    /// [`NodeIndexMap::insert`] once added.
    New,
}

impl NodeIndexMap {
    /// The graph index of `n`, if the topology has it.
    pub fn get(&self, n: &NodeId) -> Option<NodeIndex> {
        let sip = n.sip();
        if sip < self.sips {
            if let Some(&local) = self.block.get(&n.with_sip(0)) {
                return Some(NodeIndex::new(self.block_start(sip) + local as usize));
            }
        }
        self.rest.get(n).copied()
    }

    /// Nodes in each SIP's block (0 before SIP 0's block is complete).
    pub fn per_sip(&self) -> u32 {
        self.per_sip
    }

    /// The graph index of SIP `sip`'s first node (blocks of SIP 0's size).
    fn block_start(&self, sip: u32) -> usize {
        sip as usize * self.per_sip as usize
    }

    /// The builder starts SIP `sip`'s block; the graph holds `nodes`
    /// nodes. SIPs come in order, each block right after the last.
    pub fn begin_sip(&mut self, sip: u32, nodes: usize) {
        assert!(
            sip == self.sips && nodes == self.block_start(sip),
            "topology builder: SIP {sip} begun out of order ({nodes} nodes, {} SIPs of {} before)",
            self.sips,
            self.per_sip
        );
        self.building = Some(sip);
    }

    /// The builder ends SIP `sip`'s block; the graph holds `nodes` nodes.
    /// Every SIP's block is SIP 0's size (the same code built it).
    pub fn end_sip(&mut self, sip: u32, nodes: usize) {
        assert_eq!(
            self.building,
            Some(sip),
            "topology builder: SIP {sip} ended unbegun"
        );
        if sip == 0 {
            self.per_sip = u32::try_from(nodes).expect("a SIP has fewer than 2^32 nodes");
        }
        assert_eq!(
            nodes,
            self.block_start(sip + 1),
            "topology builder: SIP {sip} has not SIP 0's {} nodes",
            self.per_sip
        );
        self.sips = sip + 1;
        self.building = None;
    }

    /// Where `n` is or goes when the graph holds `nodes` nodes. While a
    /// SIP after the first is built, a node of it not yet added must be
    /// the graph's next one: SIP 0's nodes were added in this order.
    pub fn place(&self, n: &NodeId, nodes: usize) -> Placed {
        match self.building {
            Some(0) if n.sip() == 0 => match self.block.get(n) {
                Some(&local) => Placed::At(NodeIndex::new(local as usize)),
                None => Placed::New,
            },
            Some(sip) if n.sip() == sip => {
                let local = *self
                    .block
                    .get(&n.with_sip(0))
                    .unwrap_or_else(|| panic!("topology builder: {n} has no counterpart in SIP 0"));
                let at = self.block_start(sip) + local as usize;
                assert!(
                    at <= nodes,
                    "topology builder: {n} added out of SIP 0's order"
                );
                if at < nodes {
                    Placed::At(NodeIndex::new(at))
                } else {
                    Placed::New
                }
            }
            _ => match self.get(n) {
                Some(at) => Placed::At(at),
                None => Placed::New,
            },
        }
    }

    /// `n` was just added to the graph at `at` (after [`Placed::New`]).
    pub fn insert(&mut self, n: NodeId, at: NodeIndex) {
        match self.building {
            Some(0) if n.sip() == 0 => {
                let local = u32::try_from(at.index()).expect("a SIP has fewer than 2^32 nodes");
                self.block.insert(n, local);
            }
            // A later SIP's node: its place follows from SIP 0's.
            Some(sip) if n.sip() == sip => {}
            _ => {
                self.rest.insert(n, at);
            }
        }
    }

    /// Room for `more` nodes outside the SIP blocks.
    pub fn reserve_rest(&mut self, more: usize) {
        self.rest.reserve(more);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::PeCoord;

    fn pe(sip: u32, pe: u32) -> NodeId {
        NodeId::Pe(PeCoord { sip, cube: 0, pe })
    }

    /// Two SIPs of two nodes each and a node after them: every node is
    /// found where it was added, and nothing else is found.
    #[test]
    fn a_later_sips_nodes_are_found_by_sip_zeros_order() {
        let mut m = NodeIndexMap::default();
        let mut nodes = 0;
        let mut add = |m: &mut NodeIndexMap, n: NodeId| -> NodeIndex {
            match m.place(&n, nodes) {
                Placed::At(i) => i,
                Placed::New => {
                    let i = NodeIndex::new(nodes);
                    nodes += 1;
                    m.insert(n, i);
                    i
                }
            }
        };
        m.begin_sip(0, 0);
        assert_eq!(add(&mut m, pe(0, 1)).index(), 0);
        assert_eq!(add(&mut m, pe(0, 0)).index(), 1);
        assert_eq!(add(&mut m, pe(0, 1)).index(), 0, "found, not added twice");
        m.end_sip(0, 2);
        m.begin_sip(1, 2);
        assert_eq!(add(&mut m, pe(1, 1)).index(), 2);
        assert_eq!(add(&mut m, pe(1, 0)).index(), 3);
        m.end_sip(1, 4);
        let port = NodeId::SipPort {
            sip: 1,
            side: crate::topology::Side::E,
        };
        assert_eq!(add(&mut m, port).index(), 4);
        for (n, i) in [
            (pe(0, 1), 0),
            (pe(0, 0), 1),
            (pe(1, 1), 2),
            (pe(1, 0), 3),
            (port, 4),
        ] {
            assert_eq!(m.get(&n), Some(NodeIndex::new(i)), "{n}");
        }
        assert_eq!(m.get(&pe(2, 0)), None, "no third SIP");
        assert_eq!(m.get(&pe(0, 2)), None, "no third PE");
    }

    /// A later SIP that would add its nodes in another order than SIP 0
    /// is a builder bug, caught at once.
    #[test]
    fn a_later_sip_out_of_sip_zeros_order_is_caught() {
        let mut m = NodeIndexMap::default();
        m.begin_sip(0, 0);
        m.insert(pe(0, 0), NodeIndex::new(0));
        m.insert(pe(0, 1), NodeIndex::new(1));
        m.end_sip(0, 2);
        m.begin_sip(1, 2);
        let skipped = std::panic::catch_unwind(|| m.place(&pe(1, 1), 2));
        assert!(skipped.is_err());
    }
}
