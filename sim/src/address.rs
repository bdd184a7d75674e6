//! Physical addresses: the single owner of address translation.
//!
//! A 64-bit physical address encodes the memory space and the offset in it:
//!
//! ```text
//! HBM / SRAM : [kind:4][sip:12][cube:12][offset:36]
//! TCM        : [kind:4][sip:12][cube:12][pe:8][offset:28]
//! virtual    : [kind:4][sip:12][va:48]
//! ```
//! kind 1 = HBM, 2 = SRAM, 3 = TCM, 4 = a virtual address of one SIP (a
//! tensor's range in that SIP's address map, [`crate::hw::vmap`], which
//! translates it to one of the physical kinds); address 0 (kind 0) is
//! never mapped, so a null pointer is caught at once.

use crate::config::TopologySpec;
use crate::error::HwError;
use crate::topology::{NodeId, PeCoord};
use std::fmt;

const KIND_SHIFT: u32 = 60;
const SIP_SHIFT: u32 = 48;
const CUBE_SHIFT: u32 = 36;
const PE_SHIFT: u32 = 28;
const MASK12: u64 = 0xfff;
const OFF36: u64 = (1 << 36) - 1;
const OFF28: u64 = (1 << 28) - 1;
const KIND_VIRTUAL: u64 = 4;
/// Bytes of virtual address space per SIP.
pub const VA_SPAN: u64 = 1 << 48;

/// The virtual address `va` of SIP `sip`.
pub fn virtual_addr(sip: u32, va: u64) -> u64 {
    (KIND_VIRTUAL << KIND_SHIFT) | ((sip as u64 & MASK12) << SIP_SHIFT) | (va & (VA_SPAN - 1))
}

/// `(sip, va)` when `addr` is a virtual address.
pub fn as_virtual(addr: u64) -> Option<(u32, u64)> {
    (addr >> KIND_SHIFT == KIND_VIRTUAL)
        .then_some((((addr >> SIP_SHIFT) & MASK12) as u32, addr & (VA_SPAN - 1)))
}

/// A memory space of the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Space {
    Hbm { sip: u32, cube: u32 },
    Sram { sip: u32, cube: u32 },
    Tcm(PeCoord),
}

impl fmt::Display for Space {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::topology::naming;
        match *self {
            Space::Tcm(pe) => f.write_str(&naming::tcm_space_name(pe)),
            Space::Sram { sip, cube } => write!(f, "{}", NodeId::Sram { sip, cube }),
            Space::Hbm { sip, cube } => f.write_str(&naming::hbm_space_name(sip, cube)),
        }
    }
}

impl Space {
    /// The SIP the space belongs to.
    pub fn sip(self) -> u32 {
        match self {
            Space::Hbm { sip, .. } | Space::Sram { sip, .. } => sip,
            Space::Tcm(pe) => pe.sip,
        }
    }

    /// The graph node holding `offset` of this space: the HBM stack it
    /// falls in (stacks follow one another in the address space), the
    /// SRAM, or the PE owning the TCM.
    pub fn node_at(self, offset: u64, spec: &TopologySpec) -> NodeId {
        match self {
            Space::Hbm { sip, cube } => NodeId::Hbm {
                sip,
                cube,
                stack: (offset / spec.hbm_stack_bytes().max(1)).min(spec.cube.hbm.stacks as u64 - 1)
                    as u32,
            },
            Space::Sram { sip, cube } => NodeId::Sram { sip, cube },
            Space::Tcm(pe) => NodeId::Pe(pe),
        }
    }

    /// Size in bytes under `spec`.
    pub fn size(self, spec: &TopologySpec) -> u64 {
        match self {
            Space::Hbm { .. } => spec.hbm_stack_bytes() * spec.cube.hbm.stacks as u64,
            Space::Sram { .. } => (spec.cube.sram.size_mib * (1u64 << 20) as f64) as u64,
            Space::Tcm(_) => spec.pe.tcm_kib * 1024,
        }
    }

