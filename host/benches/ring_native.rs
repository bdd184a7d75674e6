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
//! ```

use kernbench::address::Space;
use kernbench::config::ccl::{BufferKind, NeighbourTopology};
use kernbench::config::TopologySpec;
use kernbench::engine::{self, Executor, RunOutcome};
use kernbench::hw::dtype::{BinOp, Dtype};
use kernbench::hw::machine::{IpcqSettings, Shape};
use kernbench::hw::Machine;
use kernbench::topology::PeCoord;
use std::sync::Arc;
use std::time::Instant;

/// The CLI's heap, so that the figures are the CLI's.
#[global_allocator]
static HEAP: kernbench::heap::SplitHeap = kernbench::heap::SplitHeap;

fn ring(ranks: u32, n_elem: u32, rounds: u32) -> (f64, u64) {
    let mut spec = TopologySpec::default_embedded();
    spec.system.sips.count = ranks;
    let machine = Machine::new(Arc::new(kernbench::topology::build(&spec).unwrap()));
    let pes: Vec<PeCoord> = (0..ranks)
        .map(|sip| PeCoord {
            sip,
            cube: 0,
            pe: 0,
        })
        .collect();
    let tables =
        kernbench::ccl::tables::builtin(NeighbourTopology::Ring1d, &pes, (ranks, 1)).unwrap();
    machine
        .install_ipcq(&tables, IpcqSettings::new(BufferKind::Tcm, 4, 1 << 20))
        .unwrap();
    let ex = Executor::new();
    for &pe in &pes {
        let m = machine.clone();
        let t = m
            .alloc_tensor(
                Space::Hbm {
                    sip: pe.sip,
                    cube: 0,
                },
                &[n_elem],
                Dtype::F16,
            )
            .unwrap();
        ex.spawn(async move {
            let addr = t.addr();
            let mut acc = m.load(pe, addr, &[n_elem], Dtype::F16).unwrap();
            let mut current = None;
            // One direction name per kernel, the PE's own, as a replayed
            // kernel's calls share their command list's.
            let (east, west) = (m.direction(pe, "E"), m.direction(pe, "W"));
            let shape = Shape::from_slice(&[n_elem]);
            for _ in 0..rounds * (ranks - 1) {
                let out = current.clone().unwrap_or_else(|| acc.clone());
                m.send(pe, &east, out).await.unwrap();
                let recv = m
                    .recv(pe, Some(&west), &shape, Dtype::F16, None)
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
    }
    let start = Instant::now();
    assert_eq!(ex.run(), RunOutcome::Finished);
    let wall = start.elapsed().as_secs_f64();
    let _ = engine::try_now();
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
    println!("{:<34} {:>12}   detail", "figure", "value");
    for ranks in counts {
        let rounds = (target / (ranks * (ranks - 1))).max(1);
        let (wall, steps) = ring(ranks, 8, rounds);
        println!(
            "{:<34} {:>9.2} us   {steps} steps in {wall:.2} s (no wasm)",
            format!("native ring step ({ranks} ranks, 16 B)"),
            wall * 1e6 / steps as f64
        );
    }
}
