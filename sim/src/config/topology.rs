//! `topology.yaml`: the typed spec of the modelled machine.

use super::Origin;
use crate::error::ConfigError;
use crate::units::{self, ns_to_ps, Ps, Rate};

/// The most nodes a compiled machine graph may have (about 1.6 GB of host
/// memory; 4096 SIPs of the default 4x4-cube SIP have 1.7 M).
pub const MAX_GRAPH_NODES: u64 = 4 << 20;
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct GridSpec {
    pub w: u32,
    pub h: u32,
}

/// Die-to-die links between neighbouring cubes of a SIP.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UcieSpec {
    /// Parallel UCIe ports on each cube edge that has a neighbour; port
    /// `j` of one cube's E edge joins port `j` of its neighbour's W edge.
    #[serde(default = "one")]
    pub ports_per_edge: u32,
    pub bandwidth_gbps: f64,
    pub latency_ns: f64,
}

impl UcieSpec {
    pub fn link(&self) -> LinkSpec {
        LinkSpec {
            bandwidth_gbps: self.bandwidth_gbps,
            latency_ns: self.latency_ns,
        }
    }
}

fn one() -> u32 {
    1
}

/// The SIP's host interface: PCIe endpoints, all joined to the SIP's
/// IO_CPU. With `endpoints: 0` the SIP has neither.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcieSpec {
    pub endpoints: u32,
    /// The cube each endpoint hangs off (default: spread evenly, endpoint
    /// `e` on cube `e * cubes / endpoints`).
    pub cubes: Option<Vec<u32>>,
    pub bandwidth_gbps: f64,
    pub latency_ns: f64,
}

impl PcieSpec {
    /// An endpoint's link to the IO_CPU.
    pub fn link(&self) -> LinkSpec {
        LinkSpec {
            bandwidth_gbps: self.bandwidth_gbps,
            latency_ns: self.latency_ns,
        }
    }
}

