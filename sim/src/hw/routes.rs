//! The routes a PE's DMA engine used last, resolved to link calendars.

use super::link::{LinkTable, Route};
use crate::engine::lock::OneThread;
use crate::routing::{PathRouter, RouteError};
use crate::topology::NodeId;
use smallvec::SmallVec;

/// The last few routes a PE's DMA engine used (a kernel moves data along
/// a handful of them: its loads, stores and sends), so that a command
/// finds its route without the router's shared map or a per-hop lookup
/// in the link table.
#[derive(Default)]
pub(super) struct RecentRoutes {
    entries: SmallVec<[(NodeId, NodeId, Route); RECENT_ROUTES]>,
    /// The entry replaced next once all are in use.
    next: usize,
}

const RECENT_ROUTES: usize = 4;

impl RecentRoutes {
    pub(super) fn get(
        &mut self,
        router: &PathRouter,
        links: &OneThread<LinkTable>,
        from: NodeId,
        to: NodeId,
    ) -> Result<Route, RouteError> {
        if let Some((_, _, r)) = self.entries.iter().find(|e| e.0 == from && e.1 == to) {
            return Ok(r.clone());
        }
        let r = links.lock().route(&router.find_path(from, to)?);
        if self.entries.len() < RECENT_ROUTES {
            self.entries.push((from, to, r.clone()));
        } else {
            self.entries[self.next] = (from, to, r.clone());
            self.next = (self.next + 1) % RECENT_ROUTES;
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TopologySpec;
    use std::sync::Arc;

    #[test]
    fn recent_routes_give_the_router_s_path_past_their_capacity() {
        let topo = Arc::new(crate::topology::build(&TopologySpec::default_embedded()).unwrap());
        let router = PathRouter::new(topo.clone());
        let links = OneThread::new(LinkTable::new(topo));
        let from: NodeId = "sip0.cube0.pe0".parse().unwrap();
        let tos: Vec<NodeId> = (0..RECENT_ROUTES as u32 + 3)
            .map(|i| format!("sip{}.cube{}.pe0", i % 2, i / 2).parse().unwrap())
            .collect();
        let mut recent = RecentRoutes::default();
        // Twice round, so that evicted entries are asked for again.
        for to in tos.iter().chain(&tos) {
            let got = recent.get(&router, &links, from, *to).unwrap();
            let hops = got.links();
            assert_eq!(hops, &*router.find_path(from, *to).unwrap(), "to {to}");
        }
        assert_eq!(recent.entries.len(), RECENT_ROUTES);
    }
}
