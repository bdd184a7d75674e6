//! The compile pipeline, spec to graph, in six explicit stages:
//!
//! 1. **parse** — YAML to [`TopologySpec`] (unknown keys are errors);
//! 2. **validate** — semantic checks naming the key ([`TopologySpec::validate`]);
//! 3. **cube NoC layout** — router grid, HBM exclusion zone, attachment
//!    routers ([`super::layout`], cached in `cube_mesh.yaml`);
//! 4. **attach components** — per SIP: every cube's routers and NoC links,
//!    its PEs, HBM stacks, SRAM and M_CPU, and the SIP's IO_CPU and PCIe
//!    endpoints;
//! 5. **stitch cubes** — UCIe ports on the N/S/E/W edges of neighbouring
//!    cubes, port `j` to port `j`;
//! 6. **stitch SIPs** — SIP ports and inter-SIP links in the
//!    `system.sips.topology` shape.
//!
//! A SIP's inter-SIP port on side D hangs off the cube at that edge of its
//! cube mesh (E: the north-east cube, W and N: the north-west cube, S: the
//! south-west cube), at the router the layout gives for side D.
//! Nodes and links are added in a fixed order (SIP, cube, row, column), so
//! ids, and with them routing tie-breaks, are deterministic. Stages 4 and 5
//! run for SIP 0 only: every later SIP is the same block of nodes and links
//! with its own SIP number, so it is copied from SIP 0's (a 1024-SIP build
//! 251.6 M -> 105.5 M instructions, 55 -> 36 ms), in the order the stages
//! would have added it.

use super::layout::{self, CubeLayout, Pos};
use super::node_index::{NodeIndexMap, Placed};
use super::{CubePart, Link, LinkId, LinkKind, NodeId, Side, Topology};
use crate::config::topology::{LinkSpec, SipTopology};
use crate::config::{Origin, TopologySpec};
use crate::error::ConfigError;
use petgraph::graph::{DiGraph, NodeIndex};
use std::path::PathBuf;

/// Where stage 3 keeps its layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutCache {
    /// Compute the layout, write nothing.
    Off,
    /// Reuse or (re)write this `cube_mesh.yaml`.
    File(PathBuf),
}

#[derive(Default)]
struct Builder {
    graph: DiGraph<NodeId, LinkId>,
    links: Vec<Link>,
    index: NodeIndexMap,
}

impl Builder {
    /// `n`'s index, the node added if new (one lookup in a table of one
    /// SIP's nodes either way, see [`NodeIndexMap`]).
    fn node(&mut self, n: NodeId) -> NodeIndex {
        match self.index.place(&n, self.graph.node_count()) {
            Placed::At(i) => i,
            Placed::New => {
                let i = self.graph.add_node(n);
                self.index.insert(n, i);
                i
            }
        }
    }

    /// Links both ways between `a` and `b`, each node looked up once (the
    /// node index's lookups were about half of a 4096-SIP build).
    fn duplex(&mut self, a: NodeId, b: NodeId, kind: LinkKind, spec: LinkSpec) {
        let (ai, bi) = (self.node(a), self.node(b));
        self.duplex_at(ai, bi, kind, spec);
    }

    /// [`Builder::duplex`] between nodes already added.
    fn duplex_at(&mut self, ai: NodeIndex, bi: NodeIndex, kind: LinkKind, spec: LinkSpec) {
        for (fi, ti) in [(ai, bi), (bi, ai)] {
            let id = self.links.len() as LinkId;
            self.links.push(Link {
                kind,
                from: fi,
                to: ti,
                rate: spec.rate(),
                latency: spec.latency_ps(),
            });
            self.graph.add_edge(fi, ti, id);
        }
    }

    /// Whether SIP 0's block (everything built so far) is closed: its
    /// nodes all of SIP 0 and its links all between them. Then SIP `s` is
    /// the same block with `s` for the SIP and its node ids shifted by
    /// `s` blocks, and [`Builder::copy_sip_zero`] may make it.
    fn sip_zero_is_closed(&self) -> bool {
        let nodes = self.graph.node_count();
        self.graph.node_weights().all(|n| n.sip() == 0)
            && self
                .links
                .iter()
                .all(|l| l.from.index() < nodes && l.to.index() < nodes)
    }

