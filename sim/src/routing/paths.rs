//! [`PathRouter`]: shortest paths over the view projections, with the
//! deterministic tie-break documented in [`super`]; results are cached
//! per (view, source, destination).

use super::adjacency::{Adjacency, Edge};
use super::resolver::AddressResolver;
use super::sip_bound::SipBound;
use super::sip_ports::{walk_back, SipPorts, Toward};
use super::RouteError;
use crate::topology::{LinkId, LinkKind, NodeId, PeCoord, Topology, View};
use crate::units::{Ps, Rate};
use petgraph::graph::NodeIndex;
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex, OnceLock};

/// A routed path: the links in order, from source to destination.
pub type Path = Arc<[LinkId]>;

/// Uncontended figures of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Distance {
    /// Σ link latency.
    pub latency_ps: Ps,
    pub hops: u32,
    /// The slowest link (None for an empty path).
    pub bottleneck: Option<Rate>,
}

#[derive(Default)]
struct Scratch {
    dist: Vec<(Ps, u32)>,
    /// The link a node is reached by, and the node it leaves.
    pred: Vec<(LinkId, u32)>,
    touched: Vec<u32>,
    /// Entries `key(latency + bound, hops, node)`, smallest first.
    heap: BinaryHeap<Reverse<u128>>,
}

/// A search entry ordered as (latency + bound, hops, node) is, in one integer:
/// one comparison per heap step instead of three.
fn key(lat: Ps, hops: u32, node: u32) -> u128 {
    ((lat as u128) << 64) | ((hops as u128) << 32) | node as u128
}

impl Scratch {
    /// Tables for a graph of `n` nodes, every node unreached.
    fn size_for(&mut self, n: usize) {
        if self.dist.len() != n {
            self.dist = vec![UNREACHED; n];
            self.pred = vec![NO_PRED; n];
        }
    }

    /// The bytes of the tables [`Scratch::size_for`] makes for `n` nodes.
    fn bytes_for(n: u64) -> u64 {
        n * (std::mem::size_of_val(&UNREACHED) + std::mem::size_of_val(&NO_PRED)) as u64
    }
}

/// The (latency, hops) of a node not reached (yet).
const UNREACHED: (Ps, u32) = (Ps::MAX, u32::MAX);

/// The link a node not reached (yet) is reached by.
const NO_PRED: (LinkId, u32) = (LinkId::MAX, u32::MAX);

/// [`PathRouter::find_paths`] searches half of its pairs on a helper
/// thread from this many (fewer are not worth a thread).
const ON_A_HELPER_FROM: usize = 64;

/// The helper thread of [`PathRouter::warm_in_background`], joined on drop.
pub struct Warming(Option<std::thread::JoinHandle<()>>);

impl Drop for Warming {
    fn drop(&mut self) {
        if let Some(helper) = self.0.take() {
            // Were it to panic, the first search would make the same
            // tables and meet the same panic, on the engine thread.
            let _ = helper.join();
        }
    }
}

/// Answers path queries on one topology.
pub struct PathRouter {
    topo: Arc<Topology>,
    resolver: AddressResolver,
    views: [OnceLock<Adjacency>; 4],
    bound: OnceLock<SipBound>,
    /// The device view through its SIP ports, made with the first search
    /// or latency between SIPs that are not neighbours (`None`: the
    /// machine has no such structure, see [`SipPorts::of`]).
    ports: OnceLock<Option<SipPorts>>,
    /// Tie-break rank of each link: 0 for north–south links, 1 otherwise
    /// (made with the first search, or by [`PathRouter::warm`]).
    rank: OnceLock<Vec<u8>>,
    /// Dijkstra buffers reused between queries (reset by touched list):
    /// two, so that two threads search at once — the partitions of a
    /// split machine, whose first transfers between far SIPs each search
    /// (a full mesh's all-to-all at 256 SIPs is most of its run), and the
    /// install's batch ([`PathRouter::find_paths`]). The second is sized
    /// when first used.
    scratch: [Mutex<Scratch>; 2],
    cache: Mutex<FxHashMap<(View, NodeId, NodeId), Path>>,
}

