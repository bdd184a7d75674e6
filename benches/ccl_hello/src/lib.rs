//! `ccl_hello`: runs the `hello_send` algorithm (it asks for it when it
//! initialises the process group) through `all_reduce` and checks that
//! every rank now holds its west neighbour's data (seed 003 §1).
//!
//! Each rank's tile is a pattern unique to the rank whose every value is an
//! integer below 2048, so it is exact in f16 at any world size (the seed's
//! `rank + 1` stops being exact past 2048 ranks).

use kernbench_guest::bench::{ahbm, dist, mp, report, torch};
use kernbench_guest::{Bench, Dtype};

const N_ELEM: u32 = 8;

/// Element `i` of rank `rank`'s tile: digit `i % 4` of the rank in base
/// 1024, plus 1, plus 1024 in the second half: 1..=2048, never zero, so a
/// sum of tiles differs from every single tile.
fn pattern(rank: u32, i: u32) -> f64 {
    let digit = (rank >> (10 * (i % 4))) & 1023;
    (digit + 1 + 1024 * (i / 4)) as f64
}

fn tile(rank: u32) -> Vec<f64> {
    (0..N_ELEM).map(|i| pattern(rank, i)).collect()
}

struct CclHello;

impl Bench for CclHello {
    fn run(args: Vec<String>) -> Result<(), String> {
        dist::init_process_group_with_algorithm("ahbm", "hello_send")?;
        let world_size = dist::get_world_size()?;
        mp::spawn(world_size, &args)
    }

    fn worker(rank: u32, world_size: u32, _args: Vec<String>) -> Result<(), String> {
        ahbm::set_device(rank)?;
        let t = torch::zeros(&[N_ELEM], Dtype::F16, "hello_in")?;
        t.copy_from_f64(&tile(rank))?;
        let t0 = ahbm::now_ps();
        dist::all_reduce(&t, "sum")?;
        let t1 = ahbm::now_ps();
        let got = t.to_f64();
        let west = (rank + world_size - 1) % world_size;
        let expected = tile(west);
        let wrong = got.iter().zip(&expected).filter(|(g, e)| g != e).count() as u64;
        println!("rank {rank}: got {got:?}, expected rank {west}'s {expected:?}");
        report::record(
            "sendrecv",
            &report::Row {
                size_bytes: N_ELEM as u64 * 2,
                count: N_ELEM as u64,
                dtype: Dtype::F16,
                redop: "none".into(),
                time_ps: t1 - t0,
                wrong,
            },
        );
        Ok(())
    }
}

kernbench_guest::export_bench!(CclHello);
