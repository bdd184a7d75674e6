//! `va_probe`: a kernel `va_offset_verify` launches on every PE holding a
//! shard of a placed tensor. Shard `j` (`j = cube · num_pes + pe`, the
//! (cube, PE) order of the placement) is reached through the tensor's
//! virtual range at `t_ptr + j · shard_bytes` (seed ADR-0050 D3). The PE
//! loads its `[rows, cols]` shard from there, copies it to
//! `out_ptr + j · shard_bytes` (a gather the bench compares with the
//! placement's `ShardSpec`s) and writes it back doubled, in place (which
//! the bench reads back through the host's view of the tensor), and signs
//! its work: its (cube, PE) at `who_ptr + 2j` (built from `exp(x − x) = 1`
//! scaled: the kernel language has no constants), so the bench sees which
//! PE reached shard `j`.
//!
//! Arguments: `rows, cols, dtype code, num_pes, out_ptr, who_ptr`.

use kernbench_guest::prelude::*;

pub struct VaProbe;

impl Algorithm for VaProbe {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        kernbench_guest::kernels::va_probe(tl, t_ptr, args, |tl, num_pes| {
            tl.program_id(1) as u64 * num_pes + tl.program_id(0) as u64
        });
    }

    /// Not a collective: `va_offset_verify` passes the arguments itself.
    fn kernel_args(_world_size: u32, _n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        Vec::new()
    }
}

kernbench_guest::export_algorithm!(VaProbe);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{run_kernel_in_mock, MockConfig, MOCK_T_PTR};

    /// One PE (j = 0, cube 0, PE 0): its 2x2 shard copied behind the
    /// tensor and doubled, and (0, 0) signed after the copy.
    #[test]
    fn the_shard_is_copied_out_and_doubled_in_the_mock() {
        let out = MOCK_T_PTR + 8;
        let who = MOCK_T_PTR + 16;
        let cfg = MockConfig::ring(1, Dtype::F16, vec![2, 2, 0, 1, out as i64, who as i64]);
        let mut tile = vec![1.0, 2.0, 3.0, 4.0];
        tile.extend([9.0; 6]);
        let res = run_kernel_in_mock::<VaProbe>(&cfg, &[tile]);
        assert_eq!(res[0], [2.0, 4.0, 6.0, 8.0, 1.0, 2.0, 3.0, 4.0, 0.0, 0.0]);
    }
}