    /// SIP `sip`'s block as a copy of SIP 0's (closed, of `nodes` nodes
    /// and `links` links; every SIP before `sip` built): its nodes and
    /// links in SIP 0's order, so ids and every node's list of edges are
    /// those stages 4 and 5 would give, without their name lookups and
    /// layout walks (what is left is petgraph's `add_node` / `add_edge`).
    fn copy_sip_zero(&mut self, sip: u32, (nodes, links): (usize, usize)) {
        let shift = sip as usize * nodes;
        debug_assert_eq!(self.graph.node_count(), shift, "SIPs copied in order");
        for i in 0..nodes {
            let n = self.graph[NodeIndex::new(i)].with_sip(sip);
            self.graph.add_node(n);
        }
        for id in 0..links {
            let l = self.links[id].clone();
            let (from, to) = (
                NodeIndex::new(l.from.index() + shift),
                NodeIndex::new(l.to.index() + shift),
            );
            let copy = self.links.len() as LinkId;
            self.links.push(Link { from, to, ..l });
            self.graph.add_edge(from, to, copy);
        }
    }

    /// Room for `sips` more SIPs of the size of those built so far, and for
    /// `sip_links` inter-SIP links (each adds at most two port nodes and
    /// six links): the tables grow once, after the first SIP, instead of
    /// doubling as they fill (each doubling of the node index rehashed
    /// every node into fresh memory: a 1024-SIP build made 24.8 K page
    /// faults before, 21.6 K now).
    fn reserve_for(&mut self, sips: usize, sip_links: usize) {
        let nodes = self.graph.node_count() * sips + 2 * sip_links;
        let links = self.links.len() * sips + 6 * sip_links;
        self.graph.reserve_nodes(nodes);
        self.graph.reserve_edges(links);
        self.links.reserve_exact(links);
        self.index.reserve_rest(2 * sip_links);
    }
}

/// The routers of the cube being built, by grid position, as they are
/// added: a NoC link's or an attachment's router is found here, not by a
/// lookup in the machine-wide node index (a cache miss each once the
/// index outgrows the cache). Routers are added in the same order as
/// through the index, so node ids are too.
struct CubeRouters {
    sip: u32,
    cube: u32,
    w: u32,
    index: Vec<Option<NodeIndex>>,
}

impl CubeRouters {
    fn new(l: &CubeLayout) -> Self {
        CubeRouters {
            sip: 0,
            cube: 0,
            w: l.w,
            index: vec![None; (l.w * l.h) as usize],
        }
    }

    /// Start on cube `cube` of SIP `sip` (none of its routers added yet).
    fn start(&mut self, sip: u32, cube: u32) {
        (self.sip, self.cube) = (sip, cube);
        self.index.fill(None);
    }

    /// The router at `p` (a position of the layout), added if new.
    fn at(&mut self, b: &mut Builder, p: Pos) -> NodeIndex {
        let slot = &mut self.index[(p.1 * self.w + p.0) as usize];
        *slot.get_or_insert_with(|| b.node(router(self.sip, self.cube, p)))
    }
}

