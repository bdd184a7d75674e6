//! [`SipPorts`]: the device view of the machine seen through its SIP
//! ports, for the pairs of nodes whose SIPs are not neighbours. It gives
//! their exact least latency without a search, and their path without a
//! search ([`walk_back`]; the A* search it bounds exactly is the
//! fallback).
//!
//! **Why.** The SIP bound of [`super::PathRouter`] only says "leaving the
//! SIP costs an inter-SIP link". From SIP 0 to SIP 64 of a 128-SIP ring
//! the search therefore settled every node of the 64 SIPs on the way and
//! of half the others (~340 µs a path), and a full mesh's IPCQ install
//! searched 128 × 127 of them for their credit latencies: 5.5 s of a
//! 5.9 s binomial broadcast of 8 bytes.
//!
//! **The decomposition.** A path from node `v` to a destination `b` in
//! another SIP leaves `v`'s SIP by one of its ports first, so
//!
//! `d(v, b) = min over the ports p of v's SIP: inside(v, p) + d(p, b)`
//!
//! where `inside` is the least latency without leaving the SIP, and
//! `d(p, b)` for every port is one shortest-path search over the ports
//! alone: between two ports of one SIP the least latency inside it,
//! between two ports joined by an inter-SIP link that link, and from a
//! port of `b`'s SIP the least latency inside that SIP to `b`. (A path
//! is a chain of stretches inside one SIP joined by inter-SIP links; each
//! stretch costs at least its SIP's inside latency between its ends, and
//! such a chain is a path, so the minimum is exact.) For `v` in `b`'s own
//! SIP the minimum also takes `inside(v, b)`.
//!
//! Distances are kept as Dijkstra orders them, (latency, hops): the
//! decomposition holds for those sums as for latencies alone.
//!
//! **The path.** Dijkstra's path ends with the link into `b` that it keeps
//! of those from a node `u` with `d(a, u) + (latency, 1) = d(a, b)` — the
//! least by the router's tie-break — and so on back to `a`. The tables
//! toward `a` give every `d(a, u)` (the graph reads the same backwards),
//! so [`walk_back`] follows those links from `b` without a search: on a
//! torus, whose far pairs have many shortest paths, the search had to pop
//! the nodes of all of them to keep the tie-break (~275 µs a path at 256
//! SIPs). The exact latency is also the A* bound of the search that
//! remains the fallback: consistent, so the search finds what Dijkstra
//! finds, tie-break included (the argument in `PathRouter::shortest`).
//!
//! **Inside latencies are SIP 0's.** Every SIP is built by the same code
//! from the same spec: SIP `s`'s nodes are one block of graph indices in
//! SIP 0's order ([`Topology::nodes_per_sip`]), and each side's port
//! attaches to the same router of every SIP. So the latencies inside a
//! SIP are computed once, on SIP 0's block: from each side's port, and
//! to each destination node asked for. [`SipPorts::of`] checks this
//! structure link by link (every block's links are SIP 0's shifted; a
//! port has one link into its own SIP and the rest to other SIPs' ports);
//! a machine without it gets no `SipPorts`, and its searches use the SIP
//! bound alone (the same paths, found more slowly).

use super::adjacency::Adjacency;
use crate::topology::{LinkId, NodeId, Side, Topology, View};
use crate::units::Ps;
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::{Arc, Mutex};

/// No port (of a side a SIP does not have).
const NONE: u32 = u32::MAX;

/// A distance in Dijkstra's order: latency, then hops (the router's
/// searches keep, of two paths of equal latency, the one of fewer hops).
pub(crate) type Dist = (Ps, u32);

/// No path.
pub(crate) const NO_PATH: Dist = (Ps::MAX, u32::MAX);

/// `a` then `b` (saturating; no path stays no path).
pub(crate) fn plus(a: Dist, b: Dist) -> Dist {
    if a.0 == Ps::MAX || b.0 == Ps::MAX {
        NO_PATH
    } else {
        (a.0.saturating_add(b.0), a.1.saturating_add(b.1))
    }
}

/// The destination tables kept at most (bytes): a search toward one of
/// them again makes it again. At 4096 SIPs on a torus a table is 256 KiB
/// (16 K ports of 16 bytes), so ~250 destinations.
const TOWARD_CACHE_BYTES: usize = 64 << 20;

