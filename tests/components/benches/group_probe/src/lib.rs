//! Test bench: process groups (`dist.new_group`). `run COLLECTIVE LAYOUT
//! N [ALGORITHM [GROUP_ALGORITHM]]` spawns one worker per rank (the
//! default group served by ALGORITHM, `-` for ccl.yaml's; the groups by
//! GROUP_ALGORITHM, given as `pg_options`, else they inherit); each makes the groups of
//! LAYOUT over the world, runs COLLECTIVE on its group with N elements a
//! rank (i32, so every reduction is exact), checks its output against
//! the collective's definition over the group's ranks, and records one
//! row `COLLECTIVE` with its time and wrong elements (rank = the group's
//! rank 0 only, one row per group). Layouts:
//!
//! * `pairs`: consecutive groups of 2 (`new_subgroups(2)`);
//! * `strided`: ranks of equal `rank % 2` (`new_subgroups_by_enumeration`);
//! * `single`: groups of one rank;
//! * `world`: one group of every rank;
//! * `reversed`: one group naming every rank from the last (sorted, as
//!   PyTorch sorts: the same as `world`);
//! * `mismatch`: rank 0 names other ranks than the rest (an error);
//! * `outsider`: a group of ranks 0 and 1; the others call the
//!   collective on it too and must get back at once, untouched.
//!
//! A value of rank r's input at i is `r * 1000 + i % 97 + 1`.

use kernbench_guest::bench::dist::{self, ProcessGroup};
use kernbench_guest::bench::{ahbm, mp, report, torch};
use kernbench_guest::{Bench, Dtype};

struct Probe;

fn value(rank: u32, i: u64) -> f64 {
    (rank as u64 * 1000 + i % 97 + 1) as f64
}

fn input(rank: u32, n: u64, name: &str) -> Result<torch::Tensor, String> {
    let t = torch::zeros(&[n as u32], Dtype::I32, name)?;
    let v: Vec<f64> = (0..n).map(|i| value(rank, i)).collect();
    t.copy_from_f64(&v)?;
    Ok(t)
}

fn groups(layout: &str, ws: u32, algo: Option<&str>) -> Result<Vec<ProcessGroup>, String> {
    let new_group = |ranks: &[u32]| match algo {
        Some(a) => dist::new_group_with_algorithm(ranks, a),
        None => dist::new_group(ranks),
    };
    if let (Some(_), "pairs") = (algo, layout) {
        let me = dist::get_rank()?;
        let mut mine = None;
        for k in 0..ws / 2 {
            let g = new_group(&[2 * k, 2 * k + 1])?;
            if g.ranks().contains(&me) {
                mine = Some(g);
            }
        }
        return Ok(mine.into_iter().collect());
    }
    Ok(match layout {
        "pairs" => dist::new_subgroups(2)?.1,
        "strided" => {
            let lists: Vec<Vec<u32>> = (0..2).map(|k| (k..ws).step_by(2).collect()).collect();
            dist::new_subgroups_by_enumeration(&lists)?.1
        }
        "single" => (0..ws)
            .map(|r| dist::new_group(&[r]))
            .collect::<Result<_, _>>()?,
        "world" => vec![new_group(&(0..ws).collect::<Vec<_>>())?],
        "reversed" => vec![dist::new_group(&(0..ws).rev().collect::<Vec<_>>())?],
        "outsider" => vec![dist::new_group(&[0, 1])?],
        "mismatch" => {
            let me = dist::get_rank()?;
            let ranks: Vec<u32> = if me == 0 { vec![0, 1] } else { vec![0, 2] };
            vec![dist::new_group(&ranks)?]
        }
        other => return Err(format!("unknown layout {other}")),
    })
}

impl Bench for Probe {
    fn run(args: Vec<String>) -> Result<(), String> {
        match args.get(3).map(String::as_str) {
            Some("-") | None => dist::init_process_group("ahbm")?,
            Some(algo) => dist::init_process_group_with_algorithm("ahbm", algo)?,
        }
        let ws = dist::get_world_size()?;
        mp::spawn(ws, &args)
    }