fn is_north_south(kind: LinkKind, from: NodeId, to: NodeId) -> bool {
    match (kind, from, to) {
        (LinkKind::Noc, NodeId::Router { x: a, .. }, NodeId::Router { x: b, .. }) => a == b,
        (LinkKind::Ucie, NodeId::Ucie { side, .. }, _) => side.is_vertical(),
        (LinkKind::InterSip, NodeId::SipPort { side, .. }, _) => side.is_vertical(),
        _ => false,
    }
}

impl PathRouter {
    /// The view of a device path ([`PathRouter::find_path`], and the
    /// searches [`PathRouter::find_paths`] does ahead of it).
    pub const DEVICE_VIEW: View = View::Noc;

    pub fn new(topo: Arc<Topology>) -> Self {
        PathRouter {
            resolver: AddressResolver::new(topo.clone()),
            topo,
            views: Default::default(),
            bound: OnceLock::new(),
            ports: OnceLock::new(),
            rank: OnceLock::new(),
            scratch: Default::default(),
            cache: Mutex::new(FxHashMap::default()),
        }
    }

    fn rank(&self) -> &[u8] {
        self.rank.get_or_init(|| {
            let t = &self.topo;
            t.links
                .iter()
                .map(|l| {
                    let (from, to) = t.ends(l);
                    u8::from(!is_north_south(l.kind, from, to))
                })
                .collect()
        })
    }

    fn bound(&self) -> &SipBound {
        self.bound.get_or_init(|| SipBound::new(&self.topo))
    }

    /// Make now what a search in `view` uses: the view's adjacency, the
    /// links' tie-break ranks, the search bound and the scratch tables.
    /// At 1024 SIPs that is ~34 MB written for the first time (~7.5 K
    /// page faults) and three passes over the 1.2 M links.
    pub fn warm(&self, view: View) {
        self.adjacency(view);
        self.make_search_tables();
    }

    /// What a search needs besides a view's adjacency: the links'
    /// tie-break ranks, the search bound and the search tables. Each is
    /// made once, by whoever asks first.
    fn make_search_tables(&self) {
        self.rank();
        self.bound();
        self.scratch[0]
            .lock()
            .unwrap()
            .size_for(self.topo.node_count());
    }

    /// The bytes of the tables [`PathRouter::warm`] makes for a view (at
    /// most: the adjacency is counted with every link of the machine).
    pub fn table_bytes(&self) -> u64 {
        let (n, links) = (self.topo.node_count() as u64, self.topo.links.len() as u64);
        // The ranks: a byte a link; both search tables.
        Adjacency::bytes_at_most(n, links) + links + SipBound::bytes(n) + 2 * Scratch::bytes_for(n)
    }

    /// [`PathRouter::warm`] on a helper thread, while the caller goes on
    /// (worth it where the process has a second core). Searches meanwhile
    /// wait for what they need. The helper is joined when the returned
    /// value drops.
    pub fn warm_in_background(self: &Arc<Self>, view: View) -> Warming {
        let router = self.clone();
        let helper = std::thread::Builder::new()
            .name("route-warmup".into())
            .spawn(move || router.warm(view))
            .ok();
        Warming(helper)
    }

    pub fn topology(&self) -> &Arc<Topology> {
        &self.topo
    }

    pub fn resolver(&self) -> &AddressResolver {
        &self.resolver
    }

    pub(crate) fn adjacency(&self, view: View) -> &Adjacency {
        let i = View::ALL.iter().position(|v| *v == view).expect("a view");
        self.views[i].get_or_init(|| Adjacency::build(&self.topo, view))
    }

    fn index(&self, n: NodeId) -> Result<NodeIndex, RouteError> {
        self.topo
            .node_index(&n)
            .ok_or_else(|| RouteError::UnknownNode(n.to_string()))
    }

    /// Device path ([`PathRouter::DEVICE_VIEW`]) from `from` to `to`;
    /// empty when they are the same node.
    pub fn find_path(&self, from: NodeId, to: NodeId) -> Result<Path, RouteError> {
        self.find_path_in(Self::DEVICE_VIEW, from, to)
    }

    /// Path in a given view.
    pub fn find_path_in(&self, view: View, from: NodeId, to: NodeId) -> Result<Path, RouteError> {
        self.find_path_with(view, from, to, self.free_scratch())
    }

