//! Test kernel: `va_probe` with a layout bug — it numbers the shards
//! PE-major (`j = pe · 2 + cube`) instead of the placement's (cube, PE)
//! order, so on 2 cubes × 2 PEs shards 1 and 2 read and write each other's
//! bytes. `va_offset_verify --kernel` must report them wrong.

use kernbench_guest::prelude::*;

pub struct SwappedVaProbe;

impl Algorithm for SwappedVaProbe {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        kernbench_guest::kernels::va_probe(tl, t_ptr, args, |tl, _| {
            tl.program_id(0) as u64 * 2 + tl.program_id(1) as u64
        });
    }

    fn kernel_args(_world_size: u32, _n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        Vec::new()
    }
}

kernbench_guest::export_algorithm!(SwappedVaProbe);