fn router(sip: u32, cube: u32, (x, y): Pos) -> NodeId {
    NodeId::Router { sip, cube, x, y }
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

/// Stage 4: the cubes of SIP `sip` (routers, NoC links, PEs, HBM stacks,
/// SRAM, M_CPU) and the SIP's IO_CPU and PCIe endpoints.
fn attach_components(b: &mut Builder, spec: &TopologySpec, l: &CubeLayout, sip: u32) {
    let noc = spec.cube.noc.link();
    let mut routers = CubeRouters::new(l);
    for cube in 0..spec.cubes_per_sip() {
        routers.start(sip, cube);
        for (x, y) in l.routers() {
            let here = routers.at(b, (x, y));
            for next in [(x + 1, y), (x, y + 1)] {
                if l.has_router(next) {
                    let there = routers.at(b, next);
                    b.duplex_at(here, there, LinkKind::Noc, noc);
                }
            }
        }
        for (part, at) in l.attachments() {
            let (kind, figs) = match part {
                CubePart::Pe(_) => (LinkKind::PeAttach, spec.pe.attach),
                CubePart::Hbm(_) => (LinkKind::Hbm, spec.cube.hbm.link()),
                CubePart::Sram => (LinkKind::Sram, spec.cube.sram.link()),
                CubePart::MCpu => (LinkKind::MCpuAttach, spec.cube.m_cpu.link()),
                // UCIe ports exist only where a neighbour is: stage 5.
                CubePart::Ucie { .. } | CubePart::Router { .. } => continue,
            };
            let part = b.node(NodeId::in_cube(sip, cube, part));
            let at = routers.at(b, at);
            b.duplex_at(part, at, kind, figs);
        }
    }
    let pcie = &spec.sip.pcie;
    if pcie.endpoints > 0 {
        let io = NodeId::IoCpu { sip };
        b.node(io);
        for (ep, cube) in spec.pcie_cubes().into_iter().enumerate() {
            let node = NodeId::PcieEp { sip, ep: ep as u32 };
            b.duplex(node, router(sip, cube, l.pcie), LinkKind::PcieAttach, noc);
            b.duplex(node, io, LinkKind::Pcie, pcie.link());
        }
    }
}

/// Stage 5: UCIe ports and links between neighbouring cubes of SIP `sip`
/// (east and south neighbours; port `j` faces port `j`).
fn stitch_cubes(b: &mut Builder, spec: &TopologySpec, l: &CubeLayout, sip: u32) {
    let (cw, ch) = (spec.sip.cube_mesh.w, spec.sip.cube_mesh.h);
    let noc = spec.cube.noc.link();
    let ucie = spec.sip.ucie_link.link();
    let port = |b: &mut Builder, cube: u32, side: Side, j: u32| {
        let n = NodeId::Ucie {
            sip,
            cube,
            side,
            port: j,
        };
        let at = l.ucie[&side][j as usize];
        b.duplex(router(sip, cube, at), n, LinkKind::UcieAttach, noc);
        n
    };
    for cube in 0..spec.cubes_per_sip() {
        let (cx, cy) = (cube % cw, cube / cw);
        let mut pairs = Vec::new();
        if cx + 1 < cw {
            pairs.push((Side::E, cube + 1));
        }
        if cy + 1 < ch {
            pairs.push((Side::S, cube + cw));
        }
        for (side, other) in pairs {
            for j in 0..spec.sip.ucie_link.ports_per_edge {
                let a = port(b, cube, side, j);
                let z = port(b, other, side.opposite(), j);
                b.duplex(a, z, LinkKind::Ucie, ucie);
            }
        }
    }
}

/// `overrides.links` must name SIPs an inter-SIP link joins.
fn check_link_overrides(spec: &TopologySpec) -> Result<(), String> {
    let links = sip_links(spec);
    for (i, o) in spec.overrides.links.iter().enumerate() {
        let (a, b) = (o.between[0], o.between[1]);
        if !links
            .iter()
            .any(|&(s, _, p)| (s, p) == (a, b) || (s, p) == (b, a))
        {
            let mut near: Vec<u32> = links
                .iter()
                .filter_map(|&(s, _, p)| (s == a).then_some(p).or_else(|| (p == a).then_some(s)))
                .collect();
            near.sort_unstable();
            near.dedup();
            return Err(format!(
                "overrides.links[{i}].between: no inter-SIP link joins SIP {a} and SIP {b} on this \
                 {} of {} SIPs (SIP {a}'s neighbours: {near:?})",
                spec.system.sips.topology.name(),
                spec.n_sips()
            ));
        }
    }
    Ok(())
}

/// `overrides.sips[].hbm_bandwidth_gbps`: those SIPs' HBM stack links
/// (every SIP's block is SIP 0's size, so a node's SIP is its index over
/// the block size).
fn override_hbm(b: &mut Builder, spec: &TopologySpec) {
    if spec
        .overrides
        .sips
        .iter()
        .all(|o| o.hbm_bandwidth_gbps.is_none())
    {
        return;
    }
    let per_sip = b.index.per_sip().max(1) as usize;
    for l in b.links.iter_mut().filter(|l| l.kind == LinkKind::Hbm) {
        let sip = (l.from.index() / per_sip) as u32;
        if let Some(g) = spec.overrides.sip(sip).and_then(|o| o.hbm_bandwidth_gbps) {
            l.rate = crate::units::Rate::from_giga_per_s(g);
        }
    }
}

/// Stage 6: SIP ports and the inter-SIP links (`overrides.links`: other
/// figures, or not built when down).
fn stitch_sips(b: &mut Builder, spec: &TopologySpec, l: &CubeLayout) {
    let noc = spec.cube.noc.link();
    for (a, side, peer) in sip_links(spec) {
        let mut link = spec.system.inter_sip_link;
        if let Some(o) = spec.overrides.link(a, peer) {
            if o.down {
                continue;
            }
            link.bandwidth_gbps = o.bandwidth_gbps.unwrap_or(link.bandwidth_gbps);
            link.latency_ns = o.latency_ns.unwrap_or(link.latency_ns);
        }
        for (s, d) in [(a, side), (peer, side.opposite())] {
            let port = NodeId::SipPort { sip: s, side: d };
            if b.index.get(&port).is_none() {
                let at = router(s, port_cube(spec, d), l.sip_port[&d]);
                b.duplex(at, port, LinkKind::SipPortAttach, noc);
            }
        }
        b.duplex(
            NodeId::SipPort { sip: a, side },
            NodeId::SipPort {
                sip: peer,
                side: side.opposite(),
            },
            LinkKind::InterSip,
            link,
        );
    }
}

/// Stages 1–6 from YAML text.
pub fn compile(text: &str, origin: Origin, cache: &LayoutCache) -> Result<Topology, ConfigError> {
    let spec = TopologySpec::parse(text, &origin)?;
    build_with(spec, &origin, cache)
}

/// Stages 2–6 from a spec (validated again: a spec edited in code is
/// checked like a file).
pub fn build_with(
    spec: TopologySpec,
    origin: &Origin,
    cache: &LayoutCache,
) -> Result<Topology, ConfigError> {
    spec.validate().map_err(|message| ConfigError::Invalid {
        origin: origin.clone(),
        message,
    })?;
    check_link_overrides(&spec).map_err(|message| ConfigError::Invalid {
        origin: origin.clone(),
        message,
    })?;
    let path = match cache {
        LayoutCache::Off => None,
        LayoutCache::File(p) => Some(p.as_path()),
    };
    let (layout, layout_source) = layout::load_or_generate(&spec, origin, path)?;
    let mut b = build_sips(&spec, &layout, LaterSips::Copied);
    override_hbm(&mut b, &spec);
    Ok(Topology {
        spec,
        layout,
        layout_source,
        graph: b.graph,
        links: b.links,
        index: b.index,
    })
}

/// How [`build_sips`] makes the SIPs after the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LaterSips {
    /// Each by stages 4 and 5, as SIP 0 (what a copy must equal).
    #[cfg(test)]
    Rebuilt,
    /// As copies of SIP 0's block (see [`Builder::copy_sip_zero`]).
    Copied,
}

