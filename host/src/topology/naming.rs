//! Canonical node names (`sip0.cube3.pe1`, `sip0.cube3.r2_1`, ...): the
//! only place that builds or parses them.

use std::fmt;

/// A side of a cube or SIP; also an IPCQ direction on the SIP grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
        .filter(|_| s.len() == 1)
    }
}

/// The name of SIP `sip` (the prefix of all its nodes).
pub fn sip_name(sip: u32) -> String {
    format!("sip{sip}")
}

/// Structural coordinates of a PE (seed ADR-0026).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeCoord {
    pub sip: u32,
    pub cube: u32,
    pub pe: u32,
}

impl fmt::Display for PeCoord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sip{}.cube{}.pe{}", self.sip, self.cube, self.pe)
    }
}

/// A node of the machine graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeId {
    Router { sip: u32, cube: u32, x: u32, y: u32 },
    Pe(PeCoord),
    Hbm { sip: u32, cube: u32 },
    Sram { sip: u32, cube: u32 },
    Ucie { sip: u32, cube: u32, side: Side },
    SipPort { sip: u32, side: Side },
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            NodeId::Router { sip, cube, x, y } => write!(f, "sip{sip}.cube{cube}.r{x}_{y}"),
            NodeId::Pe(p) => write!(f, "{p}"),
            NodeId::Hbm { sip, cube } => write!(f, "sip{sip}.cube{cube}.hbm"),
            NodeId::Sram { sip, cube } => write!(f, "sip{sip}.cube{cube}.sram"),
            NodeId::Ucie { sip, cube, side } => {
                write!(f, "sip{sip}.cube{cube}.ucie_{}", side.letter())
            }
            NodeId::SipPort { sip, side } => write!(f, "sip{sip}.port_{}", side.letter()),
        }
    }
}

fn num(s: &str, prefix: &str) -> Option<u32> {
    s.strip_prefix(prefix)?.parse().ok()
}

impl std::str::FromStr for NodeId {
    type Err = String;

    /// Parse a canonical name.
    fn from_str(name: &str) -> Result<Self, String> {
        let bad = || format!("not a node name: {name:?}");
        let parts: Vec<&str> = name.split('.').collect();
        let sip = num(parts.first().ok_or_else(bad)?, "sip").ok_or_else(bad)?;
        match parts.as_slice() {
            [_, port] => {
                let side =
                    Side::parse(port.strip_prefix("port_").ok_or_else(bad)?).ok_or_else(bad)?;
                Ok(NodeId::SipPort { sip, side })
            }
            [_, cube, leaf] => {
                let cube = num(cube, "cube").ok_or_else(bad)?;
                if let Some(pe) = num(leaf, "pe") {
                    return Ok(NodeId::Pe(PeCoord { sip, cube, pe }));
                }
                match *leaf {
                    "hbm" => return Ok(NodeId::Hbm { sip, cube }),
                    "sram" => return Ok(NodeId::Sram { sip, cube }),
                    _ => {}
                }
                if let Some(side) = leaf.strip_prefix("ucie_").and_then(Side::parse) {
                    return Ok(NodeId::Ucie { sip, cube, side });
                }
                let (x, y) = leaf
                    .strip_prefix('r')
                    .and_then(|r| r.split_once('_'))
                    .ok_or_else(bad)?;
                Ok(NodeId::Router {
                    sip,
                    cube,
                    x: x.parse().map_err(|_| bad())?,
                    y: y.parse().map_err(|_| bad())?,
                })
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
            NodeId::Hbm { sip: 2, cube: 0 },
            NodeId::Sram { sip: 2, cube: 1 },
            NodeId::Ucie {
                sip: 0,
                cube: 5,
                side: Side::E,
            },
            NodeId::SipPort {
                sip: 3,
                side: Side::W,
            },
        ];
        for n in nodes {
            let s = n.to_string();
            assert_eq!(s.parse::<NodeId>().unwrap(), n, "{s}");
        }
        assert_eq!(
            NodeId::Router {
                sip: 0,
                cube: 3,
                x: 2,
                y: 1
            }
            .to_string(),
            "sip0.cube3.r2_1"
        );
        assert!("sip0.cube1.bogus".parse::<NodeId>().is_err());
        assert!("sip0.port_NE".parse::<NodeId>().is_err());
    }
}
