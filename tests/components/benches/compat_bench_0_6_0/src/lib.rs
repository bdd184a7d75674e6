//! Test bench built against the frozen `kernbench:sim@0.6.0`
//! (`wit/history/0.6.0`, no guest SDK): a bench distributed before the
//! host moved on, which must run unchanged. One rank per SIP fills a
//! tensor with rank + 1, all-reduces it, checks every element is
//! n(n+1)/2, and rank 0 records one row.

wit_bindgen::generate!({
    path: "../../../../wit/history/0.6.0",
    world: "bench",
});

use kernbench::sim::types::Dtype;
use kernbench::sim::{ahbm, distributed as dist, multiprocessing as mp, report, torch};

const N: u32 = 256;

struct Compat;

fn dist_err(e: dist::DistError) -> String {
    match e {
        dist::DistError::ValueError(m)
        | dist::DistError::RuntimeError(m)
        | dist::DistError::NotImplemented(m) => m,
    }
}

impl Guest for Compat {
    fn run(args: Vec<String>) -> Result<(), String> {
        dist::init_process_group("ahbm", None, None, None).map_err(dist_err)?;
        mp::spawn(ahbm::device_count(), &args)
    }

    fn worker(rank: u32, world_size: u32, _args: Vec<String>) -> Result<(), String> {
        ahbm::set_device(rank)?;
        let t = torch::zeros(&[N], Dtype::F16, None, "compat")?;
        t.copy_from_f64(&vec![f64::from(rank + 1); N as usize])?;
        let t0 = ahbm::now_ps();
        dist::all_reduce(&t, "sum").map_err(dist_err)?;
        let took = ahbm::now_ps() - t0;
        let want = f64::from(world_size * (world_size + 1) / 2);
        let wrong = t.to_f64().iter().filter(|&&v| v != want).count() as u64;
        if rank == 0 {
            report::record_result(
                "all_reduce",
                &report::ResultRow {
                    size_bytes: u64::from(N) * 2,
                    count: u64::from(N),
                    dtype: Dtype::F16,
                    redop: "sum".into(),
                    time_ps: took,
                    wrong,
                },
            );
        }
        Ok(())
    }
}

export!(Compat);
