//! Canonical node names: the only place that builds or parses them.
//!
//! ```text
//! sip0.cube3.r2_1      router at NoC column 2, row 1 of cube 3
//! sip0.cube3.pe1       PE 1 of the cube
//! sip0.cube3.hbm0      HBM stack 0
//! sip0.cube3.sram      SRAM
//! sip0.cube3.m_cpu     the cube's management CPU
//! sip0.cube3.ucie_E0   UCIe port 0 on the cube's east edge
//! sip0.port_E          the SIP's inter-SIP port on its east side
//! sip0.io_cpu          the SIP's IO CPU
//! sip0.pcie0           PCIe endpoint 0 of the SIP
//! ```
//! Inside one cube a node is also known by its *leaf* (the part after
//! `sipS.cubeC.`); the layout cache (`cube_mesh.yaml`) uses leaves.

use std::fmt;

/// A side of a cube or SIP; also an IPCQ direction on the SIP grid.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Side {
    N,
    S,
    E,
    W,
}

impl Side {
    pub const ALL: [Side; 4] = [Side::N, Side::S, Side::E, Side::W];

    pub fn opposite(self) -> Side {
        match self {
            Side::N => Side::S,
            Side::S => Side::N,
            Side::E => Side::W,
            Side::W => Side::E,
        }
    }

    pub fn letter(self) -> &'static str {
        match self {
            Side::N => "N",
            Side::S => "S",
            Side::E => "E",
            Side::W => "W",
        }
    }

    pub fn parse(s: &str) -> Option<Side> {
        match s {
            "N" => Some(Side::N),
            "S" => Some(Side::S),
            "E" => Some(Side::E),
            "W" => Some(Side::W),
            _ => None,
        }
    }

    /// True for N and S (moves along y).
    pub fn is_vertical(self) -> bool {
        matches!(self, Side::N | Side::S)
    }
}

/// The name of SIP `sip` (the prefix of all its nodes).
pub fn sip_name(sip: u32) -> String {
    format!("sip{sip}")
}

/// The name of cube `cube` of SIP `sip`.
pub fn cube_name(sip: u32, cube: u32) -> String {
    format!("sip{sip}.cube{cube}")
}

/// The name of a cube's whole HBM address space (all stacks):
/// `sip0.cube3.hbm`.
pub fn hbm_space_name(sip: u32, cube: u32) -> String {
    format!("{}.hbm", cube_name(sip, cube))
}

/// The name of a PE's TCM address space: `sip0.cube3.pe1.tcm`.
pub fn tcm_space_name(pe: PeCoord) -> String {
    format!("{pe}.tcm")
}

/// Structural coordinates of a PE (seed ADR-0026).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeCoord {
    pub sip: u32,
    pub cube: u32,
    pub pe: u32,
}

impl PeCoord {
    /// PE 0 of cube 0 of each of SIPs `0..sips` (for unit tests: one PE a
    /// rank).
    #[cfg(test)]
    pub(crate) fn first_of_sips(sips: u32) -> Vec<PeCoord> {
        (0..sips)
            .map(|sip| PeCoord {
                sip,
                cube: 0,
                pe: 0,
            })
            .collect()
    }
}

impl PeCoord {
    /// Index of this PE in (SIP, cube, PE) order on a machine of `cubes`
    /// cubes per SIP and `pes` PEs per cube ([`TopologySpec::pe_dims`]).
    ///
    /// [`TopologySpec::pe_dims`]: crate::config::TopologySpec::pe_dims
    pub fn flat_index(self, (cubes, pes): (u32, u32)) -> u64 {
        (self.sip as u64 * cubes as u64 + self.cube as u64) * pes as u64 + self.pe as u64
    }

    /// The PE at `index` in (SIP, cube, PE) order (see [`PeCoord::flat_index`]).
    pub fn from_flat_index(index: u64, (cubes, pes): (u32, u32)) -> PeCoord {
        let (cubes, pes) = (cubes as u64, pes as u64);
        PeCoord {
            sip: (index / (cubes * pes)) as u32,
            cube: (index / pes % cubes) as u32,
            pe: (index % pes) as u32,
        }
    }
}

impl fmt::Display for PeCoord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sip{}.cube{}.{}",
            self.sip,
            self.cube,
            CubePart::Pe(self.pe)
        )
    }
}

/// A node inside one cube, named by its leaf (`r2_1`, `pe0`, `hbm0`,
/// `sram`, `m_cpu`, `ucie_E0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CubePart {
    Router { x: u32, y: u32 },
    Pe(u32),
    Hbm(u32),
    Sram,
    MCpu,
    Ucie { side: Side, port: u32 },
}