/// What every SIP's port of one side has in common.
struct SideFacts {
    /// The node of a SIP's block the port attaches to (its index in the
    /// block).
    attach: u32,
    /// The port's link to it.
    attach_latency: Ps,
    /// The least distance from the port to each node of its SIP's block,
    /// inside the SIP ([`NO_PATH`]: none).
    from_port: Box<[Dist]>,
}

/// The least distances to one destination node (see the module doc).
pub(crate) struct Toward {
    /// The destination's SIP.
    sip: u32,
    /// The least distance from each node of that SIP's block to the
    /// destination, inside the SIP (by index in the block).
    inside: Arc<[Dist]>,
    /// The least distance from each port to the destination.
    from_port: Box<[Dist]>,
}

/// The machine through its SIP ports (see the module doc). Made once per
/// router, for the device view; its destination tables are made when
/// first asked for and kept up to [`TOWARD_CACHE_BYTES`].
pub(crate) struct SipPorts {
    /// Nodes in each SIP's block.
    per_sip: usize,
    /// The first node after the blocks: ports are `blocks_end..`.
    blocks_end: usize,
    /// Each SIP's port of each side (by [`Side::ALL`]; [`NONE`]: it has
    /// none), as a port number (node index - `blocks_end`).
    port_of: Vec<[u32; 4]>,
    /// The SIP and side of each port.
    port_at: Vec<(u32, u8)>,
    sides: [Option<SideFacts>; 4],
    /// Each port's inter-SIP links: (the port at the far end, latency).
    cross: Vec<Vec<(u32, Ps)>>,
    /// Inside distances to a node, by its index in a block.
    inside: Mutex<FxHashMap<u32, Arc<[Dist]>>>,
    toward: Mutex<TowardCache>,
}

/// Destination tables by node index, the oldest dropped first past
/// [`TOWARD_CACHE_BYTES`].
#[derive(Default)]
struct TowardCache {
    tables: FxHashMap<u32, Arc<Toward>>,
    order: VecDeque<u32>,
    bytes: usize,
}

impl SipPorts {
    /// The ports of `t` in the view whose adjacency is `adj`, or `None`
    /// when the machine has fewer than two SIPs or not the structure the
    /// module doc relies on.
    pub(crate) fn of(t: &Topology, adj: &Adjacency) -> Option<SipPorts> {
        let per_sip = t.nodes_per_sip();
        let n_sips = t.spec.n_sips() as usize;
        let blocks_end = per_sip * n_sips;
        let n = t.node_count();
        if n_sips < 2 || per_sip == 0 || blocks_end > n {
            return None;
        }
        let side_slot = |s: Side| Side::ALL.iter().position(|&x| x == s).unwrap() as u8;
        let mut port_of = vec![[NONE; 4]; n_sips];
        let mut port_at = Vec::with_capacity(n - blocks_end);
        for i in blocks_end..n {
            let NodeId::SipPort { sip, side } = t.node(petgraph::graph::NodeIndex::new(i)) else {
                return None;
            };
            let k = side_slot(side);
            let slot = port_of.get_mut(sip as usize)?;
            if slot[k as usize] != NONE {
                return None;
            }
            slot[k as usize] = (i - blocks_end) as u32;
            port_at.push((sip, k));
        }
        let sip_of_node = |v: usize| {
            if v < blocks_end {
                Some((v / per_sip) as u32)
            } else {
                port_at.get(v - blocks_end).map(|&(s, _)| s)
            }
        };
        // Each port: one link into its SIP's block (at its side's router,
        // with its side's latency), the others to other SIPs' ports.
        let mut attach: [Option<(u32, Ps)>; 4] = [None; 4];
        let mut cross = vec![Vec::new(); port_at.len()];
        for (p, &(sip, k)) in port_at.iter().enumerate() {
            let mut into_sip = 0;
            for e in adj.out(blocks_end + p) {
                let to = e.to as usize;
                if to < blocks_end {
                    if to / per_sip != sip as usize {
                        return None;
                    }
                    let here = ((to % per_sip) as u32, e.latency);
                    if *attach[k as usize].get_or_insert(here) != here {
                        return None;
                    }
                    into_sip += 1;
                } else if sip_of_node(to)? != sip {
                    cross[p].push(((to - blocks_end) as u32, e.latency));
                } else {
                    return None;
                }
            }
            if into_sip != 1 {
                return None;
            }
        }
        // Every block's links are SIP 0's shifted, and none leaves its SIP
        // but to the SIP's own ports.
        let in_block = |u: usize, base: usize| {
            adj.out(u).iter().filter_map(move |e| {
                let to = e.to as usize;
                (to >= base && to < base + per_sip).then_some((to - base, e.latency))
            })
        };
        for u in 0..blocks_end {
            let sip = u / per_sip;
            for e in adj.out(u) {
                let to = e.to as usize;
                if to / per_sip != sip && sip_of_node(to)? != sip as u32 {
                    return None;
                }
            }
            if sip > 0 && !in_block(u, sip * per_sip).eq(in_block(u % per_sip, 0)) {
                return None;
            }
        }
        let sides = attach.map(|a| {
            a.map(|(at, latency)| SideFacts {
                attach: at,
                attach_latency: latency,
                from_port: inside_sip_zero(adj, per_sip, at, (latency, 1)),
            })
        });
        Some(SipPorts {
            per_sip,
            blocks_end,
            port_of,
            port_at,
            sides,
            cross,
            inside: Mutex::default(),
            toward: Mutex::default(),
        })
    }