    /// A search table no other thread holds now, if there is one (else
    /// the first, to wait for). Another thread may take it before the
    /// caller locks it: the caller then waits, as it would have.
    fn free_scratch(&self) -> &Mutex<Scratch> {
        self.scratch
            .iter()
            .find(|s| s.try_lock().is_ok())
            .unwrap_or(&self.scratch[0])
    }

    /// Find (and cache) the device paths between the pairs `pairs`, half
    /// of them on a helper thread with the second search table when there
    /// are many and the process has a second core: what a caller about
    /// to ask for each of them in turn (the IPCQ install, a search per
    /// direction of every PE: 1024 at 1024 ranks, ~25 ms of the engine
    /// thread's setup) does first. The same paths as one search after
    /// another (each search is deterministic and independent of the one
    /// before). A pair that has no path is left for the caller's own
    /// search to report. A pair whose SIPs are not neighbours is left too:
    /// its least latency comes from the port tables without a search
    /// ([`PathRouter::latency_back`]), and its path is walked back if a
    /// transfer takes it (a full mesh's install asks for every pair).
    pub fn find_paths(&self, pairs: &[(NodeId, NodeId)]) {
        let bound = self.bound();
        let near = |&&(from, to): &&(NodeId, NodeId)| {
            let (a, b) = (from.sip(), to.sip());
            a as usize >= bound.neighbours.len() || !bound.by_ports(a, b)
        };
        let pairs: Vec<(NodeId, NodeId)> = pairs.iter().filter(near).copied().collect();
        let pairs = &pairs[..];
        if pairs.is_empty() {
            return;
        }
        let helper_ok = crate::cores::more_than_one_core();
        let (mine, theirs) = if helper_ok && pairs.len() >= ON_A_HELPER_FROM {
            pairs.split_at(pairs.len() / 2)
        } else {
            (pairs, &[][..])
        };
        // Made here while a warm-up helper may still be building the
        // view's adjacency (1024 SIPs, test build: adjacency ~18 ms, then
        // ranks ~3, bound ~4, search tables ~5 in turn), so the engine
        // thread waits for the longest instead of for all four. The same
        // tables either way.
        self.make_search_tables();
        let search = |pairs: &[(NodeId, NodeId)], scratch: &Mutex<Scratch>| {
            for &(from, to) in pairs {
                let _ = self.find_path_with(Self::DEVICE_VIEW, from, to, scratch);
            }
        };
        std::thread::scope(|scope| {
            if !theirs.is_empty() {
                let spawned = std::thread::Builder::new()
                    .name("route-search".into())
                    .spawn_scoped(scope, || search(theirs, &self.scratch[1]));
                if spawned.is_err() {
                    search(theirs, &self.scratch[0]);
                }
            }
            search(mine, &self.scratch[0]);
        });
    }

    /// [`PathRouter::find_path_in`] with the search tables `scratch`.
    fn find_path_with(
        &self,
        view: View,
        from: NodeId,
        to: NodeId,
        scratch: &Mutex<Scratch>,
    ) -> Result<Path, RouteError> {
        let key = (view, from, to);
        if let Some(p) = self.cache.lock().unwrap().get(&key) {
            return Ok(p.clone());
        }
        let (a, b) = (self.index(from)?, self.index(to)?);
        let path: Path = self
            .shortest(view, a, b, scratch)
            .ok_or_else(|| RouteError::NoPath {
                from: from.to_string(),
                to: to.to_string(),
                view: view.name(),
            })?
            .into();
        self.cache.lock().unwrap().insert(key, path.clone());
        Ok(path)
    }

    /// Device path and its uncontended figures.
    pub fn find_path_with_distance(
        &self,
        from: NodeId,
        to: NodeId,
    ) -> Result<(Path, Distance), RouteError> {
        let p = self.find_path(from, to)?;
        let d = self.distance(&p);
        Ok((p, d))
    }

    /// Figures of a path.
    pub fn distance(&self, path: &[LinkId]) -> Distance {
        let links = &self.topo.links;
        Distance {
            latency_ps: path.iter().map(|&l| links[l as usize].latency).sum(),
            hops: path.len() as u32,
            bottleneck: path.iter().map(|&l| links[l as usize].rate).min(),
        }
    }

