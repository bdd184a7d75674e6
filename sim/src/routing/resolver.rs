//! [`AddressResolver`]: physical address → memory space, offset and the
//! graph node holding it; and lookups of a cube's M_CPU, a SIP's IO_CPU
//! and its PCIe endpoints. Address *encoding* is owned by
//! [`crate::address`]; this adds the topology's nodes.

use crate::address::{self, Space};
use crate::error::HwError;
use crate::topology::{NodeId, Topology};
use std::sync::Arc;

/// A resolved address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    pub space: Space,
    pub offset: u64,
    /// The node holding the first byte (the HBM stack for HBM).
    pub node: NodeId,
}

/// Address and component lookups on one topology.
pub struct AddressResolver {
    topo: Arc<Topology>,
}

impl AddressResolver {
    pub fn new(topo: Arc<Topology>) -> Self {
        AddressResolver { topo }
    }

    /// Decode `addr` and check `[addr, addr+len)` lies inside one space.
    pub fn resolve(&self, addr: u64, len: u64) -> Result<Resolved, HwError> {
        let spec = &self.topo.spec;
        let (space, offset) = address::resolve(spec, addr, len)?;
        Ok(Resolved {
            space,
            offset,
            node: space.node_at(offset, spec),
        })
    }

    fn exists(&self, n: NodeId) -> Option<NodeId> {
        self.topo.node_index(&n).map(|_| n)
    }

    /// The M_CPU of cube `cube` of SIP `sip`.
    pub fn find_m_cpu(&self, sip: u32, cube: u32) -> Option<NodeId> {
        self.exists(NodeId::MCpu { sip, cube })
    }

    /// The IO_CPU of SIP `sip` (None when it has no PCIe endpoints).
    pub fn find_io_cpu(&self, sip: u32) -> Option<NodeId> {
        self.exists(NodeId::IoCpu { sip })
    }

    /// The PCIe endpoint of SIP `sip` nearest to cube `cube` (Manhattan
    /// distance in the cube mesh; ties: the lower endpoint number).
    pub fn find_pcie_ep(&self, sip: u32, cube: u32) -> Option<NodeId> {
        let spec = &self.topo.spec;
        if sip >= spec.n_sips() {
            return None;
        }
        let cw = spec.sip.cube_mesh.w;
        let (x, y) = (cube % cw, cube / cw);
        spec.pcie_cubes()
            .into_iter()
            .enumerate()
            .min_by_key(|&(ep, c)| ((c % cw).abs_diff(x) + (c / cw).abs_diff(y), ep))
            .map(|(ep, _)| NodeId::PcieEp { sip, ep: ep as u32 })
    }

    /// Every PCIe endpoint of the machine, by SIP then number.
    pub fn find_all_pcie_eps(&self) -> Vec<NodeId> {
        let spec = &self.topo.spec;
        (0..spec.n_sips())
            .flat_map(|sip| (0..spec.sip.pcie.endpoints).map(move |ep| NodeId::PcieEp { sip, ep }))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Origin, TopologySpec, DEFAULT_TOPOLOGY_YAML};
    use crate::topology::{build, PeCoord};

    #[test]
    fn lookups() {
        let text = DEFAULT_TOPOLOGY_YAML.replace("endpoints: 1", "endpoints: 2");
        let spec = TopologySpec::from_yaml(&text, Origin::Embedded("t")).unwrap();
        let r = AddressResolver::new(Arc::new(build(&spec).unwrap()));
        assert_eq!(
            r.find_m_cpu(3, 15).unwrap().to_string(),
            "sip3.cube15.m_cpu"
        );
        assert_eq!(r.find_m_cpu(4, 0), None);
        assert_eq!(r.find_io_cpu(1).unwrap().to_string(), "sip1.io_cpu");
        // endpoints on cubes 0 and 8 (row 2): cube 13 (1,3) is nearer 8
        assert_eq!(r.find_pcie_ep(2, 13).unwrap().to_string(), "sip2.pcie1");
        assert_eq!(r.find_pcie_ep(2, 1).unwrap().to_string(), "sip2.pcie0");
        assert_eq!(r.find_all_pcie_eps().len(), 8);
        let tcm = Space::Tcm(PeCoord {
            sip: 1,
            cube: 2,
            pe: 3,
        });
        let got = r.resolve(tcm.addr(64), 16).unwrap();
        assert_eq!(
            (got.space, got.offset, got.node.to_string()),
            (tcm, 64, "sip1.cube2.pe3".into())
        );
        assert!(r.resolve(0, 1).is_err());
    }

    #[test]
    fn no_pcie_means_no_io_cpu() {
        let text = DEFAULT_TOPOLOGY_YAML.replace("endpoints: 1", "endpoints: 0");
        let spec = TopologySpec::from_yaml(&text, Origin::Embedded("t")).unwrap();
        let r = AddressResolver::new(Arc::new(build(&spec).unwrap()));
        assert_eq!(r.find_io_cpu(0), None);
        assert_eq!(r.find_pcie_ep(0, 0), None);
        assert!(r.find_all_pcie_eps().is_empty());
    }
}
