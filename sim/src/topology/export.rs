//! `topology export`: the graph as Graphviz DOT or JSON.
//!
//! DOT: one cluster per SIP and per cube, one edge per physical (duplex)
//! link, coloured by kind, and a `pos` for every node (the chip's floor
//! plan: SIP grid, then cube mesh, then NoC grid), so that
//! `neato -n2 -Tsvg chip.dot` draws the chip as laid out and `dot -Tsvg`
//! draws it by hierarchy. JSON: every node and every directed link with
//! its kind and figures.

use super::{LinkKind, NodeId, Topology};
use crate::topology::naming::{cube_name, sip_name};
use crate::units::PS_PER_NS;
use std::io::{self, Write};

fn colour(k: LinkKind) -> &'static str {
    match k {
        LinkKind::Noc => "gray40",
        LinkKind::PeAttach => "darkgreen",
        LinkKind::Hbm => "purple",
        LinkKind::Sram => "orange",
        LinkKind::MCpuAttach => "brown",
        LinkKind::UcieAttach | LinkKind::SipPortAttach | LinkKind::PcieAttach => "gray70",
        LinkKind::Ucie => "blue",
        LinkKind::InterSip => "red",
        LinkKind::Pcie => "magenta",
    }
}

fn shape(n: &NodeId) -> &'static str {
    match n {
        NodeId::Router { .. } => "point",
        NodeId::Pe(_) => "box",
        NodeId::Hbm { .. } | NodeId::Sram { .. } => "cylinder",
        NodeId::MCpu { .. } | NodeId::IoCpu { .. } => "component",
        NodeId::Ucie { .. } | NodeId::SipPort { .. } | NodeId::PcieEp { .. } => "diamond",
    }
}

/// Floor-plan position in points.
fn position(t: &Topology, n: &NodeId) -> (f64, f64) {
    let s = &t.spec;
    let l = &t.layout;
    let cw = s.sip.cube_mesh.w;
    let pitch = 60.0; // between routers
    let cube_w = (l.w + 1) as f64 * pitch;
    let cube_h = (l.h + 1) as f64 * pitch;
    let sip_w = s.sip.cube_mesh.w as f64 * cube_w + 2.0 * pitch;
    let sip_h = s.sip.cube_mesh.h as f64 * cube_h + 2.0 * pitch;
    let (gw, _) = s.sip_grid();
    let sip_origin = |sip: u32| ((sip % gw) as f64 * sip_w, (sip / gw) as f64 * sip_h);
    let router_at = |sip: u32, cube: u32, (x, y): (u32, u32)| {
        let (ox, oy) = sip_origin(sip);
        (
            ox + pitch + (cube % cw) as f64 * cube_w + x as f64 * pitch,
            oy + pitch + (cube / cw) as f64 * cube_h + y as f64 * pitch,
        )
    };
    let off = |(x, y): (f64, f64), dx: f64, dy: f64| (x + dx * pitch, y + dy * pitch);
    let (x, y) = match *n {
        NodeId::Router { sip, cube, x, y } => router_at(sip, cube, (x, y)),
        NodeId::Pe(p) => {
            let k = p.pe % s.cube.pe_layout.pe_per_corner.max(1);
            off(
                router_at(p.sip, p.cube, l.pe[p.pe as usize]),
                0.3,
                0.25 + 0.15 * k as f64,
            )
        }
        NodeId::Hbm { sip, cube, stack } => {
            off(router_at(sip, cube, l.hbm[stack as usize]), -0.3, 0.3)
        }
        NodeId::Sram { sip, cube } => off(router_at(sip, cube, l.sram), -0.3, -0.3),
        NodeId::MCpu { sip, cube } => off(router_at(sip, cube, l.m_cpu), 0.3, -0.3),
        NodeId::Ucie {
            sip,
            cube,
            side,
            port,
        } => {
            let p = router_at(sip, cube, l.ucie[&side][port as usize]);
            let d = 0.45;
            match side {
                super::Side::N => off(p, 0.0, -d),
                super::Side::S => off(p, 0.0, d),
                super::Side::E => off(p, d, 0.0),
                super::Side::W => off(p, -d, 0.0),
            }
        }
        NodeId::SipPort { sip, side } => {
            let cube = super::builder::port_cube(s, side);
            let p = router_at(sip, cube, l.sip_port[&side]);
            match side {
                super::Side::N => off(p, 0.2, -0.9),
                super::Side::S => off(p, 0.2, 0.9),
                super::Side::E => off(p, 0.9, 0.2),
                super::Side::W => off(p, -0.9, 0.2),
            }
        }
        NodeId::IoCpu { sip } => off(sip_origin(sip), 0.3, 0.3),
        NodeId::PcieEp { sip, ep } => {
            let cube = s.pcie_cubes()[ep as usize];
            off(router_at(sip, cube, l.pcie), -0.45, 0.2)
        }
    };
    // Graphviz's y axis points up.
    (x, -y)
}