    /// The tables toward node `b` (made now if not kept), or `None` when
    /// `b` is a port.
    pub(crate) fn toward(&self, adj: &Adjacency, b: usize) -> Option<Arc<Toward>> {
        if b >= self.blocks_end {
            return None;
        }
        if let Some(t) = self.toward.lock().unwrap().tables.get(&(b as u32)) {
            return Some(t.clone());
        }
        let sip = (b / self.per_sip) as u32;
        let local = (b % self.per_sip) as u32;
        let inside = self
            .inside
            .lock()
            .unwrap()
            .entry(local)
            .or_insert_with(|| inside_sip_zero(adj, self.per_sip, local, (0, 0)).into())
            .clone();
        let from_port = self.port_search(sip, &inside);
        let table = Arc::new(Toward {
            sip,
            inside,
            from_port,
        });
        let mut cache = self.toward.lock().unwrap();
        let bytes = table.from_port.len() * std::mem::size_of::<Dist>();
        while cache.bytes + bytes > TOWARD_CACHE_BYTES {
            let Some(old) = cache.order.pop_front() else {
                break;
            };
            if let Some(dropped) = cache.tables.remove(&old) {
                cache.bytes -= dropped.from_port.len() * std::mem::size_of::<Dist>();
            }
        }
        if cache.tables.insert(b as u32, table.clone()).is_none() {
            cache.order.push_back(b as u32);
            cache.bytes += bytes;
        }
        Some(table)
    }

    /// The least distance from each port to a destination in SIP `sip`
    /// whose inside distances are `inside`: Dijkstra over the ports, from
    /// the destination's SIP's ports.
    fn port_search(&self, sip: u32, inside: &[Dist]) -> Box<[Dist]> {
        let mut dist = vec![NO_PATH; self.port_at.len()].into_boxed_slice();
        let mut heap = BinaryHeap::new();
        for (k, &p) in self.port_of[sip as usize].iter().enumerate() {
            if let (Some(side), true) = (&self.sides[k], p != NONE) {
                let d = plus(inside[side.attach as usize], (side.attach_latency, 1));
                dist[p as usize] = d;
                heap.push(Reverse((d, p)));
            }
        }
        while let Some(Reverse((d, p))) = heap.pop() {
            if d > dist[p as usize] {
                continue;
            }
            let (s, k) = self.port_at[p as usize];
            let side = self.sides[k as usize].as_ref().expect("a port's side");
            let across = self.port_of[s as usize]
                .iter()
                .zip(&self.sides)
                .filter(|&(&q, _)| q != NONE && q != p)
                .map(|(&q, other)| {
                    let other = other.as_ref().expect("a port's side");
                    let inside = side.from_port[other.attach as usize];
                    (q, plus(inside, (other.attach_latency, 1)))
                });
            let cross = self.cross[p as usize].iter().map(|&(q, l)| (q, (l, 1)));
            for (q, w) in cross.chain(across) {
                let nd = plus(d, w);
                if nd < dist[q as usize] {
                    dist[q as usize] = nd;
                    heap.push(Reverse((nd, q)));
                }
            }
        }
        dist
    }

