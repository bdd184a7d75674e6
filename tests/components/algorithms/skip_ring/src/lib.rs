//! Test algorithm for the setup-time exports: seed 003 §3's pattern B
//! (`neighbors` replaces every row with a skip-connection ring,
//! E → rank + 2) and `entry-defaults` (the table, slots and slot size a
//! ccl.yaml entry with only `module` gets). Over the skip ring it runs the
//! seed's ring all-reduce, so an odd world size (one cycle) sums all ranks
//! and an even one sums the even and the odd ranks apart.
//!
//! Its parameter `kernel_steps` (default: world size − 1) sets the number
//! of ring steps, to show ccl.yaml parameters reaching the kernel.

use kernbench_guest::helpers::ring_allreduce;
use kernbench_guest::prelude::*;

pub struct SkipRing;

impl Algorithm for SkipRing {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        let (n_elem, steps) = (args[0] as u32, args[1] as u32);
        let acc = tl.load(t_ptr, &[n_elem], Dtype::F16);
        let acc = ring_allreduce(
            tl,
            acc,
            steps + 1,
            ("E", "W"),
            (&[n_elem], Dtype::F16),
            BinOp::Add,
        );
        tl.store(t_ptr, &acc);
    }

    fn kernel_args(world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        // The steps that close one cycle of the skip ring.
        let cycle = if world_size > 2 && world_size.is_multiple_of(2) {
            world_size / 2
        } else {
            world_size
        };
        vec![n_elem as i64, cycle as i64 - 1]
    }

    fn kernel_args_with(
        world_size: u32,
        n_elem: u64,
        cube_w: u32,
        cube_h: u32,
        params: &Params,
    ) -> Result<Vec<i64>, String> {
        let mut args = Self::kernel_args(world_size, n_elem, cube_w, cube_h);
        if let Some(steps) = params.int("kernel_steps")? {
            if steps < 0 {
                return Err(format!("kernel_steps must be >= 0, got {steps}"));
            }
            args[1] = steps;
        }
        params.finish()?;
        Ok(args)
    }

    fn entry_defaults() -> EntryDefaults {
        EntryDefaults {
            topology: Some("ring_1d_unidir"),
            n_slots: Some(2),
            slot_size: Some(4096),
            ..EntryDefaults::default()
        }
    }

    fn neighbors(rank: u32, world_size: u32, _map: Vec<Link>) -> Option<Vec<Link>> {
        (world_size > 2).then(|| vec![Link::to("E", (rank + 2) % world_size)])
    }
}

kernbench_guest::export_algorithm!(SkipRing);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{rows, run_kernel_in_mock, MockConfig};

    #[test]
    fn the_mock_installs_the_skip_ring() {
        let cfg = MockConfig::new(
            "ring_1d_unidir",
            5,
            Dtype::F16,
            SkipRing::kernel_args(5, 4, 1, 1),
        );
        assert_eq!(
            rows::<SkipRing>(&cfg, 4),
            vec![("E".to_string(), 1, "W".to_string())]
        );
        let inputs: Vec<Vec<f64>> = (0..5).map(|r| vec![r as f64; 4]).collect();
        for out in run_kernel_in_mock::<SkipRing>(&cfg, &inputs) {
            assert_eq!(out, vec![10.0; 4]);
        }
    }

    #[test]
    fn parameters_are_read_and_unknown_ones_refused() {
        let p = Params::new(vec![(
            "kernel_steps".into(),
            kernbench_guest::ParamValue::Int(1),
        )]);
        assert_eq!(SkipRing::kernel_args_with(5, 8, 1, 1, &p), Ok(vec![8, 1]));
        let p = Params::new(vec![(
            "kernel_stepz".into(),
            kernbench_guest::ParamValue::Int(1),
        )]);
        assert_eq!(
            SkipRing::kernel_args_with(5, 8, 1, 1, &p),
            Err("unknown parameter kernel_stepz (this algorithm takes kernel_steps)".into())
        );
    }
}
