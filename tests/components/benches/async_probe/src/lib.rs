//! Test bench: asynchronous collectives (`async_op=True`, `isend` /
//! `irecv`). `run MODE N` spawns one worker per rank; each runs MODE with
//! all-reduces of N i32 elements a rank, checks every result against its
//! definition, and records rows (rank 0's, or each group's first rank's)
//! with the simulated time and the wrong elements. Modes:
//!
//! * `blocking` / `async`: one all-reduce on the default group, blocking
//!   or issued asynchronously and waited for at once (row `all_reduce`);
//! * `one_pair` / `two_pairs`: all-reduces on the group {0, 1} and (for
//!   `two_pairs`) a second group over the same ranks, both issued
//!   asynchronously before either is waited for (row `pairs`: the time
//!   until both have ended);
//! * `cross`: groups {0, 1} and {0, 3}; rank 0 issues on both at once
//!   (row `cross`);
//! * `order`: four asynchronous all-reduces of 4N, N, N and N elements on
//!   the default group, waited in order (rows `order i`: the time from
//!   the issue to the end of wait i), then a blocking one (row `order
//!   blocking`); a row `early` counts, as wrong, a second work that says
//!   it has ended just after the first was waited for;
//! * `p2p`: ranks 0 and 1 each `isend` to the other then `irecv` from
//!   it, then wait both (row `p2p`);
//! * `dropped`: rank 0 drops its tensor and its work right after issuing;
//!   the others check that they got its contribution (row `dropped` from
//!   rank 1);
//! * `mismatch`: rank 0 all-reduces where the others all-gather, waiting
//!   (the worker returns the error `wait` gives);
//! * `unwaited`: the same, nobody waiting (the run must fail when the
//!   ranks return).
//!
//! * `overlap D`: an asynchronous all-reduce, then `ahbm.busy(D ns)`,
//!   then its wait (row `overlap`: from the issue to the end of the
//!   wait; row `busy`: what `busy` returned);
//! * `gemm M K`: `ahbm.gemm(M, M, K, bf16)` alone (row `gemm`), then
//!   overlapping an asynchronous all-reduce (row `gemm overlap`);
//! * `launch KERNEL`: a 4x4 f16 tile squared by the math_probe kernel
//!   (mode 3), blocking (row `launch`), then with `launch_async` waited
//!   at once (row `launch async`), then beside an asynchronous
//!   all-reduce (row `launch overlap`: both waited; rows count the
//!   tile's wrong elements).
//!
//! A value of rank r's input at i is `r * 1000 + i % 97 + 1`.

use kernbench_guest::bench::dist::{self, ProcessGroup, Work};
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

/// Elements of `t` that are not the all-reduce (sum) of `ranks`' inputs.
fn wrong_sum(t: &torch::Tensor, ranks: &[u32]) -> u64 {
    let got = t.to_f64();
    got.iter()
        .enumerate()
        .filter(|(i, &g)| g != ranks.iter().map(|&r| value(r, *i as u64)).sum::<f64>())
        .count() as u64
}

fn row(name: &str, n: u64, time_ps: u64, wrong: u64) {
    report::record(
        name,
        &report::Row {
            size_bytes: n * 4,
            count: n,
            dtype: Dtype::I32,
            redop: "sum".into(),
            time_ps,
            wrong,
        },
    );
}

fn wait_all(works: &[Work]) -> Result<(), String> {
    for w in works {
        w.wait()?;
    }
    Ok(())
}

impl Bench for Probe {
    fn run(args: Vec<String>) -> Result<(), String> {
        dist::init_process_group("ahbm")?;
        let ws = dist::get_world_size()?;
        mp::spawn(ws, &args)
    }

