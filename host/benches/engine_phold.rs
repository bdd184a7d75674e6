//! PHOLD-style throughput of the engine core alone (no wasm): `LPS` logical
//! processes, `JOBS` jobs; each job repeatedly sleeps an exponentially
//! distributed simulated delay and then hops to a random LP (bumping its
//! counter). Every hop is one timer event + one task poll. Reported as
//! events (hops) per second.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kernbench::engine::{sleep, Executor};
use std::cell::RefCell;
use std::rc::Rc;

const LPS: usize = 1024;
const JOBS: u64 = 4096;
const HOPS: u64 = 256;

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn phold() -> u64 {
    let ex = Executor::new();
    let counts = Rc::new(RefCell::new(vec![0u64; LPS]));
    for j in 0..JOBS {
        let counts = counts.clone();
        ex.spawn(async move {
            let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ (j + 1).wrapping_mul(0x2545_F491_4F6C_DD1D);
            for _ in 0..HOPS {
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
    assert_eq!(total, JOBS * HOPS);
    total
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine");
    g.throughput(Throughput::Elements(JOBS * HOPS));
    g.sample_size(20);
    g.bench_function("phold_hops", |b| b.iter(phold));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
