//! [`Adjacency`]: the out-links of every node in one view, laid out for
//! the shortest-path searches of [`super::PathRouter`] and the inside
//! latencies of [`super::sip_ports`].

use crate::topology::{LinkId, Topology, View};
use crate::units::Ps;

/// One out-link of a node, with what a shortest-path search reads of it
/// (so the search reads no [`crate::topology::Link`]: at thousands of
/// ranks the link table is megabytes and every read a cache miss).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Edge {
    /// The node it leads to.
    pub to: u32,
    pub id: LinkId,
    pub latency: Ps,
}

/// Compressed adjacency of one view: for node `i`, its out-links are
/// `links[start[i]..start[i+1]]`, in link-id order.
pub(crate) struct Adjacency {
    start: Vec<u32>,
    links: Vec<Edge>,
}

impl Adjacency {
    /// The bytes of the adjacency of a view of `n` nodes and at most
    /// `links` links.
    pub(super) fn bytes_at_most(n: u64, links: u64) -> u64 {
        (n + 1) * std::mem::size_of::<u32>() as u64 + links * std::mem::size_of::<Edge>() as u64
    }

    /// Built in place in two passes over the links (count each node's
    /// out-links, then fill): no vector per node (1.7 M of them at 4096
    /// SIPs, grown one push at a time). The links are read in id order
    /// from the topology's table (the graph's edge `i` is link `i`), so
    /// each node's out-links come out in id order with no sort, and no
    /// lookup goes through the graph: 43.3 M -> 35.5 M instructions at 256
    /// SIPs (callgrind). At 1024 SIPs the build is ~8 % of the engine
    /// thread's samples before the first step (`perf`), about half of
    /// them first touches of its tables' memory (~4.6 K page faults).
    pub(super) fn build(t: &Topology, view: View) -> Self {
        let n = t.node_count();
        debug_assert_eq!(t.graph.edge_count(), t.links.len());
        let in_view = || {
            (0..)
                .zip(&t.links)
                .filter(|(_, link)| view.allows(link.kind))
        };
        let mut start = vec![0u32; n + 1];
        for (_, link) in in_view() {
            start[link.from.index() + 1] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut next = start.clone();
        let blank = Edge {
            to: 0,
            id: 0,
            latency: 0,
        };
        let mut links = vec![blank; start[n] as usize];
        for (id, link) in in_view() {
            let a = link.from.index();
            links[next[a] as usize] = Edge {
                to: link.to.index() as u32,
                id,
                latency: link.latency,
            };
            next[a] += 1;
        }
        Adjacency { start, links }
    }

    /// The bytes its tables take.
    #[cfg(test)]
    pub(super) fn bytes(&self) -> u64 {
        (std::mem::size_of_val(&self.start[..]) + std::mem::size_of_val(&self.links[..])) as u64
    }

    pub(crate) fn out(&self, i: usize) -> &[Edge] {
        &self.links[self.start[i] as usize..self.start[i + 1] as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each node's out-links, read from the link table, are the graph's
    /// edges out of it in the view, in id order.
    #[test]
    fn the_adjacency_is_the_graphs_out_edges_in_id_order() {
        use petgraph::visit::EdgeRef;
        let spec = crate::config::edited_default_topology(&[("count: 4", "count: 3")]);
        let t = crate::topology::build(&spec).unwrap();
        for view in View::ALL {
            let adj = Adjacency::build(&t, view);
            for node in t.graph.node_indices() {
                let mut want: Vec<(LinkId, u32)> = t
                    .graph
                    .edges(node)
                    .filter(|e| view.allows(t.links[*e.weight() as usize].kind))
                    .map(|e| (*e.weight(), e.target().index() as u32))
                    .collect();
                want.sort();
                let got: Vec<(LinkId, u32)> =
                    adj.out(node.index()).iter().map(|e| (e.id, e.to)).collect();
                assert_eq!(got, want, "{} in {view:?}", t.node(node));
            }
        }
    }
}