impl fmt::Display for CubePart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            CubePart::Router { x, y } => write!(f, "r{x}_{y}"),
            CubePart::Pe(p) => write!(f, "pe{p}"),
            CubePart::Hbm(s) => write!(f, "hbm{s}"),
            CubePart::Sram => f.write_str("sram"),
            CubePart::MCpu => f.write_str("m_cpu"),
            CubePart::Ucie { side, port } => write!(f, "ucie_{}{port}", side.letter()),
        }
    }
}

fn num(s: &str, prefix: &str) -> Option<u32> {
    let digits = s.strip_prefix(prefix)?;
    // Canonical numbers only: no sign, no leading zeros ("pe01" is not pe1).
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
    {
        return None;
    }
    digits.parse().ok()
}

impl std::str::FromStr for CubePart {
    type Err = String;

    fn from_str(leaf: &str) -> Result<Self, String> {
        let bad = || format!("not a cube node name: {leaf:?}");
        match leaf {
            "sram" => return Ok(CubePart::Sram),
            "m_cpu" => return Ok(CubePart::MCpu),
            _ => {}
        }
        if let Some(pe) = num(leaf, "pe") {
            return Ok(CubePart::Pe(pe));
        }
        if let Some(s) = num(leaf, "hbm") {
            return Ok(CubePart::Hbm(s));
        }
        if let Some(rest) = leaf.strip_prefix("ucie_") {
            let side = rest.get(..1).and_then(Side::parse).ok_or_else(bad)?;
            let port = num(&rest[1..], "").ok_or_else(bad)?;
            return Ok(CubePart::Ucie { side, port });
        }
        let (x, y) = leaf
            .strip_prefix('r')
            .and_then(|r| r.split_once('_'))
            .ok_or_else(bad)?;
        Ok(CubePart::Router {
            x: num(x, "").ok_or_else(bad)?,
            y: num(y, "").ok_or_else(bad)?,
        })
    }
}

/// A node of the machine graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeId {
    Router {
        sip: u32,
        cube: u32,
        x: u32,
        y: u32,
    },
    Pe(PeCoord),
    Hbm {
        sip: u32,
        cube: u32,
        stack: u32,
    },
    Sram {
        sip: u32,
        cube: u32,
    },
    MCpu {
        sip: u32,
        cube: u32,
    },
    Ucie {
        sip: u32,
        cube: u32,
        side: Side,
        port: u32,
    },
    SipPort {
        sip: u32,
        side: Side,
    },
    IoCpu {
        sip: u32,
    },
    PcieEp {
        sip: u32,
        ep: u32,
    },
}

impl NodeId {
    /// The node `part` of cube `cube` of SIP `sip`.
    pub fn in_cube(sip: u32, cube: u32, part: CubePart) -> NodeId {
        match part {
            CubePart::Router { x, y } => NodeId::Router { sip, cube, x, y },
            CubePart::Pe(pe) => NodeId::Pe(PeCoord { sip, cube, pe }),
            CubePart::Hbm(stack) => NodeId::Hbm { sip, cube, stack },
            CubePart::Sram => NodeId::Sram { sip, cube },
            CubePart::MCpu => NodeId::MCpu { sip, cube },
            CubePart::Ucie { side, port } => NodeId::Ucie {
                sip,
                cube,
                side,
                port,
            },
        }
    }

    /// `(cube, part)` for nodes inside a cube.
    pub fn cube_part(self) -> Option<(u32, CubePart)> {
        Some(match self {
            NodeId::Router { cube, x, y, .. } => (cube, CubePart::Router { x, y }),
            NodeId::Pe(p) => (p.cube, CubePart::Pe(p.pe)),
            NodeId::Hbm { cube, stack, .. } => (cube, CubePart::Hbm(stack)),
            NodeId::Sram { cube, .. } => (cube, CubePart::Sram),
            NodeId::MCpu { cube, .. } => (cube, CubePart::MCpu),
            NodeId::Ucie {
                cube, side, port, ..
            } => (cube, CubePart::Ucie { side, port }),
            NodeId::SipPort { .. } | NodeId::IoCpu { .. } | NodeId::PcieEp { .. } => return None,
        })
    }

    /// The SIP the node belongs to.
    pub fn sip(mut self) -> u32 {
        *self.sip_mut()
    }

    /// The same node of SIP `sip`.
    pub fn with_sip(mut self, sip: u32) -> NodeId {
        *self.sip_mut() = sip;
        self
    }

    /// The node's SIP field (every kind of node has one).
    fn sip_mut(&mut self) -> &mut u32 {
        match self {
            NodeId::Router { sip, .. }
            | NodeId::Hbm { sip, .. }
            | NodeId::Sram { sip, .. }
            | NodeId::MCpu { sip, .. }
            | NodeId::Ucie { sip, .. }
            | NodeId::SipPort { sip, .. }
            | NodeId::IoCpu { sip }
            | NodeId::PcieEp { sip, .. } => sip,
            NodeId::Pe(p) => &mut p.sip,
        }
    }

