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
//!
//! Every op and dtype: `sum`, `prod`, `max`, `min` combine in phases 1
//! and 2; `avg` sums, and cube 0 of each SIP scales the total by
//! `1/(p · cubes)` (every tile of every SIP is a contribution) before
//! phase 3.

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

/// Kernel args after the call ([`Call::to_args`]): the cube mesh.
const OWN_ARGS: usize = CALL_ARGS + 2;

impl Algorithm for LrabHierarchicalAllreduce {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        let call = Call::from_args(args);
        let (cube_w, cube_h) = (args[CALL_ARGS] as u32, args[CALL_ARGS + 1] as u32);
        let host = HostArgs::after(args, OWN_ARGS, t_ptr);
        let (n, n_sips, dt) = (call.block as u32, call.world_size, call.dtype);
        let (sip_rank, sip_w, sip_h) = (host.sip_rank, host.sip_topo_w, host.sip_topo_h);
        let phase = sip_phase(host.sip_topo_kind).unwrap_or_else(|e| panic!("{e}"));
        let cube = tl.program_id(1) as u32;
        let addr = t_ptr + cube as u64 * n as u64 * dt.itemsize() as u64;
        // Out of place the result goes to the output's tile of the cube.
        let out = host.out_ptr + cube as u64 * n as u64 * dt.itemsize() as u64;
        let single_cube = cube_w == 1 && cube_h == 1;
        let (cx, cy) = (cube % cube_w, cube / cube_w);

        let contributions = n_sips.saturating_mul(cube_w * cube_h);
        let red = Reduction::of(&call, &host, contributions);
        let (tile, combine) = ((&[n][..], dt), red.combine);
        let mut acc = red.load(tl, addr, n as u64, dt);
        if !single_cube {
            acc = reduce_line(tl, acc, (cx, cube_w), ("W", "E"), tile, combine);
            if cx == 0 {
                acc = reduce_line(tl, acc, (cy, cube_h), ("N", "S"), tile, combine);
            }
        }
        if cube == 0 {
            acc = match phase {
                SipPhase::Ring => ring(tl, acc, n_sips, ("global_E", "global_W"), tile, combine),
                SipPhase::Torus => {
                    let row = ring(tl, acc, sip_w, ("global_E", "global_W"), tile, combine);
                    ring(tl, row, sip_h, ("global_S", "global_N"), tile, combine)
                }
                SipPhase::Mesh => {
                    let (x, y) = (sip_rank % sip_w, sip_rank / sip_w);
                    let dirs = ("global_W", "global_E");
                    let row = allreduce_line(tl, acc, (x, sip_w), dirs, tile, combine);
                    let dirs = ("global_N", "global_S");
                    allreduce_line(tl, row, (y, sip_h), dirs, tile, combine)
                }
            };
            acc = red.finished(tl, acc);
        }
        if !single_cube {
            if cx == 0 {
                acc = broadcast_line(tl, acc, (cy, cube_h), ("N", "S"), tile);
            }
            acc = broadcast_line(tl, acc, (cx, cube_w), ("W", "E"), tile);
        }
        tl.store(out, &acc);
    }

    fn out_of_place() -> Vec<Collective> {
        vec![Collective::AllReduce]
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
        let mut args = Call::all_reduce(n_elem, world_size).to_args();
        args.extend([cube_w as i64, cube_h as i64]);
        args
    }

    fn kernel_args_for(call: &Call, params: &Params) -> Result<Vec<i64>, String> {
        // A tile goes in one message: no parameter.
        let mut args = call_args(call, params, Collective::AllReduce)?;
        args.extend([call.cube_w.max(1) as i64, call.cube_h.max(1) as i64]);
        Ok(args)
    }
}

kernbench_guest::export_algorithm!(LrabHierarchicalAllreduce);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{assert_allreduce_sums, assert_collective_on, MockConfig};

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

    #[test]
    fn every_op_and_dtype_reduces_exactly_on_single_cube_sips() {
        for dtype in Dtype::ALL {
            for op in RedOp::ALL {
                for ws in [1u32, 2, 3, 4, 5, 8] {
                    let call = Call {
                        dtype,
                        op,
                        ..Call::all_reduce(5, ws)
                    };
                    let params = Params::new(vec![]);
                    assert_collective_on::<LrabHierarchicalAllreduce>(
                        &call,
                        &params,
                        "global_ring",
                        0,
                    );
                }
            }
        }
    }
}
