//! PHOLD-style throughput of the engine core alone (no wasm): `LPS` logical
//! processes and a population of `jobs` pending events; each job (a task)
//! repeatedly sleeps an exponentially distributed simulated delay and then
//! hops to a random LP (bumping its counter). Every hop is one timer event
//! and one task poll. Reported as events (hops) per second, for a small (64)
//! and a large (4096) pending-event population: the timer heap's cost grows
//! with the population.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kernbench::engine::{sleep, Executor};
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

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine");
    g.throughput(Throughput::Elements(TOTAL_HOPS));
    g.sample_size(20);
    for jobs in [64u64, 4096] {
        g.bench_function(format!("phold_{jobs}_pending"), |b| b.iter(|| phold(jobs)));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