    /// The node kind, for summaries: `router`, `pe`, `hbm`, `sram`,
    /// `m_cpu`, `ucie`, `sip_port`, `io_cpu`, `pcie`.
    pub fn kind(self) -> &'static str {
        match self {
            NodeId::Router { .. } => "router",
            NodeId::Pe(_) => "pe",
            NodeId::Hbm { .. } => "hbm",
            NodeId::Sram { .. } => "sram",
            NodeId::MCpu { .. } => "m_cpu",
            NodeId::Ucie { .. } => "ucie",
            NodeId::SipPort { .. } => "sip_port",
            NodeId::IoCpu { .. } => "io_cpu",
            NodeId::PcieEp { .. } => "pcie",
        }
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((cube, part)) = self.cube_part() {
            return write!(f, "sip{}.cube{cube}.{part}", self.sip());
        }
        match *self {
            NodeId::SipPort { sip, side } => write!(f, "sip{sip}.port_{}", side.letter()),
            NodeId::IoCpu { sip } => write!(f, "sip{sip}.io_cpu"),
            NodeId::PcieEp { sip, ep } => write!(f, "sip{sip}.pcie{ep}"),
            _ => unreachable!("cube nodes are formatted above"),
        }
    }
}

impl std::str::FromStr for NodeId {
    type Err = String;

    /// Parse a canonical name.
    fn from_str(name: &str) -> Result<Self, String> {
        let bad = || format!("not a node name: {name:?}");
        let parts: Vec<&str> = name.split('.').collect();
        let sip = num(parts.first().ok_or_else(bad)?, "sip").ok_or_else(bad)?;
        match parts.as_slice() {
            [_, "io_cpu"] => Ok(NodeId::IoCpu { sip }),
            [_, leaf] => {
                if let Some(ep) = num(leaf, "pcie") {
                    return Ok(NodeId::PcieEp { sip, ep });
                }
                let side = leaf
                    .strip_prefix("port_")
                    .and_then(Side::parse)
                    .ok_or_else(bad)?;
                Ok(NodeId::SipPort { sip, side })
            }
            [_, cube, leaf] => {
                let cube = num(cube, "cube").ok_or_else(bad)?;
                let part: CubePart = leaf.parse().map_err(|_| bad())?;
                Ok(NodeId::in_cube(sip, cube, part))
            }
            _ => Err(bad()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let nodes = [
            NodeId::Router {
                sip: 0,
                cube: 3,
                x: 2,
                y: 1,
            },
            NodeId::Pe(PeCoord {
                sip: 1,
                cube: 15,
                pe: 3,
            }),
            NodeId::Hbm {
                sip: 2,
                cube: 0,
                stack: 1,
            },
            NodeId::Sram { sip: 2, cube: 1 },
            NodeId::MCpu { sip: 7, cube: 63 },
            NodeId::Ucie {
                sip: 0,
                cube: 5,
                side: Side::E,
                port: 12,
            },
            NodeId::SipPort {
                sip: 3,
                side: Side::W,
            },
            NodeId::IoCpu { sip: 4 },
            NodeId::PcieEp { sip: 4, ep: 2 },
        ];
        for n in nodes {
            let s = n.to_string();
            assert_eq!(s.parse::<NodeId>().unwrap(), n, "{s}");
            if let Some((_, part)) = n.cube_part() {
                assert_eq!(part.to_string().parse::<CubePart>().unwrap(), part);
            }
        }
        let expect = [
            "sip0.cube3.r2_1",
            "sip1.cube15.pe3",
            "sip2.cube0.hbm1",
            "sip2.cube1.sram",
            "sip7.cube63.m_cpu",
            "sip0.cube5.ucie_E12",
            "sip3.port_W",
            "sip4.io_cpu",
            "sip4.pcie2",
        ];
        for (n, e) in nodes.iter().zip(expect) {
            assert_eq!(n.to_string(), e);
        }
    }

    #[test]
    fn non_canonical_names_are_rejected() {
        for bad in [
            "sip0.cube1.bogus",
            "sip0.port_NE",
            "sip0.cube1.pe01",
            "sip0.cube1.pe-1",
            "sip0.cube1.r1",
            "sip0.cube1.ucie_E",
            "sip0.cube1.ucie_X0",
            "sip0.cube1.hbm",
            "sip0",
            "sip0.cube1.pe0.x",
            "cube1.pe0",
            "sip0.pcie",
        ] {
            assert!(bad.parse::<NodeId>().is_err(), "{bad} parsed");
        }
    }
}
