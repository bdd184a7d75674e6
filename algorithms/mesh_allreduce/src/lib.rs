//! 2-D mesh all-reduce over the `mesh_2d` IPCQ table: ranks sit row-major
//! on the SIP grid (w × h; a 1-D SIP ring is one row of p), neighbours
//! N/S/E/W without wrap-around.
//!
//! Row phase: partial sums flow west along each row (the east end sends
//! first), the west end holds the row sum and sends it back east. Column
//! phase: the same with the row sums, flowing north and back south. Every
//! rank's tile ends holding the total. Uncontended, a phase over a line of
//! k ranks costs 2(k−1) messages plus k−1 adds on the critical path.

use kernbench_guest::helpers::allreduce_line;
use kernbench_guest::prelude::*;

pub struct MeshAllreduce;

impl Algorithm for MeshAllreduce {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        let (n_elem, world_size) = (args[0] as u32, args[1] as u32);
        let k = args.len() - 4;
        let (rank, grid_w) = (args[k] as u32, args[k + 2] as u32);
        // A 1-D SIP ring has no grid: the table lays the ranks in one row.
        let w = if grid_w == 0 { world_size } else { grid_w };
        let h = world_size / w;
        let (x, y) = (rank % w, rank / w);
        let addr = pe_tile_addr(tl, t_ptr, n_elem as u64, Dtype::F16);

        let tile = (&[n_elem][..], Dtype::F16);
        let acc = tl.load(addr, &[n_elem], Dtype::F16);
        let acc = allreduce_line(tl, acc, (x, w), ("W", "E"), tile);
        let acc = allreduce_line(tl, acc, (y, h), ("N", "S"), tile);
        tl.store(addr, &acc);
    }

    fn kernel_args(world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        vec![n_elem as i64, world_size as i64]
    }
}

kernbench_guest::export_algorithm!(MeshAllreduce);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{assert_allreduce_sums, MockConfig};

    #[test]
    fn every_rank_gets_the_sum_in_the_mock() {
        for (ws, w) in [(1u32, 1u32), (3, 3), (4, 2), (6, 3), (6, 2), (9, 3)] {
            let args = MeshAllreduce::kernel_args(ws, 8, 4, 4);
            let mut cfg = MockConfig::new("mesh_2d", ws, Dtype::F16, args);
            cfg.grid_w = w;
            assert_allreduce_sums::<MeshAllreduce>(&cfg, 8);
        }
    }
}
