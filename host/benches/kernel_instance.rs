//! Cost of one PE kernel instance of a Rust guest: new Store, instantiate
//! (InstancePre + pooling allocator), run a small kernel (ring_allreduce
//! with world size 1: one load and one store of 64 f16), drain, drop.

use criterion::{criterion_group, criterion_main, Criterion};
use kernbench::address::Space;
use kernbench::config::TopologySpec;
use kernbench::engine::Executor;
use kernbench::hw::dtype::Dtype;
use kernbench::hw::Machine;
use kernbench::runtime::kernel::KernelLaunch;
use kernbench::runtime::recording_memo::Source;
use kernbench::runtime::{Loader, LoaderOptions};
use kernbench::topology::{build, PeCoord};
use std::sync::Arc;

fn bench(c: &mut Criterion) {
    let loader = Loader::new(LoaderOptions::default()).unwrap();
    let algo = loader.load_algorithm("ring_allreduce", None).unwrap();
    let spec = TopologySpec::default_embedded();
    let machine = Machine::new(Arc::new(build(&spec).unwrap()));
    let t = machine
        .alloc_tensor(Space::Hbm { sip: 0, cube: 0 }, &[64], Dtype::F16)
        .unwrap();
    let launch = KernelLaunch {
        comm: kernbench::hw::machine::CommId::WORLD,
        pe: PeCoord {
            sip: 0,
            cube: 0,
            pe: 0,
        },
        t_ptr: t.addr(),
        args: vec![64, 1, 0, 0, 0, 0],
    };
    let limits = loader.run_limits(8 << 30);
    c.bench_function("kernel_instance_instantiate_run_drop", |b| {
        b.iter(|| {
            let ex = Executor::new();
            let (a, m, l) = (algo.clone(), machine.clone(), launch.clone());
            let lim = limits.clone();
            let h = ex.spawn(async move {
                a.run_kernel("ring_allreduce", m, &lim, l, Source::record_here())
                    .await
            });
            ex.run();
            h.try_take().unwrap().unwrap();
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
