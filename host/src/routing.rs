//! Path routing: which directed links a transfer from node A to node B
//! uses. Shortest path by latency (ties broken by hop count, then by the
//! builder's deterministic order); results are cached.

use crate::topology::{LinkId, NodeId, Topology};
use petgraph::algo::astar;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A routed path: the links in order, from source to destination.
pub type Path = Arc<[LinkId]>;

/// No route between two nodes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("unknown node {0}")]
    UnknownNode(String),
    #[error("no path from {from} to {to}")]
    NoPath { from: String, to: String },
}

/// Answers path queries on one topology.
pub struct PathRouter {
    topo: Arc<Topology>,
    cache: Mutex<HashMap<(NodeId, NodeId), Path>>,
}

impl PathRouter {
    pub fn new(topo: Arc<Topology>) -> Self {
        PathRouter {
            topo,
            cache: Mutex::new(HashMap::new()),
        }
    }

    pub fn topology(&self) -> &Arc<Topology> {
        &self.topo
    }

    /// The links from `from` to `to` (empty when they are the same node).
    pub fn path(&self, from: NodeId, to: NodeId) -> Result<Path, RouteError> {
        if let Some(p) = self.cache.lock().unwrap().get(&(from, to)) {
            return Ok(p.clone());
        }
        let t = &self.topo;
        let a = t
            .node_index(&from)
            .ok_or_else(|| RouteError::UnknownNode(from.to_string()))?;
        let b = t
            .node_index(&to)
            .ok_or_else(|| RouteError::UnknownNode(to.to_string()))?;
        // Cost: latency in ps, +1 per hop so that zero-latency links still
        // prefer fewer hops.
        let found = astar(
            &t.graph,
            a,
            |n| n == b,
            |e| t.links[*e.weight() as usize].latency + 1,
            |_| 0,
        );
        let (_, nodes) = found.ok_or_else(|| RouteError::NoPath {
            from: from.to_string(),
            to: to.to_string(),
        })?;
        let mut links = Vec::with_capacity(nodes.len().saturating_sub(1));
        for w in nodes.windows(2) {
            // Lowest link id among parallel edges: deterministic.
            let id = t
                .graph
                .edges_connecting(w[0], w[1])
                .map(|e| *e.weight())
                .min()
                .expect("astar returned adjacent nodes");
            links.push(id);
        }
        let path: Path = links.into();
        self.cache.lock().unwrap().insert((from, to), path.clone());
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TopologySpec;
    use crate::topology::{build, LinkKind};

    #[test]
    fn neighbour_sips_cross_exactly_one_inter_sip_link() {
        let t = Arc::new(build(&TopologySpec::default_embedded()));
        let r = PathRouter::new(t.clone());
        let p = r
            .path(
                "sip0.cube0.pe0".parse().unwrap(),
                "sip1.cube0.pe0".parse().unwrap(),
            )
            .unwrap();
        let kinds: Vec<_> = p.iter().map(|&l| t.links[l as usize].kind).collect();
        assert_eq!(
            kinds.iter().filter(|k| **k == LinkKind::InterSip).count(),
            1
        );
        assert_eq!(kinds.first(), Some(&LinkKind::PeAttach));
        assert_eq!(kinds.last(), Some(&LinkKind::PeAttach));
        // consecutive links chain node to node
        for w in p.windows(2) {
            assert_eq!(t.links[w[0] as usize].to, t.links[w[1] as usize].from);
        }
    }

    #[test]
    fn same_node_is_an_empty_path() {
        let r = PathRouter::new(Arc::new(build(&TopologySpec::default_embedded())));
        let n: NodeId = "sip0.cube0.pe0".parse().unwrap();
        assert!(r.path(n, n).unwrap().is_empty());
    }
}