    /// The least latency of a path from `to` back to `from` (e.g. an IPCQ
    /// credit returning to the sender of a message from `from` to `to`).
    /// Links are full duplex with the same figures both ways (see
    /// [`crate::topology::Link`]), so it is the least latency from `from`
    /// to `to`: that path is the one searched (and cached), and the
    /// transfers from `from` to `to` then find it here instead of a search
    /// of their own (a 1024-rank ring all-reduce searched 2048 paths, the
    /// install's way back and the sends' way forward; now 1024).
    ///
    /// Between SIPs that are not neighbours it is read from the port
    /// tables ([`SipPorts`]) instead, with no search and no path cached: a
    /// full mesh's IPCQ install asks for every pair (128 x 127 at 128
    /// SIPs, 5.5 s of searches), and its algorithm then sends on a few.
    pub fn latency_back(&self, from: NodeId, to: NodeId) -> Result<Ps, RouteError> {
        let (a, b) = (self.index(from)?, self.index(to)?);
        if let Some((ports, toward)) = self.far_tables(Self::DEVICE_VIEW, (a, b), b) {
            let least = ports.latency(&toward, a.index());
            if least != Ps::MAX {
                return Ok(least);
            }
        }
        Ok(self.distance(&self.find_path(from, to)?).latency_ps)
    }

    /// The port tables toward `end` (`a` or `b`), when the pair `a -> b`
    /// in `view` is one they serve ([`SipBound::by_ports`]; device view
    /// only): toward `b` for its latency and its search's bound, toward
    /// `a` for its path ([`walk_back`]).
    fn far_tables(
        &self,
        view: View,
        (a, b): (NodeIndex, NodeIndex),
        end: NodeIndex,
    ) -> Option<(&SipPorts, Arc<Toward>)> {
        if view != Self::DEVICE_VIEW {
            return None;
        }
        let bound = self.bound();
        let sip = |n: NodeIndex| bound.sip_of[n.index()];
        if !bound.by_ports(sip(a), sip(b)) {
            return None;
        }
        let adj = self.adjacency(view);
        let ports = self
            .ports
            .get_or_init(|| SipPorts::of(&self.topo, adj))
            .as_ref()?;
        Some((ports, ports.toward(adj, end.index())?))
    }

    /// Path from `pe` to the memory node that holds `addr` (the HBM stack,
    /// SRAM or TCM the address falls in), checking `[addr, addr+len)`.
    pub fn find_memory_path(&self, pe: PeCoord, addr: u64, len: u64) -> Result<Path, RouteError> {
        let r = self.resolver.resolve(addr, len)?;
        self.find_path(NodeId::Pe(pe), r.node)
    }

    /// Path of an M_CPU DMA from cube `(sip, cube)`'s M_CPU to the memory
    /// holding `addr`, in view `m_cpu_dma` (it cannot leave the SIP).
    pub fn find_mcpu_dma_path(
        &self,
        sip: u32,
        cube: u32,
        addr: u64,
        len: u64,
    ) -> Result<Path, RouteError> {
        let m = self
            .resolver
            .find_m_cpu(sip, cube)
            .ok_or_else(|| RouteError::UnknownNode(NodeId::MCpu { sip, cube }.to_string()))?;
        let r = self.resolver.resolve(addr, len)?;
        self.find_path_in(View::MCpuDma, m, r.node)
    }

    /// Node sequence of the path between two named nodes in `view`
    /// (both ends included).
    pub fn find_node_path(
        &self,
        view: View,
        from: &str,
        to: &str,
    ) -> Result<Vec<NodeId>, RouteError> {
        let parse = |s: &str| s.parse::<NodeId>().map_err(RouteError::UnknownNode);
        let (a, b) = (parse(from)?, parse(to)?);
        let p = self.find_path_in(view, a, b)?;
        Ok(self.nodes_of(a, &p))
    }

    /// The nodes a path visits, starting at `from`.
    pub fn nodes_of(&self, from: NodeId, path: &[LinkId]) -> Vec<NodeId> {
        std::iter::once(from)
            .chain(
                path.iter()
                    .map(|&l| self.topo.node(self.topo.links[l as usize].to)),
            )
            .collect()
    }

