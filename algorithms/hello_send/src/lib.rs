//! Hello world (seed 003 §1): every PE sends its tile east once and stores
//! the tile it receives from the west in its place, so rank r ends up
//! holding rank r-1's data.

use kernbench_guest::prelude::*;

pub struct HelloSend;

impl Algorithm for HelloSend {
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
        let n_elem = args[0] as u32;
        let pe_addr = pe_tile_addr(tl, t_ptr, n_elem as u64, Dtype::F16);

        let src = tl.load(pe_addr, &[n_elem], Dtype::F16);
        tl.send("E", &src);
        let recv = tl.recv(Some("W"), &[n_elem], Dtype::F16);
        tl.store(pe_addr, &recv);
    }

    fn kernel_args(_world_size: u32, n_elem: u64, _cube_w: u32, _cube_h: u32) -> Vec<i64> {
        vec![n_elem as i64]
    }
}

kernbench_guest::export_algorithm!(HelloSend);

#[cfg(test)]
mod tests {
    use super::*;
    use kernbench_guest::mock::{run_kernel_in_mock, MockConfig};

    #[test]
    fn data_moves_one_rank_east_in_the_mock() {
        let inputs: Vec<Vec<f64>> = (0..4).map(|r| vec![(r + 1) as f64; 8]).collect();
        let out =
            run_kernel_in_mock::<HelloSend>(&MockConfig::ring(4, Dtype::F16, vec![8]), &inputs);
        for r in 0..4 {
            assert_eq!(out[r], inputs[(r + 3) % 4]);
        }
    }
}