    fn worker(rank: u32, ws: u32, args: Vec<String>) -> Result<(), String> {
        let (collective, layout) = (args[0].as_str(), args[1].as_str());
        let n: u64 = args[2].parse().map_err(|e| format!("N: {e}"))?;
        ahbm::set_device(rank)?;
        let all = groups(layout, ws, args.get(4).map(String::as_str))?;
        let g = all
            .iter()
            .find(|g| g.ranks().contains(&rank))
            .cloned()
            .unwrap_or_else(|| all[0].clone());
        let member = g.rank();
        let (gs, ranks) = (g.size() as u64, g.ranks().to_vec());
        let me = member.unwrap_or(0) as u64;
        let x = input(rank, n, "x")?;
        let big = torch::zeros(&[(n * gs) as u32], Dtype::I32, "big")?;
        let start = ahbm::now_ps();
        // The output and what it must hold, index by index.
        let (out, want): (&torch::Tensor, Vec<f64>) = match collective {
            "all_reduce" => {
                g.all_reduce(&x, "sum")?;
                let w = (0..n)
                    .map(|i| ranks.iter().map(|&r| value(r, i)).sum())
                    .collect();
                (&x, w)
            }
            "broadcast" => {
                let src = *ranks.last().unwrap();
                g.broadcast(&x, src)?;
                (&x, (0..n).map(|i| value(src, i)).collect())
            }
            "all_gather" => {
                g.all_gather_into_tensor(&big, &x)?;
                let w = ranks
                    .iter()
                    .flat_map(|&r| (0..n).map(move |i| value(r, i)))
                    .collect();
                (&big, w)
            }
            "reduce_scatter" => {
                let bigx = torch::zeros(&[(n * gs) as u32], Dtype::I32, "bigx")?;
                let v: Vec<f64> = (0..n * gs).map(|i| value(rank, i)).collect();
                bigx.copy_from_f64(&v)?;
                g.reduce_scatter_tensor(&x, &bigx, "sum")?;
                let w = (0..n)
                    .map(|i| ranks.iter().map(|&r| value(r, me * n + i)).sum())
                    .collect();
                (&x, w)
            }
            "all_to_all" => {
                let bigx = torch::zeros(&[(n * gs) as u32], Dtype::I32, "bigx")?;
                let v: Vec<f64> = (0..n * gs).map(|i| value(rank, i)).collect();
                bigx.copy_from_f64(&v)?;
                g.all_to_all_single(&big, &bigx)?;
                // Block j comes from group rank j: its block `me`.
                let w = ranks
                    .iter()
                    .flat_map(|&r| (0..n).map(move |i| value(r, me * n + i)))
                    .collect();
                (&big, w)
            }
            "send_recv" => {
                // Group rank 0 sends to the last; a group of one does nothing.
                let (first, last) = (ranks[0], *ranks.last().unwrap());
                if rank == first && first != last {
                    g.send(&x, last)?;
                    (&x, (0..n).map(|i| value(rank, i)).collect())
                } else if rank == last && first != last {
                    g.recv(&x, first)?;
                    (&x, (0..n).map(|i| value(first, i)).collect())
                } else {
                    (&x, (0..n).map(|i| value(rank, i)).collect())
                }
            }
            other => return Err(format!("unknown collective {other}")),
        };
        let time_ps = ahbm::now_ps() - start;
        if member.is_none() {
            // Outside the group: back at once, the tensor untouched.
            let untouched = x.to_f64() == (0..n).map(|i| value(rank, i)).collect::<Vec<_>>();
            if time_ps != 0 || !untouched {
                return Err(format!(
                    "rank {rank} is outside group {:?} but its call took {time_ps} ps \
                     (untouched: {untouched})",
                    ranks
                ));
            }
            return Ok(());
        }
        let got = out.to_f64();
        let wrong = got.iter().zip(&want).filter(|(a, b)| a != b).count() as u64;
        if wrong != 0 && rank == ranks[0] {
            eprintln!(
                "group {:?}: {collective} got {:?}, want {:?}",
                ranks,
                &got[..8.min(got.len())],
                &want[..8.min(want.len())]
            );
        }
        if member == Some(0) {
            report::record(
                &format!("{collective} group {}", g.id()),
                &report::Row {
                    size_bytes: n * 4,
                    count: n,
                    dtype: Dtype::I32,
                    redop: format!(
                        "ranks {}",
                        ranks
                            .iter()
                            .map(u32::to_string)
                            .collect::<Vec<_>>()
                            .join("+")
                    ),
                    time_ps,
                    wrong,
                },
            );
        }
        Ok(())
    }
}

kernbench_guest::export_bench!(Probe);
