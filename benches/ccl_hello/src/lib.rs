//! `ccl_hello`: runs the `hello_send` algorithm (select it with
//! `--algorithm hello_send`) through `all_reduce` and checks that every
//! rank now holds its west neighbour's data (seed 003 §1).

use kernbench_guest::bench::{ahbm, dist, mp, report, torch};
use kernbench_guest::{Bench, Dtype};

const N_ELEM: u32 = 8;

struct CclHello;

impl Bench for CclHello {
    fn run(args: Vec<String>) -> Result<(), String> {
        dist::init_process_group("ahbm")?;
        let world_size = dist::get_world_size()?;
        mp::spawn(world_size, &args)
    }

    fn worker(rank: u32, world_size: u32, _args: Vec<String>) -> Result<(), String> {
        ahbm::set_device(rank)?;
        let t = torch::zeros(&[N_ELEM], Dtype::F16, "hello_in")?;
        t.copy_from_f64(&vec![(rank + 1) as f64; N_ELEM as usize])?;
        let t0 = ahbm::now_ps();
        dist::all_reduce(&t, "sum")?;
        let t1 = ahbm::now_ps();
        let got = t.to_f64();
        let expected = ((rank + world_size - 1) % world_size + 1) as f64;
        let wrong = got.iter().filter(|&&v| v != expected).count() as u64;
        println!("rank {rank}: got {:.1}, expected {expected:.1}", got[0]);
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
