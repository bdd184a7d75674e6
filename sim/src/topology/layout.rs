//! Pipeline stage 3: the cube NoC auto-layout, and its on-disk cache
//! `cube_mesh.yaml`.
//!
//! A cube's NoC is a `w × h` grid of router positions (column `x` from
//! the west edge, row `y` from the north edge). The layout decides which
//! positions hold routers and which router every cube component hangs off:
//!
//! - **HBM exclusion zone**: positions inside `cube.hbm.exclusion_zone`
//!   hold no router (the stacks sit there). What is left must stay
//!   connected.
//! - **Nearest router**: every component has a target position and
//!   attaches to the present router nearest to it (Manhattan distance;
//!   ties go to the smaller row `y`, then the smaller column `x`).
//! - Targets: PEs at their corner (`nw` = (0,0), `ne` = (w−1,0), `sw` =
//!   (0,h−1), `se` = (w−1,h−1)); M_CPU at the centre (w/2, h/2); SRAM at
//!   the middle of the south edge (w/2, h−1); a PCIe endpoint at the
//!   middle of the west edge (0, h/2); the SIP port of side D at the
//!   middle of edge D. HBM stack `i` of `k`: without a zone on the north
//!   edge at x = (2i+1)·w/(2k); with a zone at the centre of the zone's
//!   `i`-th slice along its longer axis.
//! - **UCIe**: `ports_per_edge = k` ports per edge, port `j` at
//!   (2j+1)·L/(2k) along the edge (L = w for N/S, h for E/W).
//!
//! All divisions round down. The layout depends on exactly five inputs
//! ([`LayoutInputs`]): `cube.noc.w`, `cube.noc.h`, `cube.pe_layout`, the
//! HBM placement (`cube.hbm.stacks` and `exclusion_zone`) and
//! `sip.ucie_link.ports_per_edge`. Their SHA-256 is the cache's
//! `source_hash`: a cache whose hash matches is reused (a hand edit of
//! its attachments is honoured, after checking), any other is regenerated.

use super::naming::{CubePart, Side};
use crate::config::topology::{Corner, GridSpec, PeLayoutSpec, Rect};
use crate::config::{Origin, TopologySpec};
use crate::error::ConfigError;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A router grid position `(x, y)`.
pub type Pos = (u32, u32);

/// Version of the layout rules; part of the hash, so a rule change
/// invalidates every cache.
const GENERATOR: &str = "kernbench cube layout v1";

/// The five spec fields the layout depends on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayoutInputs {
    pub noc_w: u32,
    pub noc_h: u32,
    pub pe_layout: PeLayoutSpec,
    pub hbm: HbmPlacement,
    pub ucie_ports_per_edge: u32,
}

/// The HBM fields that move routers or attachments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HbmPlacement {
    pub stacks: u32,
    pub exclusion_zone: Option<Rect>,
}

impl LayoutInputs {
    pub fn of(spec: &TopologySpec) -> Self {
        LayoutInputs {
            noc_w: spec.cube.noc.w,
            noc_h: spec.cube.noc.h,
            pe_layout: spec.cube.pe_layout.clone(),
            hbm: HbmPlacement {
                stacks: spec.cube.hbm.stacks,
                exclusion_zone: spec.cube.hbm.exclusion_zone,
            },
            ucie_ports_per_edge: spec.sip.ucie_link.ports_per_edge,
        }
    }

    /// `sha256:<hex>` over the generator version and the inputs.
    pub fn source_hash(&self) -> String {
        let canonical = serde_json::to_string(self).expect("inputs serialise");
        let mut h = Sha256::new();
        h.update(GENERATOR.as_bytes());
        h.update([0]);
        h.update(canonical.as_bytes());
        let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        format!("sha256:{hex}")
    }
}