    /// Shortest path by (latency, hops) with the documented tie-break.
    /// Between SIPs that are not neighbours it is walked back from the
    /// destination on the port tables ([`walk_back`]). Otherwise, or if
    /// that fails, an A* search, Dijkstra's with each entry keyed by its
    /// latency plus a lower bound on the latency left: between SIPs that
    /// are not neighbours the exact least latency from the port tables
    /// ([`SipPorts`]), otherwise [`SipBound`] (to leave the SIP, and to
    /// arrive at the destination). With a consistent bound the two find
    /// the same path, tie-break included: a node's distance is final
    /// when it is popped, and every equal-cost predecessor of a node on
    /// the path (same latency, one hop fewer, bound at most one link's
    /// latency more) is popped, and its link weighed by the tie-break,
    /// before the node itself.
    fn shortest(
        &self,
        view: View,
        a: NodeIndex,
        b: NodeIndex,
        scratch: &Mutex<Scratch>,
    ) -> Option<Vec<LinkId>> {
        if a == b {
            return Some(Vec::new());
        }
        if let Some((ports, from_a)) = self.far_tables(view, (a, b), a) {
            let here = (&*self.topo, view, self.rank());
            if let Some(path) = walk_back(ports, &from_a, here, a.index(), b.index()) {
                return Some(path);
            }
        }
        if let Some((ports, toward)) = self.far_tables(view, (a, b), b) {
            return self.search(view, a, b, scratch, |v| ports.latency(&toward, v));
        }
        let bound = self.bound();
        let to_sip = bound.sip_of[b.index()];
        // The least latency of the view's links into `b`.
        let floor = if bound.arrival_floor {
            self.topo
                .graph
                .edges_directed(b, petgraph::Direction::Incoming)
                .map(|e| &self.topo.links[*e.weight() as usize])
                .filter(|l| view.allows(l.kind))
                .map(|l| l.latency)
                .min()
                .unwrap_or(0)
        } else {
            0
        };
        let h = |v: usize| {
            if v == b.index() {
                0
            } else {
                bound.from(v, to_sip).max(floor)
            }
        };
        self.search(view, a, b, scratch, h)
    }

    /// The A* search of [`PathRouter::shortest`] with the bound `h` (the
    /// least latency left from a node, at most; `Ps::MAX`: the
    /// destination cannot be reached from it, and it is not entered).
    fn search(
        &self,
        view: View,
        a: NodeIndex,
        b: NodeIndex,
        scratch: &Mutex<Scratch>,
        h: impl Fn(usize) -> Ps,
    ) -> Option<Vec<LinkId>> {
        let adj = self.adjacency(view);
        let rank = self.rank();
        let n = self.topo.node_count();
        let mut guard = scratch.lock().unwrap();
        guard.size_for(n);
        let Scratch {
            dist,
            pred,
            touched,
            heap,
        } = &mut *guard;
        heap.clear();
        dist[a.index()] = (0, 0);
        touched.push(a.index() as u32);
        heap.push(Reverse(key(h(a.index()), 0, a.index() as u32)));
        let better = |new: LinkId, old: LinkId| {
            old == LinkId::MAX || (rank[new as usize], new) < (rank[old as usize], old)
        };
        while let Some(Reverse(k)) = heap.pop() {
            let (f, hops, u) = ((k >> 64) as Ps, (k >> 32) as u32, k as u32);
            if u as usize == b.index() {
                break;
            }
            let lat = f - h(u as usize);
            if (lat, hops) > dist[u as usize] {
                continue;
            }
            for &Edge { to: v, id, latency } in adj.out(u as usize) {
                let nd = (lat + latency, hops + 1);
                let v = v as usize;
                if nd < dist[v] {
                    let left = h(v);
                    if left == Ps::MAX {
                        continue;
                    }
                    if dist[v].0 == Ps::MAX {
                        touched.push(v as u32);
                    }
                    dist[v] = nd;
                    pred[v] = (id, u);
                    heap.push(Reverse(key(nd.0 + left, nd.1, v as u32)));
                } else if nd == dist[v] && better(id, pred[v].0) {
                    pred[v] = (id, u);
                }
            }
        }
        let found = pred[b.index()].0 != LinkId::MAX;
        let mut path = Vec::new();
        let mut at = b.index();
        while found && at != a.index() {
            let (id, from) = pred[at];
            path.push(id);
            at = from as usize;
        }
        path.reverse();
        for &i in touched.iter() {
            dist[i as usize] = UNREACHED;
            pred[i as usize] = NO_PRED;
        }
        touched.clear();
        found.then_some(path)
    }
}

#[cfg(test)]
#[path = "paths_tests.rs"]
mod tests;
