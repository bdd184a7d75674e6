//! PHOLD-style throughput of the engine core alone (no wasm): `LPS` logical
//! processes and a population of `jobs` pending events; each job (a task)
//! repeatedly sleeps an exponentially distributed simulated delay and then
//! hops to a random LP (bumping its counter). Every hop is one timer event
//! and one task poll. Reported as events (hops) per second, for a small (64)
//! and a large (4096) pending-event population: the timer heap's cost grows
//! with the population.
//!
//! `phold_windows_*`: the same kind of model split into two partitions of
//! LPs (`kernbench::engine::windows`), a hop to the other partition a
//! message at least the lookahead later, run on one thread and on two:
//! what the conservative windows cost and what a second core gives.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kernbench::engine::windows::{run_windows, Post, Windows};
use kernbench::engine::{now, sleep, sleep_until, spawn_detached, Executor};
use std::cell::RefCell;
use std::rc::Rc;

const LPS: usize = 1024;
/// Hops per run, whatever the population.
const TOTAL_HOPS: u64 = 1 << 20;

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn phold(jobs: u64) -> u64 {
    let hops = TOTAL_HOPS / jobs;
    let ex = Executor::new();
    let counts = Rc::new(RefCell::new(vec![0u64; LPS]));
    for j in 0..jobs {
        let counts = counts.clone();
        ex.spawn(async move {
            let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ (j + 1).wrapping_mul(0x2545_F491_4F6C_DD1D);
            for _ in 0..hops {
                // exponential delay, mean ~1000 ps
                let u = (xorshift(&mut seed) >> 11) as f64 / (1u64 << 53) as f64;
                let d = (-(1.0 - u).ln() * 1000.0) as u64 + 1;
                sleep(d).await;
                let lp = (xorshift(&mut seed) % LPS as u64) as usize;
                counts.borrow_mut()[lp] += 1;
            }
        });
    }
    ex.run();
    let total: u64 = counts.borrow().iter().sum();
    assert_eq!(total, jobs * hops);
    total
}

/// A job of the windowed model: hops `left` more times; a hop to the
/// other partition (one in four) is a message `LOOKAHEAD` or more later.
fn windowed_job(post: Rc<Post<(u64, u64)>>, mut seed: u64, left: u64) {
    spawn_detached(async move {
        for n in (0..left).rev() {
            let u = (xorshift(&mut seed) >> 11) as f64 / (1u64 << 53) as f64;
            sleep((-(1.0 - u).ln() * 1000.0) as u64 + 1).await;
            if xorshift(&mut seed).is_multiple_of(4) && n > 0 {
                let to = 1 - post.me();
                post.send(to, now() + LOOKAHEAD, (seed, n));
                return;
            }
        }
    });
}

/// The least delay of a hop between partitions (ps).
const LOOKAHEAD: u64 = 500;

fn phold_windows(jobs: u64, threads: usize) -> u64 {
    let hops = TOTAL_HOPS / jobs;
    let ends = run_windows(
        Windows {
            parts: 2,
            lookahead: LOOKAHEAD,
            threads,
        },
        |p, post: Rc<Post<(u64, u64)>>| {
            for j in (0..jobs).filter(|j| *j as usize % 2 == p) {
                let seed = 0x9E37_79B9_7F4A_7C15u64 ^ (j + 1).wrapping_mul(0x2545_F491_4F6C_DD1D);
                windowed_job(post.clone(), seed, hops);
            }
            Box::new(move |at, (seed, left)| {
                let post = post.clone();
                spawn_detached(async move {
                    sleep_until(at).await;
                    windowed_job(post, seed, left);
                });
            })
        },
    );
    ends.iter().map(|e| e.events).sum()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine");
    g.throughput(Throughput::Elements(TOTAL_HOPS));
    g.sample_size(20);
    for jobs in [64u64, 4096] {
        g.bench_function(format!("phold_{jobs}_pending"), |b| b.iter(|| phold(jobs)));
    }
    for threads in [1usize, 2] {
        g.bench_function(
            format!("phold_windows_4096_pending_{threads}_threads"),
            |b| b.iter(|| phold_windows(4096, threads)),
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