/// Where every component of a cube attaches; identical for all cubes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CubeLayout {
    pub w: u32,
    pub h: u32,
    pub exclusion_zone: Option<Rect>,
    /// Router of each PE (index = PE number in the cube).
    pub pe: Vec<Pos>,
    /// Router of each HBM stack.
    pub hbm: Vec<Pos>,
    pub sram: Pos,
    pub m_cpu: Pos,
    /// Router a PCIe endpoint on this cube hangs off.
    pub pcie: Pos,
    /// Router of the SIP port of each side (used on the cube that carries
    /// that port).
    pub sip_port: BTreeMap<Side, Pos>,
    /// Routers of the UCIe ports of each side, by port number.
    pub ucie: BTreeMap<Side, Vec<Pos>>,
}

impl CubeLayout {
    pub fn has_router(&self, (x, y): Pos) -> bool {
        x < self.w && y < self.h && !self.exclusion_zone.is_some_and(|z| z.contains(x, y))
    }

    /// Present routers in row-major order.
    pub fn routers(&self) -> impl Iterator<Item = Pos> + '_ {
        (0..self.h)
            .flat_map(move |y| (0..self.w).map(move |x| (x, y)))
            .filter(|&p| self.has_router(p))
    }

    /// Every attached component with its router (the cache's `attach`).
    pub fn attachments(&self) -> Vec<(CubePart, Pos)> {
        let mut v: Vec<(CubePart, Pos)> = Vec::new();
        v.extend(
            self.pe
                .iter()
                .enumerate()
                .map(|(i, &p)| (CubePart::Pe(i as u32), p)),
        );
        v.extend(
            self.hbm
                .iter()
                .enumerate()
                .map(|(i, &p)| (CubePart::Hbm(i as u32), p)),
        );
        v.push((CubePart::Sram, self.sram));
        v.push((CubePart::MCpu, self.m_cpu));
        for (&side, ports) in &self.ucie {
            v.extend(ports.iter().enumerate().map(|(j, &p)| {
                (
                    CubePart::Ucie {
                        side,
                        port: j as u32,
                    },
                    p,
                )
            }));
        }
        v
    }
}

/// Stage 3: compute the layout from the spec (no cache).
pub fn generate(spec: &TopologySpec) -> Result<CubeLayout, String> {
    let inp = LayoutInputs::of(spec);
    let (w, h) = (inp.noc_w, inp.noc_h);
    let zone = inp.hbm.exclusion_zone;
    let mut layout = CubeLayout {
        w,
        h,
        exclusion_zone: zone,
        pe: Vec::new(),
        hbm: Vec::new(),
        sram: (0, 0),
        m_cpu: (0, 0),
        pcie: (0, 0),
        sip_port: BTreeMap::new(),
        ucie: BTreeMap::new(),
    };
    check_connected(&layout)?;
    let near = |t: Pos| nearest_router(&layout, t);
    let mut pe = Vec::new();
    for &c in &inp.pe_layout.corners {
        let target = match c {
            Corner::Nw => (0, 0),
            Corner::Ne => (w - 1, 0),
            Corner::Sw => (0, h - 1),
            Corner::Se => (w - 1, h - 1),
        };
        let r = near(target);
        pe.extend((0..inp.pe_layout.pe_per_corner).map(|_| r));
    }
    let k = inp.hbm.stacks;
    let hbm = (0..k)
        .map(|i| match zone {
            None => near(((2 * i + 1) * w / (2 * k), 0)),
            Some(z) if z.w >= z.h => near((z.x + (2 * i + 1) * z.w / (2 * k), z.y + z.h / 2)),
            Some(z) => near((z.x + z.w / 2, z.y + (2 * i + 1) * z.h / (2 * k))),
        })
        .collect();
    let ports = inp.ucie_ports_per_edge;
    let edge = |side: Side, j: u32, k: u32| -> Pos {
        match side {
            Side::N => ((2 * j + 1) * w / (2 * k), 0),
            Side::S => ((2 * j + 1) * w / (2 * k), h - 1),
            Side::E => (w - 1, (2 * j + 1) * h / (2 * k)),
            Side::W => (0, (2 * j + 1) * h / (2 * k)),
        }
    };
    let ucie = Side::ALL
        .iter()
        .map(|&s| (s, (0..ports).map(|j| near(edge(s, j, ports))).collect()))
        .collect();
    let sip_port = Side::ALL
        .iter()
        .map(|&s| (s, near(edge(s, 0, 1))))
        .collect();
    let (sram, m_cpu, pcie) = (near((w / 2, h - 1)), near((w / 2, h / 2)), near((0, h / 2)));
    layout.pe = pe;
    layout.hbm = hbm;
    layout.ucie = ucie;
    layout.sip_port = sip_port;
    layout.sram = sram;
    layout.m_cpu = m_cpu;
    layout.pcie = pcie;
    Ok(layout)
}

