//! Throughput of the MATH unit's data effect on the host: element-wise
//! f16 / bf16 / f32 add over 1 MiB operands (bytes read + written per
//! second).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kernbench::hw::dtype::{binary, BinOp, Dtype};

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("add_1MiB");
    for dtype in [Dtype::F16, Dtype::Bf16, Dtype::F32] {
        let n = (1 << 20) / dtype.itemsize() as usize;
        let values: Vec<f64> = (0..n).map(|i| (i % 1000) as f64 * 0.25).collect();
        let a = dtype.from_f64(&values);
        let b = dtype.from_f64(&values[..].iter().rev().copied().collect::<Vec<_>>());
        g.throughput(Throughput::Bytes(3 << 20));
        g.bench_function(dtype.name(), |bch| {
            bch.iter(|| binary(BinOp::Add, dtype, &a, &b))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