    fn worker(rank: u32, ws: u32, args: Vec<String>) -> Result<(), String> {
        let mode = args[0].as_str();
        let n: u64 = args[1].parse().map_err(|e| format!("N: {e}"))?;
        ahbm::set_device(rank)?;
        let world: Vec<u32> = (0..ws).collect();
        let start = ahbm::now_ps();
        match mode {
            "blocking" | "async" => {
                let x = input(rank, n, "x")?;
                if mode == "async" {
                    dist::all_reduce_async(&x, "sum")?.wait()?;
                } else {
                    dist::all_reduce(&x, "sum")?;
                }
                if rank == 0 {
                    row(
                        "all_reduce",
                        n,
                        ahbm::now_ps() - start,
                        wrong_sum(&x, &world),
                    );
                }
            }
            "one_pair" | "two_pairs" => {
                let a = dist::new_group(&[0, 1])?;
                let b = dist::new_group(&[0, 1])?;
                if rank <= 1 {
                    let (x, y) = (input(rank, n, "x")?, input(rank, n, "y")?);
                    let start = ahbm::now_ps();
                    let mut works = vec![a.all_reduce_async(&x, "sum")?];
                    if mode == "two_pairs" {
                        works.push(b.all_reduce_async(&y, "sum")?);
                    }
                    wait_all(&works)?;
                    let took = ahbm::now_ps() - start;
                    let mut wrong = wrong_sum(&x, &[0, 1]);
                    if mode == "two_pairs" {
                        wrong += wrong_sum(&y, &[0, 1]);
                    }
                    if rank == 0 {
                        row("pairs", n, took, wrong);
                    }
                }
            }
            "cross" => {
                let a = dist::new_group(&[0, 1])?;
                let b = dist::new_group(&[0, 3])?;
                let (x, y) = (input(rank, n, "x")?, input(rank, n, "y")?);
                let start = ahbm::now_ps();
                let mut works = Vec::new();
                let mut wrong = 0;
                if rank == 0 || rank == 1 {
                    works.push(a.all_reduce_async(&x, "sum")?);
                }
                if rank == 0 || rank == 3 {
                    works.push(b.all_reduce_async(&y, "sum")?);
                }
                wait_all(&works)?;
                if rank == 0 || rank == 1 {
                    wrong += wrong_sum(&x, &[0, 1]);
                }
                if rank == 0 || rank == 3 {
                    wrong += wrong_sum(&y, &[0, 3]);
                }
                let took = ahbm::now_ps() - start;
                if rank != 2 {
                    row(&format!("cross {rank}"), n, took, wrong);
                }
            }
            "order" => {
                let sizes = [4 * n, n, n, n];
                let xs: Vec<torch::Tensor> = sizes
                    .iter()
                    .enumerate()
                    .map(|(i, &s)| input(rank, s, &format!("x{i}")))
                    .collect::<Result<_, _>>()?;
                let works: Vec<Work> = xs
                    .iter()
                    .map(|x| dist::all_reduce_async(x, "sum"))
                    .collect::<Result<_, _>>()?;
                let mut early = 0;
                for (i, w) in works.iter().enumerate() {
                    w.wait()?;
                    if rank == 0 {
                        let wrong = wrong_sum(&xs[i], &world);
                        row(
                            &format!("order {i}"),
                            sizes[i],
                            ahbm::now_ps() - start,
                            wrong,
                        );
                    }
                    // (After the row: a `false` costs simulated time.)
                    if i == 0 && works[1].is_completed() {
                        early += 1;
                    }
                }
                let z = input(rank, n, "z")?;
                let before = ahbm::now_ps();
                dist::all_reduce(&z, "sum")?;
                if rank == 0 {
                    row(
                        "order blocking",
                        n,
                        ahbm::now_ps() - before,
                        wrong_sum(&z, &world),
                    );
                    row("early", n, 0, early);
                }
            }
            "p2p" => {
                if rank <= 1 {
                    let peer = 1 - rank;
                    let (out, inp) = (
                        input(rank, n, "out")?,
                        torch::zeros(&[n as u32], Dtype::I32, "in")?,
                    );
                    let s = dist::isend(&out, peer)?;
                    let r = dist::irecv(&inp, peer)?;
                    wait_all(&[s, r])?;
                    let want: Vec<f64> = (0..n).map(|i| value(peer, i)).collect();
                    let wrong = inp
                        .to_f64()
                        .iter()
                        .zip(&want)
                        .filter(|(a, b)| a != b)
                        .count();
                    if rank == 0 {
                        row("p2p", n, ahbm::now_ps() - start, wrong as u64);
                    }
                }
            }
            "dropped" => {
                let x = input(rank, n, "x")?;
                let w = dist::all_reduce_async(&x, "sum")?;
                if rank == 0 {
                    drop(w);
                    drop(x);
                    // Memory made meanwhile is not the dropped tensor's.
                    let y = torch::zeros(&[n as u32], Dtype::I32, "y")?;
                    y.copy_from_f64(&vec![7.0; n as usize])?;
                } else {
                    w.wait()?;
                    if rank == 1 {
                        row("dropped", n, ahbm::now_ps() - start, wrong_sum(&x, &world));
                    }
                }
            }
            "overlap" => {
                let d: u64 = args[2].parse().map_err(|e| format!("D: {e}"))?;
                let x = input(rank, n, "x")?;
                let w = dist::all_reduce_async(&x, "sum")?;
                let busy = ahbm::busy(d)?;
                w.wait()?;
                if rank == 0 {
                    row("overlap", n, ahbm::now_ps() - start, wrong_sum(&x, &world));
                    row("busy", n, busy, 0);
                }
            }
            "gemm" => {
                let m: u32 = args[2].parse().map_err(|e| format!("M: {e}"))?;
                let k: u32 = args[3].parse().map_err(|e| format!("K: {e}"))?;
                let alone = ahbm::gemm(m, m, k, Dtype::Bf16)?;
                let x = input(rank, n, "x")?;
                let t0 = ahbm::now_ps();
                let w = dist::all_reduce_async(&x, "sum")?;
                ahbm::gemm(m, m, k, Dtype::Bf16)?;
                w.wait()?;
                if rank == 0 {
                    row("gemm", n, alone, 0);
                    row(
                        "gemm overlap",
                        n,
                        ahbm::now_ps() - t0,
                        wrong_sum(&x, &world),
                    );
                }
            }
            "launch" => {
                let kernel = &args[2];
                let tile = |name: &str| -> Result<torch::Tensor, String> {
                    let t = torch::zeros(&[16], Dtype::F16, name)?;
                    let a: Vec<f64> = (0..16).map(|i| f64::from(i % 5)).collect();
                    t.copy_from_f64(&a)?;
                    Ok(t)
                };
                let wrong = |t: &torch::Tensor| -> u64 {
                    let a: Vec<f64> = (0..16).map(|i| f64::from(i % 5)).collect();
                    let got = t.to_f64();
                    let mut bad = 0;
                    for i in 0..4 {
                        for j in 0..4 {
                            let want: f64 = (0..4).map(|p| a[i * 4 + p] * a[p * 4 + j]).sum();
                            bad += u64::from(got[i * 4 + j] != want);
                        }
                    }
                    bad
                };
                let t1 = tile("t1")?;
                let blocking = torch::launch(kernel, &t1, &[16, 1, 3])?;
                let t2 = tile("t2")?;
                let waited = torch::launch_async(kernel, &t2, &[16, 1, 3])?.wait()?;
                let (t3, x) = (tile("t3")?, input(rank, n, "x")?);
                let t0 = ahbm::now_ps();
                let w = dist::all_reduce_async(&x, "sum")?;
                let l = torch::launch_async(kernel, &t3, &[16, 1, 3])?;
                l.wait()?;
                w.wait()?;
                if rank == 0 {
                    row("launch", n, blocking, wrong(&t1));
                    row("launch async", n, waited, wrong(&t2));
                    let bad = wrong(&t3) + wrong_sum(&x, &world);
                    row("launch overlap", n, ahbm::now_ps() - t0, bad);
                }
            }
            "mismatch" | "unwaited" => {
                let x = input(rank, n, "x")?;
                let big = torch::zeros(&[(n * ws as u64) as u32], Dtype::I32, "big")?;
                let world_group = ProcessGroup::world()?;
                let w = if rank == 0 {
                    world_group.all_reduce_async(&x, "sum")?
                } else {
                    world_group.all_gather_into_tensor_async(&big, &x)?
                };
                if mode == "mismatch" {
                    w.wait()?;
                }
            }
            other => return Err(format!("unknown mode {other}")),
        }
        Ok(())
    }
}

kernbench_guest::export_bench!(Probe);