/// The present router nearest to `t` (Manhattan; ties: smaller y, then x).
fn nearest_router(l: &CubeLayout, t: Pos) -> Pos {
    l.routers()
        .min_by_key(|&(x, y)| (x.abs_diff(t.0) + y.abs_diff(t.1), y, x))
        .expect("validation leaves at least one router")
}

fn check_connected(l: &CubeLayout) -> Result<(), String> {
    let all: Vec<Pos> = l.routers().collect();
    let mut seen = std::collections::HashSet::from([all[0]]);
    let mut stack = vec![all[0]];
    while let Some((x, y)) = stack.pop() {
        let nbrs = [
            (x.wrapping_sub(1), y),
            (x + 1, y),
            (x, y.wrapping_sub(1)),
            (x, y + 1),
        ];
        for n in nbrs {
            if l.has_router(n) && seen.insert(n) {
                stack.push(n);
            }
        }
    }
    if seen.len() == all.len() {
        return Ok(());
    }
    let z = l.exclusion_zone.expect("a full grid is connected");
    Err(format!(
        "cube.hbm.exclusion_zone {{x: {}, y: {}, w: {}, h: {}}} cuts the {}x{} cube NoC in two: \
         {} of its {} routers cannot reach router r0_0's side",
        z.x,
        z.y,
        z.w,
        z.h,
        l.w,
        l.h,
        all.len() - seen.len(),
        all.len()
    ))
}

/// Where the layout came from, for `topology show` and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutSource {
    /// Computed; no cache in use.
    Computed,
    /// Reused from a cache whose `source_hash` matched.
    CacheHit(PathBuf),
    /// Computed and written to the cache (none there before, or its
    /// hash or generator differed).
    CacheWritten { path: PathBuf, replaced: bool },
    /// Computed; the cache could not be written (the message says why).
    CacheUnwritable { path: PathBuf, error: String },
}

impl std::fmt::Display for LayoutSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LayoutSource::Computed => f.write_str("computed (no cache)"),
            LayoutSource::CacheHit(p) => write!(f, "cache hit: {}", p.display()),
            LayoutSource::CacheWritten { path, replaced } => write!(
                f,
                "cache miss: {} {}",
                if *replaced { "regenerated" } else { "created" },
                path.display()
            ),
            LayoutSource::CacheUnwritable { path, error } => {
                write!(
                    f,
                    "computed; cannot write cache {}: {error}",
                    path.display()
                )
            }
        }
    }
}

/// The cache file: human-readable YAML.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CacheFile {
    generator: String,
    source_hash: String,
    /// The inputs the hash covers, for a human reader.
    inputs: LayoutInputs,
    noc: GridSpec,
    /// Router positions left empty (the HBM exclusion zone).
    excluded: Vec<String>,
    /// Cube node → the router it hangs off.
    attach: BTreeMap<String, String>,
    /// Router a PCIe endpoint on the cube hangs off.
    pcie_endpoint: String,
    /// Router each side's SIP port hangs off.
    sip_ports: BTreeMap<Side, String>,
}

const CACHE_HEADER: &str = "\
# cube_mesh.yaml: the cube NoC layout kernbench generated from topology.yaml.
# Reused while source_hash matches the five layout inputs of topology.yaml
# (cube.noc.w, cube.noc.h, cube.pe_layout, cube.hbm stacks/exclusion_zone,
# sip.ucie_link.ports_per_edge); regenerated when any of them changes.
# Attachments may be edited by hand; they are checked when loaded.
";