    /// The least latency from node `v` to `t`'s destination (`Ps::MAX`:
    /// there is no path): exact, so also the search's bound.
    pub(crate) fn latency(&self, t: &Toward, v: usize) -> Ps {
        self.distance(t, v).0
    }

    /// The least distance from node `v` to `t`'s destination
    /// ([`NO_PATH`]: there is none), exact.
    pub(crate) fn distance(&self, t: &Toward, v: usize) -> Dist {
        if v >= self.blocks_end {
            return t.from_port[v - self.blocks_end];
        }
        let (sip, local) = (v / self.per_sip, v % self.per_sip);
        let mut best = if sip == t.sip as usize {
            t.inside[local]
        } else {
            NO_PATH
        };
        for (&p, side) in self.port_of[sip].iter().zip(&self.sides) {
            if let (Some(side), true) = (side, p != NONE) {
                best = best.min(plus(side.from_port[local], t.from_port[p as usize]));
            }
        }
        best
    }
}

/// Dijkstra's path from node `a` to node `b` of `t` in `view`, without a
/// search: walking back from `b`, each node's predecessor is the one
/// Dijkstra keeps — of the links `u -> v` of the view with
/// `d(a, u) + (latency, 1) = d(a, v)`, the least by (`rank`, id). The
/// distances from `a` are the tables toward `a` (`from_a`: the graph reads
/// the same backwards). A path of `h` hops costs `h` times a node's
/// in-links' distance lookups, where a search between SIPs far apart on a
/// torus pops every node on any of its many shortest paths (~275 µs a
/// path at 256 SIPs). `None` when `b` cannot be reached or a node on the
/// way has no such predecessor (a view that does not read the same
/// backwards): the caller searches.
pub(crate) fn walk_back(
    ports: &SipPorts,
    from_a: &Toward,
    (t, view, rank): (&Topology, View, &[u8]),
    a: usize,
    b: usize,
) -> Option<Vec<LinkId>> {
    let mut v = b;
    let mut dv = ports.distance(from_a, v);
    let mut path = Vec::with_capacity(dv.1 as usize);
    while v != a {
        if dv == NO_PATH || dv.1 == 0 {
            return None;
        }
        let mut best: Option<((u8, LinkId), usize, Dist)> = None;
        let incoming = t
            .graph
            .edges_directed(NodeIndex::new(v), petgraph::Direction::Incoming);
        for e in incoming {
            let id = *e.weight();
            let link = &t.links[id as usize];
            if !view.allows(link.kind) {
                continue;
            }
            let u = e.source().index();
            let du = ports.distance(from_a, u);
            if plus(du, (link.latency, 1)) != dv {
                continue;
            }
            let key = (rank[id as usize], id);
            if best.is_none_or(|(k, _, _)| key < k) {
                best = Some((key, u, du));
            }
        }
        let ((_, id), u, du) = best?;
        path.push(id);
        (v, dv) = (u, du);
    }
    path.reverse();
    Some(path)
}

/// The least distance from node `start` of SIP 0's block (index in the
/// block), `first` after it, to each node of the block, inside the block.
/// The graph reads the same backwards ([`crate::topology::Link`]), so it
/// is also the least distance from each node to `start`.
fn inside_sip_zero(adj: &Adjacency, per_sip: usize, start: u32, first: Dist) -> Box<[Dist]> {
    let mut dist = vec![NO_PATH; per_sip].into_boxed_slice();
    let mut heap = BinaryHeap::new();
    dist[start as usize] = first;
    heap.push(Reverse((first, start)));
    while let Some(Reverse((d, u))) = heap.pop() {
        if d > dist[u as usize] {
            continue;
        }
        for e in adj.out(u as usize) {
            let v = e.to as usize;
            let nd = plus(d, (e.latency, 1));
            if v < per_sip && nd < dist[v] {
                dist[v] = nd;
                heap.push(Reverse((nd, e.to)));
            }
        }
    }
    dist
}
