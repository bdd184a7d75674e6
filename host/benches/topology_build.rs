//! Topology compile and routing speed: the six-stage pipeline on the
//! default chip and on a 64-SIP torus of 8x8-cube SIPs (108,928 nodes,
//! 297,984 directed links), and uncached shortest-path queries on the
//! large one (PE to PE on the next SIP, and to the far side of the torus).

use criterion::{criterion_group, criterion_main, Criterion};
use kernbench::config::{Origin, DEFAULT_TOPOLOGY_YAML};
use kernbench::routing::PathRouter;
use kernbench::topology::{compile, LayoutCache, NodeId, PeCoord};
use std::sync::Arc;

fn large_yaml() -> String {
    DEFAULT_TOPOLOGY_YAML
        .replace("count: 4", "count: 64")
        .replace("topology: ring_1d ", "topology: torus_2d ")
        .replace("w: 4\n    h: 4\n  ucie", "w: 8\n    h: 8\n  ucie")
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("topology");
    g.sample_size(10);
    g.bench_function("compile default (4 SIPs, 1680 nodes)", |b| {
        b.iter(|| {
            compile(
                DEFAULT_TOPOLOGY_YAML,
                Origin::Embedded("d"),
                &LayoutCache::Off,
            )
            .unwrap()
        })
    });
    let large = large_yaml();
    g.bench_function("compile 64-SIP torus of 8x8 cubes", |b| {
        b.iter(|| compile(&large, Origin::Embedded("l"), &LayoutCache::Off).unwrap())
    });
    let t = Arc::new(compile(&large, Origin::Embedded("l"), &LayoutCache::Off).unwrap());
    assert_eq!(t.node_count(), 108_928);
    let pe = |sip, cube| NodeId::Pe(PeCoord { sip, cube, pe: 0 });
    for (name, to) in [("next SIP", pe(1, 0)), ("far SIP", pe(36, 63))] {
        g.bench_function(format!("uncached path on the large torus: {name}"), |b| {
            // A fresh router per batch (its views built by a warm-up
            // query): measures the search, not the cache.
            b.iter_batched(
                || {
                    let r = PathRouter::new(t.clone());
                    r.find_path(pe(0, 0), pe(0, 1)).unwrap();
                    r
                },
                |r| r.find_path(pe(0, 0), to).unwrap(),
                criterion::BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