fn router_leaf((x, y): Pos) -> String {
    CubePart::Router { x, y }.to_string()
}

/// Grid positions without a router, as router leaves.
fn excluded_leaves(l: &CubeLayout) -> Vec<String> {
    (0..l.h)
        .flat_map(|y| (0..l.w).map(move |x| (x, y)))
        .filter(|&p| !l.has_router(p))
        .map(router_leaf)
        .collect()
}

fn to_cache(inputs: &LayoutInputs, source_hash: String, l: &CubeLayout) -> CacheFile {
    CacheFile {
        generator: GENERATOR.into(),
        source_hash,
        inputs: inputs.clone(),
        noc: GridSpec { w: l.w, h: l.h },
        excluded: excluded_leaves(l),
        attach: l
            .attachments()
            .into_iter()
            .map(|(part, p)| (part.to_string(), router_leaf(p)))
            .collect(),
        pcie_endpoint: router_leaf(l.pcie),
        sip_ports: l
            .sip_port
            .iter()
            .map(|(&s, &p)| (s, router_leaf(p)))
            .collect(),
    }
}

/// Rebuild a layout from a cache whose hash matched, checking every entry
/// against the generated one's shape.
fn from_cache(c: &CacheFile, generated: &CubeLayout) -> Result<CubeLayout, String> {
    let mut l = generated.clone();
    if c.noc != (GridSpec { w: l.w, h: l.h }) {
        return Err(format!(
            "noc is {}x{}, the inputs say {}x{}",
            c.noc.w, c.noc.h, l.w, l.h
        ));
    }
    let want_excluded = excluded_leaves(generated);
    if c.excluded != want_excluded {
        return Err(format!(
            "excluded lists {:?}; the exclusion zone gives {:?} (edit topology.yaml instead)",
            c.excluded, want_excluded
        ));
    }
    let router = |key: &str, leaf: &str| -> Result<Pos, String> {
        match leaf.parse::<CubePart>() {
            Ok(CubePart::Router { x, y }) if generated.has_router((x, y)) => Ok((x, y)),
            _ => Err(format!("{key}: '{leaf}' is not a router of this cube")),
        }
    };
    let expected: Vec<CubePart> = generated
        .attachments()
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    for key in c.attach.keys() {
        match key.parse::<CubePart>() {
            Ok(p) if expected.contains(&p) => {}
            _ => return Err(format!("attach: '{key}' is not a component of this cube")),
        }
    }
    for part in expected {
        let key = part.to_string();
        let leaf = c
            .attach
            .get(&key)
            .ok_or_else(|| format!("attach: '{key}' is missing"))?;
        let pos = router(&format!("attach.{key}"), leaf)?;
        match part {
            CubePart::Pe(i) => l.pe[i as usize] = pos,
            CubePart::Hbm(i) => l.hbm[i as usize] = pos,
            CubePart::Sram => l.sram = pos,
            CubePart::MCpu => l.m_cpu = pos,
            CubePart::Ucie { side, port } => {
                l.ucie.get_mut(&side).expect("all sides")[port as usize] = pos
            }
            CubePart::Router { .. } => unreachable!("routers are not attachments"),
        }
    }
    l.pcie = router("pcie_endpoint", &c.pcie_endpoint)?;
    for side in Side::ALL {
        let leaf = c
            .sip_ports
            .get(&side)
            .ok_or_else(|| format!("sip_ports: side {} is missing", side.letter()))?;
        l.sip_port
            .insert(side, router(&format!("sip_ports.{}", side.letter()), leaf)?);
    }
    Ok(l)
}