impl Default for PcieSpec {
    fn default() -> Self {
        PcieSpec {
            endpoints: 1,
            cubes: None,
            bandwidth_gbps: 64.0,
            latency_ns: 500.0,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SipSpec {
    pub cube_mesh: GridSpec,
    pub ucie_link: UcieSpec,
    #[serde(default)]
    pub pcie: PcieSpec,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Corner {
    Nw,
    Ne,
    Sw,
    Se,
}

impl Corner {
    pub fn name(self) -> &'static str {
        match self {
            Corner::Nw => "nw",
            Corner::Ne => "ne",
            Corner::Sw => "sw",
            Corner::Se => "se",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct PeLayoutSpec {
    pub corners: Vec<Corner>,
    pub pe_per_corner: u32,
}

/// A rectangle of NoC grid positions (column `x`, row `y`, size `w × h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Rect {
    pub x: u32,
    pub y: u32,
    pub w: u32,
    pub h: u32,
}

impl Rect {
    pub fn contains(&self, x: u32, y: u32) -> bool {
        x >= self.x && x < self.x + self.w && y >= self.y && y < self.y + self.h
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HbmSpec {
    /// HBM stacks per cube; each is its own memory node. A cube's HBM
    /// address space is the stacks one after another.
    #[serde(default = "one")]
    pub stacks: u32,
    /// Per stack.
    pub size_gib: f64,
    /// Per stack.
    pub bandwidth_gbps: f64,
    pub latency_ns: f64,
    /// Router positions the HBM stacks occupy (no routers are placed
    /// there); the stacks attach to the nearest routers around it.
    /// Default: no zone, stacks on the north edge.
    pub exclusion_zone: Option<Rect>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SramSpec {
    pub size_mib: f64,
    pub bandwidth_gbps: f64,
    pub latency_ns: f64,
}

impl HbmSpec {
    /// A stack's link to its router.
    pub fn link(&self) -> LinkSpec {
        LinkSpec {
            bandwidth_gbps: self.bandwidth_gbps,
            latency_ns: self.latency_ns,
        }
    }
}

impl SramSpec {
    /// The SRAM's link to its router.
    pub fn link(&self) -> LinkSpec {
        LinkSpec {
            bandwidth_gbps: self.bandwidth_gbps,
            latency_ns: self.latency_ns,
        }
    }
}

/// The cube's management CPU: a node on the NoC (centre of the cube)
/// whose DMAs stay inside its SIP.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MCpuSpec {
    pub bandwidth_gbps: f64,
    pub latency_ns: f64,
}

impl Default for MCpuSpec {
    fn default() -> Self {
        MCpuSpec {
            bandwidth_gbps: 64.0,
            latency_ns: 1.0,
        }
    }
}

impl MCpuSpec {
    pub fn link(&self) -> LinkSpec {
        LinkSpec {
            bandwidth_gbps: self.bandwidth_gbps,
            latency_ns: self.latency_ns,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CubeSpec {
    pub noc: NocSpec,
    pub pe_layout: PeLayoutSpec,
    pub hbm: HbmSpec,
    pub sram: SramSpec,
    #[serde(default)]
    pub m_cpu: MCpuSpec,
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

/// The PE's matrix unit (`tl.gemm`): a command on `[m, k] x [k, n]` takes
/// `overhead + 2·m·n·k / throughput` of its input dtype.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GemmSpec {
    pub overhead_ns: f64,
    /// FLOP/s (x1e12) by input dtype (a multiply-add is 2 FLOPs).
    pub throughput_tflops: GemmRates,
    /// The largest m, n and k one command takes (a bigger product is
    /// tiled by the kernel).
    pub max_m: u32,
    pub max_n: u32,
    pub max_k: u32,
}

/// The matrix unit's TFLOP/s by input dtype. f16, bf16, f32 and i32 are
/// required; the others, when absent, follow from them as a systolic
/// array's do: i8 / u8 at twice the f16 rate, u32 at the i32 rate, i64 /
/// u64 at half of it, f64 at a quarter of the f32 rate.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GemmRates {
    pub f16: f64,
    pub bf16: f64,
    pub f32: f64,
    pub i32: f64,
    #[serde(default)]
    pub i8: Option<f64>,
    #[serde(default)]
    pub u8: Option<f64>,
    #[serde(default)]
    pub u32: Option<f64>,
    #[serde(default)]
    pub i64: Option<f64>,
    #[serde(default)]
    pub u64: Option<f64>,
    #[serde(default)]
    pub f64: Option<f64>,
}

impl GemmRates {
    /// The TFLOP/s for inputs of `dt` (see the type's doc for the rates
    /// that are not given).
    pub fn rate(&self, dt: crate::hw::dtype::Dtype) -> f64 {
        use crate::hw::dtype::Dtype;
        match dt {
            Dtype::F16 => self.f16,
            Dtype::Bf16 => self.bf16,
            Dtype::F32 => self.f32,
            Dtype::I32 => self.i32,
            Dtype::I8 => self.i8.unwrap_or(2.0 * self.f16),
            Dtype::U8 => self.u8.unwrap_or(2.0 * self.f16),
            Dtype::U32 => self.u32.unwrap_or(self.i32),
            Dtype::I64 => self.i64.unwrap_or(self.i32 / 2.0),
            Dtype::U64 => self.u64.unwrap_or(self.i32 / 2.0),
            Dtype::F64 => self.f64.unwrap_or(self.f32 / 4.0),
        }
    }
}

impl Default for GemmSpec {
    /// A 128 x 128 systolic array at 2 GHz: 128·128·2e9 multiply-adds/s
    /// = 65.5 TFLOP/s in f16 / bf16, f32 at a quarter, i32 at half; 50 ns
    /// to fill and drain the array per command.
    fn default() -> Self {
        GemmSpec {
            overhead_ns: 50.0,
            throughput_tflops: GemmRates {
                f16: 65.536,
                bf16: 65.536,
                f32: 16.384,
                i32: 32.768,
                i8: None,
                u8: None,
                u32: None,
                i64: None,
                u64: None,
                f64: None,
            },
            max_m: 4096,
            max_n: 4096,
            max_k: 4096,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeSpec {
    pub tcm_kib: u64,
    pub attach: LinkSpec,
    pub dma: DmaSpec,
    pub math: MathSpec,
    /// Absent: [`GemmSpec::default`].
    #[serde(default)]
    pub gemm: GemmSpec,
}

/// The whole topology.yaml.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    pub system: SystemSpec,
    pub sip: SipSpec,
    pub cube: CubeSpec,
    pub pe: PeSpec,
    /// Chosen SIPs' and links' own figures (absent: none).
    #[serde(default)]
    pub overrides: super::overrides::Overrides,
}

/// Upper bound on the graph size a topology may ask for.
pub const MAX_NODES: u64 = 4_000_000;

impl TopologySpec {
    /// Pipeline stages 1 and 2: parse, then validate.
    pub fn from_yaml(text: &str, origin: Origin) -> Result<Self, ConfigError> {
        let spec = Self::parse(text, &origin)?;
        spec.validate()
            .map_err(|message| ConfigError::Invalid { origin, message })?;
        Ok(spec)
    }

    /// Stage 1: YAML to the typed spec. Unknown keys, missing keys and
    /// wrong types are errors naming the key, line and column.
    pub fn parse(text: &str, origin: &Origin) -> Result<Self, ConfigError> {
        serde_yaml::from_str(text).map_err(|e| ConfigError::Parse {
            origin: origin.clone(),
            message: e.to_string(),
        })
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
    /// (cubes per SIP, PEs per cube): the dimensions of the (SIP, cube,
    /// PE) order of [`crate::topology::PeCoord::flat_index`].
    pub fn pe_dims(&self) -> (u32, u32) {
        (self.cubes_per_sip(), self.pes_per_cube())
    }

    pub fn pes_per_cube(&self) -> u32 {
        self.cube.pe_layout.corners.len() as u32 * self.cube.pe_layout.pe_per_corner
    }

    /// Bytes of one HBM stack.
    pub fn hbm_stack_bytes(&self) -> u64 {
        (self.cube.hbm.size_gib * (1u64 << 30) as f64) as u64
    }

    /// The cube each PCIe endpoint of a SIP hangs off.
    pub fn pcie_cubes(&self) -> Vec<u32> {
        let p = &self.sip.pcie;
        match &p.cubes {
            Some(c) => c.clone(),
            None => (0..p.endpoints)
                .map(|e| e * self.cubes_per_sip() / p.endpoints)
                .collect(),
        }
    }

    /// SIP grid `(w, h)`: `(count, 1)` for a ring; for the 2-D
    /// topologies the explicit `w`/`h`, one of them and `count / it`, or
    /// both the integer square root of `count` (seed ADR-0047 D2). The
    /// result is checked (`w*h == count`) by validation.
    pub fn sip_grid(&self) -> (u32, u32) {
        let s = &self.system.sips;
        match s.topology {
            SipTopology::Ring1d => (s.count, 1),
            _ => match (s.w, s.h) {
                (Some(w), Some(h)) => (w, h),
                (Some(w), None) => (w, s.count / w.max(1)),
                (None, Some(h)) => (s.count / h.max(1), h),
                (None, None) => {
                    let r = s.count.isqrt();
                    (r, r)
                }
            },
        }
    }

    /// Stage 2: semantic checks. The message names the key.
    pub fn validate(&self) -> Result<(), String> {
        let s = &self.system.sips;
        self.overrides.validate(s.count.min(4096))?;
        if s.count == 0 || s.count > 4096 {
            return Err(format!(
                "system.sips.count must be in 1..=4096, got {}",
                s.count
            ));
        }
        if s.topology == SipTopology::Ring1d {
            if s.w.is_some() || s.h.is_some() {
                return Err(
                    "system.sips.w/h apply to torus_2d and mesh_2d_no_wrap only; remove them for ring_1d"
                        .into(),
                );
            }
        } else {
            let (w, h) = self.sip_grid();
            if w as u64 * h as u64 != s.count as u64 {
                let how = match (s.w, s.h) {
                    (None, None) => format!(
                        "{} is not a perfect square: give system.sips.w and system.sips.h",
                        s.count
                    ),
                    _ => format!("got w={w} h={h}"),
                };
                return Err(format!(
                    "system.sips: {} needs w*h == count ({}), {how}",
                    s.topology.name(),
                    s.count
                ));
            }
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
        // The compiled graph holds every router, PE and memory of every
        // cube: bound it before building it (~400 bytes of host memory a
        // node, with its links and routing tables).
        let per_cube = self.cube.noc.w as u64 * self.cube.noc.h as u64
            + pl.corners.len() as u64 * pl.pe_per_corner as u64
            + self.cube.hbm.stacks as u64
            + 8;
        let nodes =
            s.count as u64 * self.sip.cube_mesh.w as u64 * self.sip.cube_mesh.h as u64 * per_cube;
        if nodes > MAX_GRAPH_NODES {
            return Err(format!(
                "the machine would have about {nodes} nodes ({} SIPs x {} cubes x {per_cube} nodes per cube); \
                 at most {MAX_GRAPH_NODES} are supported: make system.sips.count, sip.cube_mesh or cube.noc smaller",
                s.count,
                self.sip.cube_mesh.w * self.sip.cube_mesh.h
            ));
        }
        if pl.corners.is_empty() || pl.pe_per_corner == 0 || self.pes_per_cube() > 256 {
            return Err(format!(
                "cube.pe_layout needs 1..=256 PEs (corners x pe_per_corner), got {} x {}",
                pl.corners.len(),
                pl.pe_per_corner
            ));
        }
        for (i, c) in pl.corners.iter().enumerate() {
            if pl.corners[..i].contains(c) {
                return Err(format!(
                    "cube.pe_layout.corners lists '{}' twice (use pe_per_corner for more PEs per corner)",
                    c.name()
                ));
            }
        }
        let ranged = [
            (
                "sip.ucie_link.ports_per_edge",
                self.sip.ucie_link.ports_per_edge,
                1,
                16,
            ),
            ("cube.hbm.stacks", self.cube.hbm.stacks, 1, 16),
            ("sip.pcie.endpoints", self.sip.pcie.endpoints, 0, 16),
        ];
        for (name, v, lo, hi) in ranged {
            if v < lo || v > hi {
                return Err(format!("{name} must be in {lo}..={hi}, got {v}"));
            }
        }
        if let Some(cubes) = &self.sip.pcie.cubes {
            if cubes.len() != self.sip.pcie.endpoints as usize {
                return Err(format!(
                    "sip.pcie.cubes lists {} cubes for {} endpoints",
                    cubes.len(),
                    self.sip.pcie.endpoints
                ));
            }
            if let Some(c) = cubes.iter().find(|&&c| c >= self.cubes_per_sip()) {
                return Err(format!(
                    "sip.pcie.cubes: cube {c} does not exist (a SIP has {} cubes)",
                    self.cubes_per_sip()
                ));
            }
        }
        if let Some(z) = self.cube.hbm.exclusion_zone {
            let (w, h) = (self.cube.noc.w, self.cube.noc.h);
            if z.w == 0 || z.h == 0 || z.x + z.w > w || z.y + z.h > h {
                return Err(format!(
                    "cube.hbm.exclusion_zone {{x: {}, y: {}, w: {}, h: {}}} must be a non-empty rectangle inside the {w}x{h} NoC",
                    z.x, z.y, z.w, z.h
                ));
            }
            if z.w == w && z.h == h {
                return Err(
                    "cube.hbm.exclusion_zone covers the whole NoC: no router is left".into(),
                );
            }
        }
        let rates = [
            (
                "system.inter_sip_link.bandwidth_gbps",
                self.system.inter_sip_link.bandwidth_gbps,
            ),
            (
                "sip.ucie_link.bandwidth_gbps",
                self.sip.ucie_link.bandwidth_gbps,
            ),
            ("sip.pcie.bandwidth_gbps", self.sip.pcie.bandwidth_gbps),
            (
                "cube.noc.link_bandwidth_gbps",
                self.cube.noc.link_bandwidth_gbps,
            ),
            ("cube.hbm.bandwidth_gbps", self.cube.hbm.bandwidth_gbps),
            ("cube.sram.bandwidth_gbps", self.cube.sram.bandwidth_gbps),
            ("cube.m_cpu.bandwidth_gbps", self.cube.m_cpu.bandwidth_gbps),
            ("pe.attach.bandwidth_gbps", self.pe.attach.bandwidth_gbps),
        ];
        for (name, v) in rates {
            units::check_figure(name, v, units::BANDWIDTH_GBPS)?;
        }
        units::check_figure(
            "pe.math.throughput_gflops",
            self.pe.math.throughput_gflops,
            units::THROUGHPUT_GFLOPS,
        )?;
        let g = &self.pe.gemm;
        let r = &g.throughput_tflops;
        let given = [
            ("f16", Some(r.f16)),
            ("bf16", Some(r.bf16)),
            ("f32", Some(r.f32)),
            ("i32", Some(r.i32)),
            ("i8", r.i8),
            ("u8", r.u8),
            ("u32", r.u32),
            ("i64", r.i64),
            ("u64", r.u64),
            ("f64", r.f64),
        ];
        for (dt, v) in given {
            // The same range as the vector unit's, in units of 1e3 more;
            // a rate that follows from these is not a figure of the file.
            if let Some(v) = v {
                let name = format!("pe.gemm.throughput_tflops.{dt}");
                units::check_figure(&name, v * 1000.0, units::THROUGHPUT_GFLOPS)?;
            }
        }
        for (name, v) in [
            ("pe.gemm.max_m", g.max_m),
            ("pe.gemm.max_n", g.max_n),
            ("pe.gemm.max_k", g.max_k),
        ] {
            if v == 0 || v > 1 << 20 {
                return Err(format!("{name} must be in 1..=1048576, got {v}"));
            }
        }
        for (name, v) in [
            ("cube.hbm.size_gib", self.cube.hbm.size_gib),
            ("cube.sram.size_mib", self.cube.sram.size_mib),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("{name} must be a positive number, got {v}"));
            }
        }
        let latencies = [
            (
                "system.inter_sip_link.latency_ns",
                self.system.inter_sip_link.latency_ns,
            ),
            ("sip.ucie_link.latency_ns", self.sip.ucie_link.latency_ns),
            ("sip.pcie.latency_ns", self.sip.pcie.latency_ns),
            ("cube.noc.hop_latency_ns", self.cube.noc.hop_latency_ns),
            ("cube.hbm.latency_ns", self.cube.hbm.latency_ns),
            ("cube.sram.latency_ns", self.cube.sram.latency_ns),
            ("cube.m_cpu.latency_ns", self.cube.m_cpu.latency_ns),
            ("pe.attach.latency_ns", self.pe.attach.latency_ns),
            ("pe.dma.setup_ns", self.pe.dma.setup_ns),
            ("pe.math.overhead_ns", self.pe.math.overhead_ns),
            ("pe.gemm.overhead_ns", self.pe.gemm.overhead_ns),
        ];
        for (name, v) in latencies {
            units::check_figure(name, v, units::LATENCY_NS)?;
        }
        if self.pe.tcm_kib == 0 || self.pe.tcm_kib > 256 * 1024 {
            return Err(format!(
                "pe.tcm_kib must be in 1..=262144 (256 MiB, the TCM address range), got {}",
                self.pe.tcm_kib
            ));
        }
        if self.hbm_stack_bytes() as u128 * self.cube.hbm.stacks as u128 > 1u128 << 36 {
            return Err(format!(
                "cube.hbm: {} stacks x {} GiB exceed the 64 GiB a cube's HBM address range holds",
                self.cube.hbm.stacks, self.cube.hbm.size_gib
            ));
        }
        if self.cube.sram.size_mib > 64.0 * 1024.0 {
            return Err(format!(
                "cube.sram.size_mib must be at most 65536 (64 GiB address range), got {}",
                self.cube.sram.size_mib
            ));
        }
        let per_cube = (self.cube.noc.w * self.cube.noc.h
            + self.pes_per_cube()
            + self.cube.hbm.stacks
            + 2
            + 4 * self.sip.ucie_link.ports_per_edge) as u64;
        let nodes = per_cube * self.cubes_per_sip() as u64 * s.count as u64;
        if nodes > MAX_NODES {
            return Err(format!(
                "the machine would have about {nodes} graph nodes ({} SIPs x {} cubes x {per_cube}); the limit is {MAX_NODES}",
                s.count,
                self.cubes_per_sip()
            ));
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
    fn sip_grid_square_root_and_explicit() {
        let with = |count: &str, extra: &str| {
            let text = super::super::DEFAULT_TOPOLOGY_YAML
                .replace("count: 4", &format!("count: {count}{extra}"))
                .replace("topology: ring_1d ", "topology: torus_2d ");
            TopologySpec::from_yaml(&text, Origin::Embedded("t"))
        };
        assert_eq!(with("16", "").unwrap().sip_grid(), (4, 4));
        assert_eq!(with("64", "").unwrap().sip_grid(), (8, 8));
        assert_eq!(with("8", "\n    w: 4").unwrap().sip_grid(), (4, 2));
        assert_eq!(with("8", "\n    h: 4").unwrap().sip_grid(), (2, 4));
        let e = with("8", "").unwrap_err().to_string();
        assert!(e.contains("not a perfect square"), "{e}");
        let e = with("8", "\n    w: 3").unwrap_err().to_string();
        assert!(e.contains("w*h == count (8), got w=3 h=2"), "{e}");
    }

    #[test]
    fn new_keys_are_checked_by_name() {
        let bad = |from: &str, to: &str, expect: &str| {
            let text = super::super::DEFAULT_TOPOLOGY_YAML.replace(from, to);
            assert_ne!(text, super::super::DEFAULT_TOPOLOGY_YAML, "{from}");
            let e = TopologySpec::from_yaml(&text, Origin::Embedded("t"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(expect), "{e} lacks {expect}");
        };
        bad(
            "stacks: 1",
            "stacks: 0",
            "cube.hbm.stacks must be in 1..=16",
        );
        bad(
            "ports_per_edge: 1",
            "ports_per_edge: 40",
            "sip.ucie_link.ports_per_edge",
        );
        bad(
            "endpoints: 1",
            "endpoints: 2\n    cubes: [0]",
            "sip.pcie.cubes lists 1 cubes for 2",
        );
        bad(
            "endpoints: 1",
            "endpoints: 1\n    cubes: [16]",
            "cube 16 does not exist",
        );
        bad(
            "exclusion_zone: null",
            "exclusion_zone: {x: 3, y: 0, w: 2, h: 1}",
            "inside the 4x4 NoC",
        );
        bad(
            "corners: [nw, ne, sw, se]",
            "corners: [nw, nw]",
            "lists 'nw' twice",
        );
        bad(
            "corners: [nw, ne, sw, se]",
            "corners: [nw, middle]",
            "unknown variant `middle`",
        );
        bad(
            "w: 4\n    h: 4\n  ucie",
            "w: 0\n    h: 4\n  ucie",
            "sip.cube_mesh must be between",
        );
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
