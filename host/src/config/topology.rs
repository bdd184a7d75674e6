//! `topology.yaml`: the typed spec of the modelled machine.

use super::Origin;
use crate::error::ConfigError;
use crate::units::{ns_to_ps, Ps, Rate};
use serde::Deserialize;

/// SIP-level interconnect shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum SipTopology {
    #[serde(rename = "ring_1d")]
    Ring1d,
    #[serde(rename = "torus_2d")]
    Torus2d,
    #[serde(rename = "mesh_2d_no_wrap")]
    Mesh2dNoWrap,
}

impl SipTopology {
    pub fn name(self) -> &'static str {
        match self {
            SipTopology::Ring1d => "ring_1d",
            SipTopology::Torus2d => "torus_2d",
            SipTopology::Mesh2dNoWrap => "mesh_2d_no_wrap",
        }
    }
}

/// A link's figures as written in YAML.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    pub bandwidth_gbps: f64,
    pub latency_ns: f64,
}

impl LinkSpec {
    pub fn rate(&self) -> Rate {
        Rate::from_giga_per_s(self.bandwidth_gbps)
    }
    pub fn latency_ps(&self) -> Ps {
        ns_to_ps(self.latency_ns)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SipsSpec {
    pub count: u32,
    #[serde(default = "default_sip_topology")]
    pub topology: SipTopology,
    pub w: Option<u32>,
    pub h: Option<u32>,
}

fn default_sip_topology() -> SipTopology {
    SipTopology::Ring1d
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SystemSpec {
    pub sips: SipsSpec,
    pub inter_sip_link: LinkSpec,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridSpec {
    pub w: u32,
    pub h: u32,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SipSpec {
    pub cube_mesh: GridSpec,
    pub ucie_link: LinkSpec,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NocSpec {
    pub w: u32,
    pub h: u32,
    pub link_bandwidth_gbps: f64,
    pub hop_latency_ns: f64,
}

impl NocSpec {
    pub fn link(&self) -> LinkSpec {
        LinkSpec {
            bandwidth_gbps: self.link_bandwidth_gbps,
            latency_ns: self.hop_latency_ns,
        }
    }
}

/// A cube corner where PEs attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Corner {
    Nw,
    Ne,
    Sw,
    Se,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeLayoutSpec {
    pub corners: Vec<Corner>,
    pub pe_per_corner: u32,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HbmSpec {
    pub size_gib: f64,
    pub bandwidth_gbps: f64,
    pub latency_ns: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SramSpec {
    pub size_mib: f64,
    pub bandwidth_gbps: f64,
    pub latency_ns: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CubeSpec {
    pub noc: NocSpec,
    pub pe_layout: PeLayoutSpec,
    pub hbm: HbmSpec,
    pub sram: SramSpec,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DmaSpec {
    pub setup_ns: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MathSpec {
    pub overhead_ns: f64,
    pub throughput_gflops: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeSpec {
    pub tcm_kib: u64,
    pub attach: LinkSpec,
    pub dma: DmaSpec,
    pub math: MathSpec,
}

/// The whole topology.yaml.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    pub system: SystemSpec,
    pub sip: SipSpec,
    pub cube: CubeSpec,
    pub pe: PeSpec,
}

impl TopologySpec {
    /// Parse and validate.
    pub fn from_yaml(text: &str, origin: Origin) -> Result<Self, ConfigError> {
        let spec: TopologySpec = serde_yaml::from_str(text).map_err(|e| ConfigError::Parse {
            origin: origin.clone(),
            message: e.to_string(),
        })?;
        spec.validate()
            .map_err(|message| ConfigError::Invalid { origin, message })?;
        Ok(spec)
    }

    /// The embedded default.
    pub fn default_embedded() -> Self {
        Self::from_yaml(
            super::DEFAULT_TOPOLOGY_YAML,
            Origin::Embedded("topology.yaml"),
        )
        .expect("the embedded topology.yaml is valid")
    }

    pub fn n_sips(&self) -> u32 {
        self.system.sips.count
    }

    pub fn cubes_per_sip(&self) -> u32 {
        self.sip.cube_mesh.w * self.sip.cube_mesh.h
    }

    pub fn pes_per_cube(&self) -> u32 {
        self.cube.pe_layout.corners.len() as u32 * self.cube.pe_layout.pe_per_corner
    }

    /// SIP grid `(w, h)`: `(count, 1)` for a ring; explicit or square root
    /// for the 2-D topologies.
    pub fn sip_grid(&self) -> (u32, u32) {
        let s = &self.system.sips;
        match s.topology {
            SipTopology::Ring1d => (s.count, 1),
            _ => match (s.w, s.h) {
                (Some(w), Some(h)) => (w, h),
                (Some(w), None) => (w, s.count / w.max(1)),
                (None, Some(h)) => (s.count / h.max(1), h),
                (None, None) => {
                    let r = (s.count as f64).sqrt().round() as u32;
                    (r, s.count / r.max(1))
                }
            },
        }
    }

    fn validate(&self) -> Result<(), String> {
        let s = &self.system.sips;
        if s.count == 0 || s.count > 4096 {
            return Err(format!(
                "system.sips.count must be in 1..=4096, got {}",
                s.count
            ));
        }
        let (w, h) = self.sip_grid();
        if s.topology != SipTopology::Ring1d && w * h != s.count {
            return Err(format!(
                "system.sips: {} needs w*h == count, got w={w} h={h} count={}",
                s.topology.name(),
                s.count
            ));
        }
        let grid = |name: &str, g: (u32, u32)| {
            if g.0 == 0 || g.1 == 0 || g.0 > 64 || g.1 > 64 {
                Err(format!(
                    "{name} must be between 1x1 and 64x64, got {}x{}",
                    g.0, g.1
                ))
            } else {
                Ok(())
            }
        };
        grid(
            "sip.cube_mesh",
            (self.sip.cube_mesh.w, self.sip.cube_mesh.h),
        )?;
        grid("cube.noc", (self.cube.noc.w, self.cube.noc.h))?;
        let pl = &self.cube.pe_layout;
        if pl.corners.is_empty() || pl.pe_per_corner == 0 || self.pes_per_cube() > 256 {
            return Err("cube.pe_layout needs 1..=256 PEs (corners x pe_per_corner)".into());
        }
        let positive = [
            (
                "system.inter_sip_link.bandwidth_gbps",
                self.system.inter_sip_link.bandwidth_gbps,
            ),
            (
                "sip.ucie_link.bandwidth_gbps",
                self.sip.ucie_link.bandwidth_gbps,
            ),
            (
                "cube.noc.link_bandwidth_gbps",
                self.cube.noc.link_bandwidth_gbps,
            ),
            ("cube.hbm.bandwidth_gbps", self.cube.hbm.bandwidth_gbps),
            ("cube.sram.bandwidth_gbps", self.cube.sram.bandwidth_gbps),
            ("pe.attach.bandwidth_gbps", self.pe.attach.bandwidth_gbps),
            ("pe.math.throughput_gflops", self.pe.math.throughput_gflops),
            ("cube.hbm.size_gib", self.cube.hbm.size_gib),
            ("cube.sram.size_mib", self.cube.sram.size_mib),
        ];
        for (name, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("{name} must be a positive number, got {v}"));
            }
        }
        let non_negative = [
            (
                "system.inter_sip_link.latency_ns",
                self.system.inter_sip_link.latency_ns,
            ),
            ("sip.ucie_link.latency_ns", self.sip.ucie_link.latency_ns),
            ("cube.noc.hop_latency_ns", self.cube.noc.hop_latency_ns),
            ("cube.hbm.latency_ns", self.cube.hbm.latency_ns),
            ("cube.sram.latency_ns", self.cube.sram.latency_ns),
            ("pe.attach.latency_ns", self.pe.attach.latency_ns),
            ("pe.dma.setup_ns", self.pe.dma.setup_ns),
            ("pe.math.overhead_ns", self.pe.math.overhead_ns),
        ];
        for (name, v) in non_negative {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{name} must be a non-negative number, got {v}"));
            }
        }
        if self.pe.tcm_kib == 0 {
            return Err("pe.tcm_kib must be > 0".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_default_parses() {
        let t = TopologySpec::default_embedded();
        assert_eq!(t.n_sips(), 4);
        assert_eq!(t.cubes_per_sip(), 16);
        assert_eq!(t.pes_per_cube(), 4);
    }

    #[test]
    fn malformed_yaml_names_file_and_line() {
        let e = TopologySpec::from_yaml("system: [", Origin::File("x.yaml".into())).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("x.yaml"), "{msg}");
        assert!(msg.contains("line"), "{msg}");
    }

    #[test]
    fn unknown_key_is_rejected() {
        let text = super::super::DEFAULT_TOPOLOGY_YAML
            .replace("setup_ns: 20", "setup_ns: 20\n    setup_us: 1");
        let e = TopologySpec::from_yaml(&text, Origin::Embedded("t")).unwrap_err();
        assert!(e.to_string().contains("setup_us"), "{e}");
    }

    #[test]
    fn bad_torus_shape_is_rejected() {
        let text = super::super::DEFAULT_TOPOLOGY_YAML
            .replace("count: 4", "count: 5")
            .replace("topology: ring_1d ", "topology: torus_2d ");
        let e = TopologySpec::from_yaml(&text, Origin::Embedded("t")).unwrap_err();
        assert!(e.to_string().contains("w*h == count"), "{e}");
    }
}