/// Stage 3 with the cache: reuse `path` when its `source_hash` matches
/// the spec's layout inputs, otherwise generate and (re)write it. A cache
/// with a matching hash but a broken body is an error naming the file.
pub fn load_or_generate(
    spec: &TopologySpec,
    origin: &Origin,
    cache: Option<&Path>,
) -> Result<(CubeLayout, LayoutSource), ConfigError> {
    let generated = generate(spec).map_err(|message| ConfigError::Invalid {
        origin: origin.clone(),
        message,
    })?;
    let Some(path) = cache else {
        return Ok((generated, LayoutSource::Computed));
    };
    let inputs = LayoutInputs::of(spec);
    let hash = inputs.source_hash();
    let cache_err = |message: String| ConfigError::Invalid {
        origin: Origin::File(path.to_path_buf()),
        message: format!("{message} (delete the file to regenerate it)"),
    };
    let mut replaced = false;
    if let Ok(text) = std::fs::read_to_string(path) {
        replaced = true;
        // An unreadable or foreign file is regenerated; a matching hash
        // means the user's edits must be honoured or reported.
        if let Ok(file) = serde_yaml::from_str::<CacheFile>(&text) {
            if file.generator == GENERATOR && file.source_hash == hash {
                if file.inputs != inputs {
                    return Err(cache_err(
                        "inputs were edited but source_hash was not".into(),
                    ));
                }
                let l = from_cache(&file, &generated).map_err(cache_err)?;
                return Ok((l, LayoutSource::CacheHit(path.to_path_buf())));
            }
        } else if text.contains(&hash) {
            return Err(cache_err("cannot parse the cache".into()));
        }
    }
    let body =
        serde_yaml::to_string(&to_cache(&inputs, hash, &generated)).expect("cache serialises");
    // Write a temporary file and rename it: a run reading the cache at
    // the same time sees the old file or the new one, never half of one.
    let tmp = path.with_extension(format!("yaml.tmp{}", std::process::id()));
    let written = std::fs::write(&tmp, format!("{CACHE_HEADER}{body}"))
        .and_then(|()| std::fs::rename(&tmp, path))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        });
    let source = match written {
        Ok(()) => LayoutSource::CacheWritten {
            path: path.to_path_buf(),
            replaced,
        },
        Err(e) => LayoutSource::CacheUnwritable {
            path: path.to_path_buf(),
            error: e.to_string(),
        },
    };
    Ok((generated, source))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DEFAULT_TOPOLOGY_YAML;

    fn spec_with(edits: &[(&str, &str)]) -> TopologySpec {
        crate::config::edited_default_topology(edits)
    }

    #[test]
    fn default_layout_places_components_by_the_documented_rules() {
        let l = generate(&TopologySpec::default_embedded()).unwrap();
        assert_eq!(l.routers().count(), 16);
        assert_eq!(l.pe, vec![(0, 0), (3, 0), (0, 3), (3, 3)]);
        assert_eq!(l.hbm, vec![(2, 0)]);
        assert_eq!((l.sram, l.m_cpu, l.pcie), ((2, 3), (2, 2), (0, 2)));
        assert_eq!(l.ucie[&Side::N], vec![(2, 0)]);
        assert_eq!(l.ucie[&Side::E], vec![(3, 2)]);
        assert_eq!(l.sip_port[&Side::W], (0, 2));
    }

    #[test]
    fn exclusion_zone_removes_routers_and_moves_attachments() {
        let s = spec_with(&[
            (
                "exclusion_zone: null",
                "exclusion_zone: {x: 1, y: 1, w: 2, h: 2}",
            ),
            ("stacks: 1", "stacks: 2"),
            ("ports_per_edge: 1", "ports_per_edge: 2"),
        ]);
        let l = generate(&s).unwrap();
        assert_eq!(l.routers().count(), 12);
        assert!(!l.has_router((1, 1)) && !l.has_router((2, 2)));
        // zone 2 wide: slice centres (1,2) and (2,2), both inside the
        // zone; nearest routers at distance 1, smaller y first: the stacks
        // sit west and east of the zone.
        assert_eq!(l.hbm, vec![(0, 2), (3, 2)]);
        // the centre (2,2) is excluded: M_CPU moves to the nearest router.
        assert_eq!(l.m_cpu, (3, 2));
        assert_eq!(l.ucie[&Side::N], vec![(1, 0), (3, 0)]);
        assert_eq!(l.ucie[&Side::W], vec![(0, 1), (0, 3)]);
    }

    #[test]
    fn zone_that_splits_the_noc_is_an_error() {
        let text = DEFAULT_TOPOLOGY_YAML.replace(
            "exclusion_zone: null",
            "exclusion_zone: {x: 1, y: 0, w: 1, h: 4}",
        );
        let s = TopologySpec::from_yaml(&text, Origin::Embedded("t")).unwrap();
        let e = generate(&s).unwrap_err();
        assert!(e.contains("cuts the 4x4 cube NoC in two"), "{e}");
    }

    #[test]
    fn pe_at_an_excluded_corner_takes_the_nearest_router() {
        let s = spec_with(&[(
            "exclusion_zone: null",
            "exclusion_zone: {x: 0, y: 0, w: 1, h: 1}",
        )]);
        let l = generate(&s).unwrap();
        assert_eq!(l.pe[0], (1, 0), "tie (1,0) vs (0,1): smaller y wins");
    }

    #[test]
    fn hash_covers_exactly_the_layout_inputs() {
        let base = LayoutInputs::of(&TopologySpec::default_embedded()).source_hash();
        let same = [
            ("link_bandwidth_gbps: 512", "link_bandwidth_gbps: 100"),
            ("size_gib: 16", "size_gib: 8"),
            ("count: 4", "count: 8"),
        ];
        for e in same {
            assert_eq!(
                LayoutInputs::of(&spec_with(&[e])).source_hash(),
                base,
                "{e:?}"
            );
        }
        let differ = [
            ("w: 4\n    h: 4\n    link", "w: 5\n    h: 4\n    link"),
            ("w: 4\n    h: 4\n    link", "w: 4\n    h: 3\n    link"),
            ("pe_per_corner: 1", "pe_per_corner: 2"),
            ("stacks: 1", "stacks: 2"),
            (
                "exclusion_zone: null",
                "exclusion_zone: {x: 1, y: 1, w: 1, h: 1}",
            ),
            ("ports_per_edge: 1", "ports_per_edge: 3"),
        ];
        for e in differ {
            assert_ne!(
                LayoutInputs::of(&spec_with(&[e])).source_hash(),
                base,
                "{e:?}"
            );
        }
    }

    #[test]
    fn cache_miss_then_hit_then_regenerate_and_honour_edits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cube_mesh.yaml");
        let o = Origin::Embedded("t");
        let s = TopologySpec::default_embedded();
        let (l1, src) = load_or_generate(&s, &o, Some(&path)).unwrap();
        assert_eq!(
            src,
            LayoutSource::CacheWritten {
                path: path.clone(),
                replaced: false
            }
        );
        let (l2, src) = load_or_generate(&s, &o, Some(&path)).unwrap();
        assert_eq!(src, LayoutSource::CacheHit(path.clone()));
        assert_eq!(l1, l2);
        // A hand edit is honoured while the hash matches...
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("m_cpu: r2_2"), "{text}");
        std::fs::write(&path, text.replace("m_cpu: r2_2", "m_cpu: r1_1")).unwrap();
        let (l3, _) = load_or_generate(&s, &o, Some(&path)).unwrap();
        assert_eq!(l3.m_cpu, (1, 1));
        // ...checked...
        std::fs::write(&path, text.replace("m_cpu: r2_2", "m_cpu: r9_9")).unwrap();
        let e = load_or_generate(&s, &o, Some(&path))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cube_mesh.yaml") && e.contains("attach.m_cpu: 'r9_9'"),
            "{e}"
        );
        // ...and a changed input regenerates.
        let s2 = spec_with(&[("pe_per_corner: 1", "pe_per_corner: 2")]);
        let (l4, src) = load_or_generate(&s2, &o, Some(&path)).unwrap();
        assert_eq!(
            src,
            LayoutSource::CacheWritten {
                path: path.clone(),
                replaced: true
            }
        );
        assert_eq!(l4.pe.len(), 8);
    }
}
