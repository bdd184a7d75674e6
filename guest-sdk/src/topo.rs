//! SIP topology kinds passed to kernels as `sip_topo_kind` (ADR-0050 D1).

pub const SIP_TOPO_RING: i32 = 0;
pub const SIP_TOPO_TORUS: i32 = 1;
pub const SIP_TOPO_MESH: i32 = 2;

/// The standard `TOPO_NAME_TO_KIND` map; algorithms that do not override
/// [`crate::Algorithm::topo_name_to_kind`] use it.
pub fn standard_kind(name: &str) -> Option<i32> {
    match name {
        "ring_1d" => Some(SIP_TOPO_RING),
        "torus_2d" => Some(SIP_TOPO_TORUS),
        "mesh_2d_no_wrap" => Some(SIP_TOPO_MESH),
        _ => None,
    }
}