/// Stages 4–6 for every SIP of `spec`.
fn build_sips(spec: &TopologySpec, layout: &CubeLayout, later: LaterSips) -> Builder {
    let mut b = Builder::default();
    let mut sip_zero = None;
    for sip in 0..spec.n_sips() {
        b.index.begin_sip(sip, b.graph.node_count());
        match sip_zero {
            Some(block) if later == LaterSips::Copied => b.copy_sip_zero(sip, block),
            _ => {
                attach_components(&mut b, spec, layout, sip);
                stitch_cubes(&mut b, spec, layout, sip);
            }
        }
        b.index.end_sip(sip, b.graph.node_count());
        if sip == 0 {
            let more = spec.n_sips() as usize - 1;
            b.reserve_for(more, sip_links(spec).len());
            sip_zero = b
                .sip_zero_is_closed()
                .then_some((b.graph.node_count(), b.links.len()));
        }
    }
    stitch_sips(&mut b, spec, layout);
    b
}

/// Stages 2–6 without a layout cache.
pub fn build(spec: &TopologySpec) -> Result<Topology, ConfigError> {
    build_with(
        spec.clone(),
        &Origin::Embedded("topology spec"),
        &LayoutCache::Off,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DEFAULT_TOPOLOGY_YAML;
    use rustc_hash::FxHashMap;

    fn spec(edits: &[(&str, &str)]) -> TopologySpec {
        crate::config::edited_default_topology(edits)
    }

    fn kinds(b: &Builder) -> FxHashMap<LinkKind, usize> {
        let mut m = FxHashMap::default();
        for l in &b.links {
            *m.entry(l.kind).or_insert(0) += 1;
        }
        m
    }

    #[test]
    fn stage4_attaches_every_component_of_every_cube() {
        let s = spec(&[("endpoints: 1", "endpoints: 2")]);
        let l = layout::generate(&s).unwrap();
        let mut b = Builder::default();
        attach_components(&mut b, &s, &l, 0);
        let k = kinds(&b);
        // 16 cubes x 24 NoC links (4x4 grid) x 2 directions
        assert_eq!(k[&LinkKind::Noc], 16 * 24 * 2);
        assert_eq!(k[&LinkKind::PeAttach], 16 * 4 * 2);
        assert_eq!(k[&LinkKind::Hbm], 16 * 2);
        assert_eq!(k[&LinkKind::MCpuAttach], 16 * 2);
        assert_eq!(k[&LinkKind::Pcie], 2 * 2);
        assert!(!k.contains_key(&LinkKind::Ucie));
        // endpoint 1 of 2 sits on cube 16/2 = 8
        assert!(b.index.get(&"sip0.pcie1".parse().unwrap()).is_some());
        let ep1 = b
            .links
            .iter()
            .find(|l| b.graph[l.from].to_string() == "sip0.pcie1")
            .unwrap();
        assert_eq!(b.graph[ep1.to].to_string(), "sip0.cube8.r0_2");
    }

    #[test]
    fn stage5_stitches_neighbouring_cubes_port_to_port() {
        let s = spec(&[
            ("w: 4\n    h: 4\n  ucie", "w: 2\n    h: 3\n  ucie"),
            ("ports_per_edge: 1", "ports_per_edge: 2"),
        ]);
        let l = layout::generate(&s).unwrap();
        let mut b = Builder::default();
        stitch_cubes(&mut b, &s, &l, 0);
        // 2x3 cube mesh: 3 E-W + 4 N-S neighbour pairs, 2 ports each
        assert_eq!(kinds(&b)[&LinkKind::Ucie], (3 + 4) * 2 * 2);
        let ucie: Vec<String> = b
            .links
            .iter()
            .filter(|l| l.kind == LinkKind::Ucie)
            .map(|l| format!("{}>{}", b.graph[l.from], b.graph[l.to]))
            .collect();
        assert!(ucie.contains(&"sip0.cube0.ucie_E1>sip0.cube1.ucie_W1".to_string()));
        assert!(ucie.contains(&"sip0.cube3.ucie_S0>sip0.cube5.ucie_N0".to_string()));
        assert!(b
            .index
            .get(&"sip0.cube0.ucie_W0".parse().unwrap())
            .is_none());
    }

    #[test]
    fn stage6_stitches_sips_in_each_shape() {
        let count = |topo: &str, n: u32, extra: &str| {
            let s = spec(&[
                ("count: 4", &format!("count: {n}{extra}")),
                ("topology: ring_1d ", &format!("topology: {topo} ")),
            ]);
            let l = layout::generate(&s).unwrap();
            let mut b = Builder::default();
            stitch_sips(&mut b, &s, &l);
            kinds(&b).get(&LinkKind::InterSip).copied().unwrap_or(0) / 2
        };
        assert_eq!(count("ring_1d", 1, ""), 0);
        assert_eq!(count("ring_1d", 2, ""), 2);
        assert_eq!(count("ring_1d", 8, ""), 8);
        assert_eq!(count("torus_2d", 16, ""), 32);
        assert_eq!(count("mesh_2d_no_wrap", 16, ""), 24);
        assert_eq!(count("mesh_2d_no_wrap", 8, "\n    w: 4"), 10);
        assert_eq!(count("torus_2d", 2, "\n    w: 2"), 2);
    }

    #[test]
    fn full_pipeline_default_counts() {
        let t = build(&TopologySpec::default_embedded()).unwrap();
        assert_eq!(t.pes().count(), 4 * 16 * 4);
        let inter = t
            .links
            .iter()
            .filter(|l| l.kind == LinkKind::InterSip)
            .count();
        assert_eq!(inter, 2 * 4, "4 duplex ring links");
        for n in [
            "sip3.port_E",
            "sip0.port_W",
            "sip2.io_cpu",
            "sip2.pcie0",
            "sip1.cube5.m_cpu",
        ] {
            assert!(t.node_index(&n.parse().unwrap()).is_some(), "{n}");
        }
        assert_eq!(t.layout_source, layout::LayoutSource::Computed);
    }

    /// Every node's name and every link's ends and kind, in id order.
    fn id_digest(t: &Topology) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        for i in 0..t.node_count() {
            writeln!(s, "{}", t.node(NodeIndex::new(i))).unwrap();
        }
        for l in &t.links {
            writeln!(s, "{} {} {:?}", l.from.index(), l.to.index(), l.kind).unwrap();
        }
        crate::digest::sha256_hex(s.as_bytes())
    }

    #[test]
    fn node_and_link_ids_keep_their_fixed_order() {
        // Ids set the routing tie-breaks: a faster build must number
        // nodes and links as before. These digests are the same with the
        // build before its tables were presized and its routers found
        // per cube.
        let torus = spec(&[
            ("count: 4", "count: 9"),
            ("topology: ring_1d ", "topology: torus_2d "),
            ("ports_per_edge: 1", "ports_per_edge: 2"),
            ("endpoints: 1", "endpoints: 2"),
        ]);
        for (s, want) in [
            (
                spec(&[]),
                "2e83b637f7a8f42a65e8a900848a5bc3170f050ed69e3e926b04f703792ce85d",
            ),
            (
                torus,
                "be5da3d2a62c2a13ad6d2c402606101507e4c964b6bb2cac3765f5b7499195ae",
            ),
        ] {
            assert_eq!(id_digest(&build(&s).unwrap()), want);
        }
    }

    /// Every node, link and edge list of `b`, in id order: a node's
    /// first edge each way, and each edge's ends, weight and next edge
    /// each way (the order in which routing meets a node's links).
    fn structure(b: &Builder) -> Vec<String> {
        use petgraph::Direction::{Incoming, Outgoing};
        let nodes = b.graph.raw_nodes().iter().map(|n| {
            let (o, i) = (n.next_edge(Outgoing), n.next_edge(Incoming));
            format!("{} {} {}", n.weight, o.index(), i.index())
        });
        let edges = b.graph.raw_edges().iter().map(|e| {
            let (o, i) = (e.next_edge(Outgoing), e.next_edge(Incoming));
            let (f, t) = (e.source().index(), e.target().index());
            format!("{f}>{t} {} {} {}", e.weight, o.index(), i.index())
        });
        let links = b.links.iter().map(|l| format!("{l:?}"));
        nodes.chain(edges).chain(links).collect()
    }

    #[test]
    fn sips_copied_from_sip_zero_are_the_sips_the_stages_build() {
        let mesh = spec(&[
            ("count: 4", "count: 6\n    w: 3"),
            ("topology: ring_1d ", "topology: mesh_2d_no_wrap "),
            ("w: 4\n    h: 4\n  ucie", "w: 2\n    h: 3\n  ucie"),
            ("ports_per_edge: 1", "ports_per_edge: 2"),
            ("endpoints: 1", "endpoints: 3"),
        ]);
        let one = spec(&[("count: 4", "count: 1")]);
        for s in [spec(&[]), mesh, one] {
            let l = layout::generate(&s).unwrap();
            // SIP 0 alone is closed, so the later SIPs are copies.
            let mut zero = Builder::default();
            attach_components(&mut zero, &s, &l, 0);
            stitch_cubes(&mut zero, &s, &l, 0);
            assert!(zero.sip_zero_is_closed());
            let copied = build_sips(&s, &l, LaterSips::Copied);
            let rebuilt = build_sips(&s, &l, LaterSips::Rebuilt);
            let (c, r) = (structure(&copied), structure(&rebuilt));
            assert_eq!(c.len(), r.len(), "{} SIPs", s.n_sips());
            for (i, (c, r)) in c.iter().zip(&r).enumerate() {
                assert_eq!(c, r, "entry {i} of {} SIPs", s.n_sips());
            }
            for i in 0..copied.graph.node_count() {
                let n = copied.graph[NodeIndex::new(i)];
                assert_eq!(copied.index.get(&n), Some(NodeIndex::new(i)), "{n}");
            }
        }
    }

    #[test]
    fn compile_reports_the_bad_key_and_the_file() {
        let text = DEFAULT_TOPOLOGY_YAML.replace("hop_latency_ns: 1", "hop_latency_ns: -1");
        let e = compile(&text, Origin::File("my.yaml".into()), &LayoutCache::Off)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("my.yaml") && e.contains("cube.noc.hop_latency_ns"),
            "{e}"
        );
    }
}
