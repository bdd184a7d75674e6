//! Test bench that attacks the host on purpose. `run` takes one scenario
//! name (and its arguments); a scenario that ends returns a short report
//! as its error text so that the test can read it.

use kernbench_guest::bench::{ahbm, dist, mp, report, torch};
use kernbench_guest::{Bench, Dtype};
use std::time::Duration;

struct Hostile;

fn hold_memory(mib: usize) -> Vec<u8> {
    // Touch every page so that it is really resident.
    let mut v = vec![0u8; mib << 20];
    for i in (0..v.len()).step_by(4096) {
        v[i] = 1;
    }
    std::hint::black_box(v)
}

impl Bench for Hostile {
    fn run(args: Vec<String>) -> Result<(), String> {
        let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
        match arg(0) {
            // 8 GiB of zeros beside a small tensor written and read back.
            "zeros-8g" => {
                let t = torch::zeros(&[1 << 22, 1 << 10], Dtype::F16, "big")?;
                let before = t.nbytes();
                let small = torch::zeros(&[4], Dtype::F16, "small")?;
                small.copy_from_f64(&[1.0, 2.0, 3.0, 4.0])?;
                let back = small.to_f64();
                if before != 8 << 30 || back != [1.0, 2.0, 3.0, 4.0] {
                    return Err(format!("wrong: nbytes={before} small={back:?}"));
                }
                Ok(())
            }
            "zeros-8g-read" => {
                let t = torch::zeros(&[1 << 22, 1 << 10], Dtype::F16, "big")?;
                Err(format!("read {} values", t.to_f64().len()))
            }
            "overflow-shape" => {
                torch::zeros(&[1 << 31, 1 << 31, 2], Dtype::F16, "huge").map(|_| ())
            }
            "wrapping-shape" => {
                // 2^32 * 2^32 wraps to 0 in 64 bits.
                torch::zeros(&[1 << 16, 1 << 16, 1 << 16, 1 << 16], Dtype::I32, "wraps").map(|_| ())
            }
            "spin-now" => loop {
                std::hint::black_box(ahbm::now_ps());
            },
            "spin-pure" => {
                let mut x: u64 = 1;
                loop {
                    x = std::hint::black_box(x.wrapping_mul(3));
                }
            }
            "sleep" => {
                let t0 = ahbm::now_ps();
                std::thread::sleep(Duration::from_millis(3));
                let t1 = ahbm::now_ps();
                let i0 = std::time::Instant::now();
                std::thread::sleep(Duration::from_micros(5));
                Err(format!(
                    "slept {} ps, instant {} ns",
                    t1 - t0,
                    i0.elapsed().as_nanos()
                ))
            }
            "records" => {
                let n: u64 = arg(1).parse().map_err(|_| "records N")?;
                for i in 0..n {
                    report::record(
                        "all_reduce",
                        &report::Row {
                            size_bytes: 2 * (i + 1),
                            count: i + 1,
                            dtype: Dtype::F16,
                            redop: "sum".into(),
                            time_ps: 1000 + i,
                            wrong: 0,
                        },
                    );
                }
                Ok(())
            }
            "wrong" => {
                // Two rows of `wrong` elements each (2^63: a total that
                // wraps a u64 to 0).
                let wrong: u64 = arg(1).parse().map_err(|_| "wrong N")?;
                for size_bytes in [8, 16] {
                    report::record(
                        "all_reduce",
                        &report::Row {
                            size_bytes,
                            count: size_bytes / 2,
                            dtype: Dtype::F16,
                            redop: "sum".into(),
                            time_ps: 1000,
                            wrong,
                        },
                    );
                }
                Ok(())
            }
            "odd-names" => {
                report::record(
                    "all,reduce \"odd\"\nname",
                    &report::Row {
                        size_bytes: 8,
                        count: 4,
                        dtype: Dtype::F16,
                        redop: "s,u\"m".into(),
                        time_ps: 1000,
                        wrong: 0,
                    },
                );
                Ok(())
            }
            "flood" => loop {
                eprintln!("flooding stderr from the bench driver, line after line after line");
            },
            // Every rank holds `MIB` MiB of its own linear memory.
            "hold" => {
                let ranks: u32 = arg(1).parse().map_err(|_| "hold RANKS MIB")?;
                mp::spawn(ranks, &args[..])
            }
            // Write one non-zero byte into every 64 KiB of `GIB` GiB of HBM.
            "scatter" => {
                let gib: u32 = arg(1).parse().map_err(|_| "scatter GIB")?;
                let mut keep = Vec::new();
                for i in 0..(gib << 14) {
                    let t = torch::zeros(&[32 * 1024], Dtype::F16, &format!("piece{i}"))?;
                    let mut b = vec![0u8; 64 * 1024];
                    b[0] = 1;
                    t.copy_from_bytes(&b)?;
                    keep.push(t);
                }
                Err(format!("wrote {} pieces", keep.len()))
            }
            // A ring all-reduce whose kernel is hostile_kernel (via ccl).
            "collective" => {
                dist::init_process_group("ahbm").map_err(String::from)?;
                let ws = dist::get_world_size().map_err(String::from)?;
                mp::spawn(ws, &args[..])
            }
            other => Err(format!("unknown scenario {other:?}")),
        }
    }

    fn worker(rank: u32, _world_size: u32, args: Vec<String>) -> Result<(), String> {
        match args[0].as_str() {
            "hold" => {
                let mib: usize = args[2].parse().map_err(|_| "hold RANKS MIB")?;
                let v = hold_memory(mib);
                // Stay alive (simulated) so that every rank holds it at once.
                std::thread::sleep(Duration::from_millis(1));
                std::hint::black_box(&v);
                Ok(())
            }
            // `collective ELEMS [TIMES]`: TIMES all-reduces (default 1),
            // each one's time reported.
            "collective" => {
                let elems: u32 = args[1].parse().map_err(|_| "collective ELEMS")?;
                let times: u32 = args
                    .get(2)
                    .map_or(Ok(1), |n| n.parse())
                    .map_err(|_| "collective ELEMS TIMES")?;
                ahbm::set_device(rank)?;
                let t = torch::zeros(&[elems], Dtype::F16, "x")?;
                t.copy_from_f64(&vec![rank as f64 + 1.0; elems as usize])?;
                let mut took = Vec::new();
                for _ in 0..times {
                    let t0 = ahbm::now_ps();
                    dist::all_reduce(&t, "sum").map_err(String::from)?;
                    took.push(format!("{} ps", ahbm::now_ps() - t0));
                }
                Err(format!(
                    "rank {rank} took {}, got {:?}",
                    took.join(", then "),
                    &t.to_f64()[..1]
                ))
            }
            _ => Ok(()),
        }
    }
}

kernbench_guest::export_bench!(Hostile);
