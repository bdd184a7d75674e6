//! Test bench built against the frozen `kernbench:sim@0.6.5`
//! (`wit/history/0.6.5`, no guest SDK): the last release whose `dtype`
//! had four cases. It uses every bench import whose type names a dtype,
//! so the host's adapters for them (`runtime::shapes`) run:
//! `torch.zeros`, `tensor.dtype`, `report.record-result`,
//! `record-perf` and `record-kernel`. One rank per SIP fills an f32
//! tensor with rank + 1 and all-reduces it; rank 0 records one row of
//! each kind.

wit_bindgen::generate!({
    path: "../../../../wit/history/0.6.5",
    world: "bench",
});

use kernbench::sim::types::Dtype;
use kernbench::sim::{ahbm, distributed as dist, multiprocessing as mp, report, torch};

const N: u32 = 64;

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
        let t = torch::zeros(&[N], Dtype::F32, None, "compat")?;
        if t.dtype() != Dtype::F32 {
            return Err("tensor.dtype is not the dtype it was made with".into());
        }
        t.copy_from_f64(&vec![f64::from(rank + 1); N as usize])?;
        let t0 = ahbm::now_ps();
        dist::all_reduce(&t, "sum").map_err(dist_err)?;
        let took = ahbm::now_ps() - t0;
        let want = f64::from(world_size * (world_size + 1) / 2);
        let wrong = t.to_f64().iter().filter(|&&v| v != want).count() as u64;
        if rank == 0 {
            let (size_bytes, count) = (u64::from(N) * 4, u64::from(N));
            report::record_result(
                "all_reduce",
                &report::ResultRow {
                    size_bytes,
                    count,
                    dtype: Dtype::F32,
                    redop: "sum".into(),
                    time_ps: took,
                    wrong,
                },
            );
            report::record_perf(
                "all_reduce",
                &report::PerfRow {
                    size_bytes: 2 * size_bytes,
                    count: 2 * count,
                    dtype: Dtype::Bf16,
                    redop: "sum".into(),
                    root: None,
                    out_of_place: None,
                    in_place: Some(report::PerfBlock {
                        time_ps: took,
                        wrong: Some(wrong),
                    }),
                    aggregation: report::TimeAggregation::Max,
                },
            );
            report::record_kernel(&report::KernelRow {
                name: "probe".into(),
                shape: "n=64".into(),
                dtype: Dtype::I32,
                pes: 1,
                flops: 64,
                time_ps: took,
                checked: 0,
                wrong: 0,
                max_rel_err: 0.0,
                tolerance: 0.0,
            });
        }
        Ok(())
    }
}

export!(Compat);