/// Write the graph as Graphviz DOT.
pub fn write_dot(t: &Topology, w: &mut dyn Write) -> io::Result<()> {
    writeln!(
        w,
        "// kernbench topology: {} nodes, {} physical links",
        t.node_count(),
        t.links.len() / 2
    )?;
    writeln!(
        w,
        "// render: neato -n2 -Tsvg this.dot > chip.svg   (floor plan)"
    )?;
    writeln!(
        w,
        "//     or: dot -Tsvg this.dot > chip.svg          (hierarchy)"
    )?;
    writeln!(w, "graph kernbench {{")?;
    writeln!(w, "  node [fontsize=8, width=0.2, height=0.15];")?;
    writeln!(w, "  edge [penwidth=1.2];")?;
    let node_line = |w: &mut dyn Write, n: &NodeId, indent: &str| -> io::Result<()> {
        let (x, y) = position(t, n);
        writeln!(
            w,
            "{indent}\"{n}\" [shape={}, pos=\"{x:.1},{y:.1}\", tooltip=\"{n}\"];",
            shape(n)
        )
    };
    let s = &t.spec;
    let mut by_cube: std::collections::BTreeMap<(u32, Option<u32>), Vec<NodeId>> =
        Default::default();
    for n in t.graph.node_weights() {
        by_cube
            .entry((n.sip(), n.cube_part().map(|(c, _)| c)))
            .or_default()
            .push(*n);
    }
    for sip in 0..s.n_sips() {
        writeln!(w, "  subgraph \"cluster_{}\" {{", sip_name(sip))?;
        writeln!(w, "    label=\"{}\";", sip_name(sip))?;
        for n in by_cube.get(&(sip, None)).into_iter().flatten() {
            node_line(w, n, "    ")?;
        }
        for cube in 0..s.cubes_per_sip() {
            let name = cube_name(sip, cube);
            writeln!(w, "    subgraph \"cluster_{name}\" {{")?;
            writeln!(w, "      label=\"{name}\";")?;
            for n in by_cube.get(&(sip, Some(cube))).into_iter().flatten() {
                node_line(w, n, "      ")?;
            }
            writeln!(w, "    }}")?;
        }
        writeln!(w, "  }}")?;
    }
    // Links come in pairs (a→b, b→a): one undirected edge per pair.
    for l in t.links.iter().step_by(2) {
        let (from, to) = t.ends(l);
        writeln!(
            w,
            "  \"{}\" -- \"{}\" [color={}, tooltip=\"{} {:.0} GB/s {:.3} ns\"];",
            from,
            to,
            colour(l.kind),
            l.kind.name(),
            l.rate.giga_per_s(),
            l.latency as f64 / PS_PER_NS as f64
        )?;
    }
    writeln!(w, "}}")
}

#[derive(serde::Serialize)]
struct JsonNode {
    name: String,
    kind: &'static str,
}

#[derive(serde::Serialize)]
struct JsonLink {
    id: u32,
    from: String,
    to: String,
    kind: &'static str,
    bandwidth_gbps: f64,
    latency_ns: f64,
}

#[derive(serde::Serialize)]
struct JsonGraph {
    format: &'static str,
    summary: super::summary::Summary,
    views: Vec<serde_json::Value>,
    nodes: Vec<JsonNode>,
    links: Vec<JsonLink>,
}

/// Write the graph as JSON: `{format, summary, views, nodes, links}`.
pub fn write_json(t: &Topology, w: &mut dyn Write) -> io::Result<()> {
    let g = JsonGraph {
        format: "kernbench-topology/1",
        summary: super::summary::summarize(t),
        views: super::View::ALL
            .iter()
            .map(|v| {
                serde_json::json!({
                    "name": v.name(),
                    "excludes": v.excluded().iter().map(|k| k.name()).collect::<Vec<_>>(),
                })
            })
            .collect(),
        nodes: t
            .graph
            .node_weights()
            .map(|n| JsonNode {
                name: n.to_string(),
                kind: n.kind(),
            })
            .collect(),
        links: t
            .links
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let (from, to) = t.ends(l);
                JsonLink {
                    id: i as u32,
                    from: from.to_string(),
                    to: to.to_string(),
                    kind: l.kind.name(),
                    bandwidth_gbps: l.rate.giga_per_s(),
                    latency_ns: l.latency as f64 / PS_PER_NS as f64,
                }
            })
            .collect(),
    };
    serde_json::to_writer(&mut *w, &g)?;
    writeln!(w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TopologySpec;
    use crate::topology::build;

    #[test]
    fn dot_and_json_list_every_node_and_link() {
        let mut spec = TopologySpec::default_embedded();
        spec.system.sips.count = 2;
        let t = build(&spec).unwrap();
        let mut dot = Vec::new();
        write_dot(&t, &mut dot).unwrap();
        let dot = String::from_utf8(dot).unwrap();
        assert!(dot.starts_with("// kernbench topology"));
        assert!(dot.contains("subgraph \"cluster_sip1.cube15\""));
        assert_eq!(dot.matches(" -- ").count(), t.links.len() / 2);
        assert_eq!(dot.matches("pos=").count(), t.node_count());
        assert!(dot.contains("\"sip0.port_E\" -- \"sip1.port_W\" [color=red"));
        let mut js = Vec::new();
        write_json(&t, &mut js).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&js).unwrap();
        assert_eq!(v["nodes"].as_array().unwrap().len(), t.node_count());
        assert_eq!(v["links"].as_array().unwrap().len(), t.links.len());
        assert_eq!(v["views"][1]["name"], "noc");
    }
}