    /// The physical address of `offset` in this space.
    pub fn addr(self, offset: u64) -> u64 {
        match self {
            Space::Hbm { sip, cube } => encode(1, sip, cube, offset & OFF36),
            Space::Sram { sip, cube } => encode(2, sip, cube, offset & OFF36),
            Space::Tcm(p) => encode(
                3,
                p.sip,
                p.cube,
                ((p.pe as u64) << PE_SHIFT) | (offset & OFF28),
            ),
        }
    }
}

fn encode(kind: u64, sip: u32, cube: u32, low: u64) -> u64 {
    (kind << KIND_SHIFT)
        | ((sip as u64 & MASK12) << SIP_SHIFT)
        | ((cube as u64 & MASK12) << CUBE_SHIFT)
        | low
}

/// Decode `addr` and check that `[addr, addr+len)` lies inside an existing
/// space of the machine described by `spec`.
pub fn resolve(spec: &TopologySpec, addr: u64, len: u64) -> Result<(Space, u64), HwError> {
    let bad = |reason: String| HwError::BadAddress { addr, reason };
    let kind = addr >> KIND_SHIFT;
    let sip = ((addr >> SIP_SHIFT) & MASK12) as u32;
    let cube = ((addr >> CUBE_SHIFT) & MASK12) as u32;
    let (space, offset) = match kind {
        1 => (Space::Hbm { sip, cube }, addr & OFF36),
        2 => (Space::Sram { sip, cube }, addr & OFF36),
        3 => {
            let pe = ((addr >> PE_SHIFT) & 0xff) as u32;
            if pe >= spec.pes_per_cube() {
                return Err(bad(format!(
                    "PE {pe} does not exist (cubes have {} PEs)",
                    spec.pes_per_cube()
                )));
            }
            (Space::Tcm(PeCoord { sip, cube, pe }), addr & OFF28)
        }
        0 if addr == 0 => return Err(bad("null address".into())),
        KIND_VIRTUAL => {
            return Err(bad(
                "a virtual address, which only the machine's address map can translate".into(),
            ))
        }
        k => {
            return Err(bad(format!(
                "unknown memory kind {k} (addresses come from tensors or t_ptr)"
            )))
        }
    };
    if sip >= spec.n_sips() {
        return Err(bad(format!(
            "SIP {sip} does not exist (machine has {})",
            spec.n_sips()
        )));
    }
    if cube >= spec.cubes_per_sip() {
        return Err(bad(format!(
            "cube {cube} does not exist (SIPs have {})",
            spec.cubes_per_sip()
        )));
    }
    let size = space.size(spec);
    if offset.checked_add(len).is_none_or(|end| end > size) {
        return Err(HwError::OutOfRange {
            addr,
            len,
            space: space.to_string(),
            size,
        });
    }
    Ok((space, offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_range_checks() {
        let spec = TopologySpec::default_embedded();
        let tcm = Space::Tcm(PeCoord {
            sip: 3,
            cube: 15,
            pe: 2,
        });
        assert_eq!(resolve(&spec, tcm.addr(0x40), 8).unwrap(), (tcm, 0x40));
        let hbm = Space::Hbm { sip: 1, cube: 2 };
        assert_eq!(resolve(&spec, hbm.addr(12345), 2).unwrap(), (hbm, 12345));
        assert!(matches!(
            resolve(&spec, 0, 1),
            Err(HwError::BadAddress { .. })
        ));
        let past = tcm.addr(spec.pe.tcm_kib * 1024 - 4);
        assert!(matches!(
            resolve(&spec, past, 8),
            Err(HwError::OutOfRange { .. })
        ));
        let no_sip = Space::Hbm { sip: 9, cube: 0 }.addr(0);
        assert!(resolve(&spec, no_sip, 1)
            .unwrap_err()
            .to_string()
            .contains("SIP 9"));
    }
}
