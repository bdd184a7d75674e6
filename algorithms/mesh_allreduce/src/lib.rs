//! 2-D mesh all-reduce over the `mesh_2d` IPCQ table: ranks sit row-major
//! on the SIP grid (w × h; a 1-D SIP ring is one row of p), neighbours
//! N/S/E/W without wrap-around.
//!
//! Row phase: partial sums flow west along each row (the east end sends
//! first), the west end holds the row sum and sends it back east. Column
//! phase: the same with the row sums, flowing north and back south. Every
//! rank's tile ends holding the total. Uncontended, a phase over a line of
//! k ranks costs 2(k−1) messages plus k−1 adds on the critical path.
//!
//! Every op and dtype: `sum`, `prod`, `max`, `min` combine on the way to
//! a line's west (north) end; `avg` sums, and the north end of each
//! column scales the total by `1/p` once before sending it back south
//! (every column reduces the same row results in the same order, so every
//! rank gets the same bytes).

use kernbench_guest::helpers::{allreduce_line, broadcast_line, reduce_line};
use kernbench_guest::prelude::*;

pub struct MeshAllreduce;

impl Algorithm for MeshAllreduce {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        let call = Call::from_args(args);
        let host = HostArgs::after(args, CALL_ARGS, t_ptr);
        let (n_elem, world_size, dt) = (call.block as u32, call.world_size, call.dtype);
        let (rank, grid_w) = (host.sip_rank, host.sip_topo_w);
        // A 1-D SIP ring has no grid: the table lays the ranks in one row.
        let w = if grid_w == 0 { world_size } else { grid_w };
        let h = world_size / w;
        let (x, y) = (rank % w, rank / w);
        let addr = pe_tile_addr(tl, t_ptr, n_elem as u64, dt);
        // Out of place the result goes to the output's tile.
        let out = pe_tile_addr(tl, host.out_ptr, n_elem as u64, dt);

        let red = Reduction::of(&call, &host, world_size);
        let (tile, combine) = ((&[n_elem][..], dt), red.combine);
        let acc = red.load(tl, addr, n_elem as u64, dt);
        let acc = allreduce_line(tl, acc, (x, w), ("W", "E"), tile, combine);
        let mut acc = reduce_line(tl, acc, (y, h), ("N", "S"), tile, combine);
        if y == 0 {
            acc = red.finished(tl, acc);
        }
        let acc = broadcast_line(tl, acc, (y, h), ("N", "S"), tile);
        tl.store(out, &acc);
    }

    fn out_of_place() -> Vec<Collective> {
        vec![Collective::AllReduce]
    }

    /// The mesh's table, for an entry that names none.
    fn entry_defaults() -> EntryDefaults {
        EntryDefaults {
            topology: Some("mesh_2d"),
            ..EntryDefaults::default()
        }
    }

    fn kernel_args(world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        Call::all_reduce(n_elem, world_size).to_args()
    }

    fn kernel_args_for(call: &Call, params: &Params) -> Result<Vec<i64>, String> {
        // The tile goes in one message: no parameter.
        call_args(call, params, Collective::AllReduce)
    }
}

kernbench_guest::export_algorithm!(MeshAllreduce);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{assert_allreduce_sums, assert_collective_on, MockConfig};

    #[test]
    fn every_rank_gets_the_sum_in_the_mock() {
        for (ws, w) in [(1u32, 1u32), (3, 3), (4, 2), (6, 3), (6, 2), (9, 3)] {
            let args = MeshAllreduce::kernel_args(ws, 8, 4, 4);
            let mut cfg = MockConfig::new("mesh_2d", ws, Dtype::F16, args);
            cfg.grid_w = w;
            assert_allreduce_sums::<MeshAllreduce>(&cfg, 8);
        }
    }

    #[test]
    fn every_op_and_dtype_reduces_exactly_on_any_grid() {
        for dtype in Dtype::ALL {
            for op in RedOp::ALL {
                for (ws, w) in [(2u32, 2u32), (3, 3), (4, 2), (5, 5), (8, 4), (8, 2), (6, 3)] {
                    let call = Call {
                        dtype,
                        op,
                        ..Call::all_reduce(5, ws)
                    };
                    assert_collective_on::<MeshAllreduce>(
                        &call,
                        &Params::new(vec![]),
                        "mesh_2d",
                        w,
                    );
                }
            }
        }
    }
}
