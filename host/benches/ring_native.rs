//! The seed ring all-reduce driven natively (no wasm): one engine task per
//! rank calls the machine's `load` / `send` / `recv` / `binary` / `store`
//! exactly as the `ring_allreduce` component does. Its cost per step is
//! what the simulator core (engine + hardware model) costs without the
//! wasmtime side; `--bench scale` gives the whole step. The difference is
//! the price of the guest boundary.
//!
//! ```sh
//! cargo bench -p kernbench-host --bench ring_native
//! cargo bench -p kernbench-host --bench ring_native -- 64 steps=65536   # fewer steps (callgrind)
//! cargo bench -p kernbench-host --bench ring_native -- 1024 parts=2      # and two rings on 1 / 2 threads
//! ```

use kernbench::address::Space;
use kernbench::config::ccl::{BufferKind, NeighbourTopology};
use kernbench::config::TopologySpec;
use kernbench::engine::{self, Executor, RunOutcome};
use kernbench::hw::dtype::{BinOp, Dtype};
use kernbench::hw::machine::{CommId, IpcqSettings, Shape};
use kernbench::hw::Machine;
use kernbench::topology::PeCoord;
use std::sync::Arc;
use std::time::Instant;

/// The CLI's heap, so that the figures are the CLI's.
#[global_allocator]
static HEAP: kernbench::heap::SplitHeap = kernbench::heap::SplitHeap;

/// How the ranks are run: `rings` rings of consecutive SIPs, on a
/// machine of `parts` partitions (each ring inside one), in windows on
/// `threads` threads (one partition: one executor, no windows).
#[derive(Clone, Copy)]
struct Split {
    rings: u32,
    parts: usize,
    threads: usize,
}

fn ring(ranks: u32, n_elem: u32, rounds: u32, split: Split) -> (f64, u64) {
    let mut spec = TopologySpec::default_embedded();
    spec.system.sips.count = ranks;
    let topo = Arc::new(kernbench::topology::build(&spec).unwrap());
    let budget = Arc::new(kernbench::budget::MemoryBudget::unlimited());
    let machine = Machine::with_partitions(topo, false, budget, split.parts);
    let pes: Vec<PeCoord> = (0..ranks)
        .map(|sip| PeCoord {
            sip,
            cube: 0,
            pe: 0,
        })
        .collect();
    let per_ring = ranks / split.rings;
    for ring in pes.chunks(per_ring as usize) {
        let tables =
            kernbench::ccl::tables::builtin(NeighbourTopology::Ring1d, ring, (per_ring, 1))
                .unwrap();
        machine
            .install_ipcq(
                CommId::WORLD,
                &tables,
                IpcqSettings::new(BufferKind::Tcm, 4, 1 << 20),
            )
            .unwrap();
    }
    let inputs: Vec<_> = pes
        .iter()
        .map(|pe| {
            let hbm = Space::Hbm {
                sip: pe.sip,
                cube: 0,
            };
            machine.alloc_tensor(hbm, &[n_elem], Dtype::F16).unwrap()
        })
        .collect();
    let kernel = |rank: usize| {
        let (m, pe, t) = (machine.clone(), pes[rank], inputs[rank].clone());
        engine::spawn_detached(async move {
            let addr = t.addr();
            let mut acc = m.load(pe, addr, &[n_elem], Dtype::F16).unwrap();
            let mut current = None;
            // One direction name per kernel, the PE's own, as a replayed
            // kernel's calls share their command list's.
            let (east, west) = (
                m.direction(pe, CommId::WORLD, "E"),
                m.direction(pe, CommId::WORLD, "W"),
            );
            let shape = Shape::from_slice(&[n_elem]);
            for _ in 0..rounds * (per_ring - 1) {
                let out = current.clone().unwrap_or_else(|| acc.clone());
                m.send((pe, CommId::WORLD), &east, out).await.unwrap();
                let recv = m
                    .recv((pe, CommId::WORLD), Some(&west), &shape, Dtype::F16, None)
                    .await
                    .unwrap();
                acc = m.binary(pe, BinOp::Add, &acc, &recv).unwrap();
                current = Some(recv);
            }
            m.store(pe, addr, &acc).unwrap();
            for e in m.take_outstanding(pe) {
                e.wait().await;
            }
            drop(t);
        });
    };
    let start = Instant::now();
    if split.parts == 1 {
        let ex = Executor::new();
        ex.enter(|| (0..pes.len()).for_each(kernel));
        assert_eq!(ex.run(), RunOutcome::Finished);
    } else {
        let ends = machine.run_partitions(split.threads, |p| {
            (0..pes.len())
                .filter(|&r| machine.partition_of(pes[r].sip) == p)
                .for_each(kernel)
        });
        assert!(ends.iter().all(|e| e.outcome == RunOutcome::Finished));
        assert_eq!(machine.diverged(), None);
    }
    let wall = start.elapsed().as_secs_f64();
    (wall, machine.stats().math_commands)
}

fn main() {
    kernbench::heap::keep_freed_memory();
    // Rank counts may be given on the command line (`-- 256 1024`).
    let mut counts: Vec<u32> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    if counts.is_empty() {
        counts = vec![64, 256, 1024];
    }
    // About this many steps per count (whole rounds of the ring).
    let target: u32 = std::env::args()
        .find_map(|a| a.strip_prefix("steps=").and_then(|n| n.parse().ok()))
        .unwrap_or(1 << 20);
    // `parts=2`: also the same ring on a machine in two partitions, run in
    // windows on one thread and on two; and two rings of half the ranks
    // each, one per partition (nothing crosses), on one executor, then in
    // windows on two threads.
    let parts: usize = std::env::args()
        .find_map(|a| a.strip_prefix("parts=").and_then(|n| n.parse().ok()))
        .unwrap_or(1);
    println!("{:<44} {:>12}   detail", "figure", "value");
    for ranks in counts {
        let mut splits = vec![(
            format!("native ring step ({ranks} ranks, 16 B)"),
            Split {
                rings: 1,
                parts: 1,
                threads: 1,
            },
        )];
        if parts > 1 {
            let rings = format!("{parts} rings of {}", ranks / parts as u32);
            let runs = [
                (1, parts, 1),
                (1, parts, parts),
                (parts, 1, 1),
                (parts, parts, parts),
            ];
            for (n_rings, p, threads) in runs {
                let what = match n_rings {
                    1 => "the same ring".to_string(),
                    _ => rings.clone(),
                };
                let how = match (p, threads) {
                    (1, _) => "one executor".to_string(),
                    (p, t) => format!("{p} partitions, {t} thread(s)"),
                };
                let split = Split {
                    rings: n_rings as u32,
                    parts: p,
                    threads,
                };
                splits.push((format!("{what}, {how}"), split));
            }
        }
        for (name, split) in splits {
            let per_ring = ranks / split.rings;
            let rounds = (target / (ranks * (per_ring - 1))).max(1);
            let (wall, steps) = ring(ranks, 8, rounds, split);
            println!(
                "{name:<44} {:>9.2} us   {steps} steps in {wall:.2} s (no wasm)",
                wall * 1e6 / steps as f64
            );
        }
    }
}
