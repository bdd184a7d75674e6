//! Hierarchical all-reduce (the seed's `lrab_hierarchical_allreduce`, seed
//! ADR-0050 D1–D5): one kernel per cube (mapper `cube_leaders`), each
//! owning the tile `t_ptr + cube_id · nbytes` of its SIP (a tensor placed
//! row-wise over the cubes), on the `intercube_multisip` IPCQ table.
//! Every tile of every SIP ends holding the sum of all tiles of all SIPs.
//!
//! 1. **Reduce inside the SIP** over the cube mesh: partial sums flow west
//!    along each row of cubes, then north along the first column, so cube
//!    (0, 0) holds the SIP's sum. Skipped on a single cube.
//! 2. **Across SIPs**, on cube 0 only, by the SIP network's kind
//!    (`sip_topo_kind`): ring — the seed's ring over `global_E` /
//!    `global_W`; torus — that ring along each row of SIPs, then along each
//!    column (`global_S` / `global_N`); mesh without wrap — a line
//!    all-reduce along rows, then columns. Any other kind is refused with
//!    the seed's `ValueError` (ADR-0050 D5).
//! 3. **Broadcast inside the SIP**: back south along the first column, then
//!    east along each row.

use kernbench_guest::helpers::{
    allreduce_line, broadcast_line, reduce_line, ring_allreduce as ring,
};
use kernbench_guest::prelude::*;
use kernbench_guest::topo::{SIP_TOPO_MESH, SIP_TOPO_RING, SIP_TOPO_TORUS};

pub struct LrabHierarchicalAllreduce;

/// The SIP-level phase a topology kind selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SipPhase {
    Ring,
    Torus,
    Mesh,
}

/// ADR-0050 D5: fail fast on a kind this algorithm does not implement.
pub fn sip_phase(kind: i64) -> Result<SipPhase, String> {
    match kind as i32 {
        SIP_TOPO_RING => Ok(SipPhase::Ring),
        SIP_TOPO_TORUS => Ok(SipPhase::Torus),
        SIP_TOPO_MESH => Ok(SipPhase::Mesh),
        other => Err(format!("ValueError: unsupported topology kind {other}")),
    }
}

impl Algorithm for LrabHierarchicalAllreduce {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        let (n, cube_w, cube_h, n_sips) = (
            args[0] as u32,
            args[1] as u32,
            args[2] as u32,
            args[3] as u32,
        );
        let k = args.len() - 4;
        let (sip_rank, kind) = (args[k] as u32, args[k + 1]);
        let (sip_w, sip_h) = (args[k + 2] as u32, args[k + 3] as u32);
        let phase = sip_phase(kind).unwrap_or_else(|e| panic!("{e}"));
        let cube = tl.program_id(1) as u32;
        let addr = t_ptr + cube as u64 * n as u64 * Dtype::F16.itemsize() as u64;
        let single_cube = cube_w == 1 && cube_h == 1;
        let (cx, cy) = (cube % cube_w, cube / cube_w);

        let tile = (&[n][..], Dtype::F16);
        let mut acc = tl.load(addr, &[n], Dtype::F16);
        if !single_cube {
            acc = reduce_line(tl, acc, (cx, cube_w), ("W", "E"), tile);
            if cx == 0 {
                acc = reduce_line(tl, acc, (cy, cube_h), ("N", "S"), tile);
            }
        }
        if cube == 0 {
            acc = match phase {
                SipPhase::Ring => ring(tl, acc, n_sips, ("global_E", "global_W"), tile),
                SipPhase::Torus => {
                    let row = ring(tl, acc, sip_w, ("global_E", "global_W"), tile);
                    ring(tl, row, sip_h, ("global_S", "global_N"), tile)
                }
                SipPhase::Mesh => {
                    let (x, y) = (sip_rank % sip_w, sip_rank / sip_w);
                    let row = allreduce_line(tl, acc, (x, sip_w), ("global_W", "global_E"), tile);
                    allreduce_line(tl, row, (y, sip_h), ("global_N", "global_S"), tile)
                }
            };
        }
        if !single_cube {
            if cx == 0 {
                acc = broadcast_line(tl, acc, (cy, cube_h), ("N", "S"), tile);
            }
            acc = broadcast_line(tl, acc, (cx, cube_w), ("W", "E"), tile);
        }
        tl.store(addr, &acc);
    }

    /// What the seed's ccl.yaml entry (`module:` only, ADR-0050 D6) needs:
    /// the hierarchical table, one kernel per cube, slots in SRAM (a cube
    /// leader has up to 8 directions: 8 x 3 slots of 1 MiB fit a default
    /// cube's 32 MiB; with 2 a ring of 5 SIPs waits for slot credits), and
    /// a tensor with one shard per cube.
    fn entry_defaults() -> EntryDefaults {
        EntryDefaults {
            topology: Some("intercube_multisip"),
            mapper: Some("cube_leaders"),
            buffer_kind: Some("sram"),
            n_slots: Some(3),
            slot_size: Some(1 << 20),
            validator: Some("one_shard_per_cube"),
        }
    }

    fn kernel_args(world_size: u32, n_elem: u64, cube_w: u32, cube_h: u32) -> Vec<i64> {
        vec![
            n_elem as i64,
            cube_w as i64,
            cube_h as i64,
            world_size as i64,
        ]
    }
}

kernbench_guest::export_algorithm!(LrabHierarchicalAllreduce);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{assert_allreduce_sums, MockConfig};

    #[test]
    fn an_unsupported_kind_is_the_seeds_value_error() {
        assert_eq!(sip_phase(1), Ok(SipPhase::Torus));
        assert_eq!(
            sip_phase(7),
            Err("ValueError: unsupported topology kind 7".into())
        );
    }

    #[test]
    fn on_single_cube_sips_it_is_the_seed_ring_in_the_mock() {
        // One cube per SIP: phases 1 and 3 are skipped and cube 0 runs the
        // ring; the mock's ring_1d table uses E / W, so it stands in for
        // global_E / global_W through a table of its own names.
        for ws in [1u32, 2, 3, 5] {
            let args = LrabHierarchicalAllreduce::kernel_args(ws, 8, 1, 1);
            let cfg = MockConfig::new("global_ring", ws, Dtype::F16, args);
            assert_allreduce_sums::<LrabHierarchicalAllreduce>(&cfg, 8);
        }
    }
}
