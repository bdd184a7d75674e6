//! Sequences of `tl.*` calls, as two PE kernels would make them, against
//! the machine model (no wasm): loads, stores, sends, receives, math and
//! drops with arbitrary addresses, shapes, dtypes and directions. Every
//! call either works or returns an error; the run finishes or stalls (a
//! deadlock the host reports); nothing panics, and the same program gives
//! the same memory and the same simulated time twice.
#![no_main]
use arbitrary::Arbitrary;
use kernbench::address::Space;
use kernbench::config::ccl::{BufferKind, NeighbourTopology};
use kernbench::config::TopologySpec;
use kernbench::engine::{self, Executor, RunOutcome};
use kernbench::hw::dtype::{BinOp, Dtype};
use kernbench::hw::machine::{CommId, IpcqSettings, Shape};
use kernbench::hw::{Machine, TensorRef};
use kernbench::topology::PeCoord;
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};

#[derive(Arbitrary, Debug, Clone)]
enum Addr {
    /// Inside (or past) the shared HBM tensor.
    Shared(u32),
    /// Anywhere at all.
    Raw(u64),
}

#[derive(Arbitrary, Debug, Clone)]
enum Op {
    Load {
        addr: Addr,
        shape: Vec<u16>,
        dtype: u8,
    },
    LoadWild {
        addr: Addr,
        shape: Vec<u32>,
        dtype: u8,
    },
    Store {
        slot: u8,
        addr: Addr,
    },
    Send {
        slot: u8,
        dir: u8,
    },
    Recv {
        dir: Option<u8>,
        shape: Vec<u16>,
        dtype: u8,
        into: Option<Addr>,
    },
    Binary {
        op: u8,
        a: u8,
        b: u8,
    },
    Scale {
        a: u8,
        factor: f64,
    },
    Drop {
        slot: u8,
    },
}

const DIRS: [&str; 3] = ["E", "W", "N"];

fn dtype(d: u8) -> Dtype {
    Dtype::ALL[d as usize % Dtype::ALL.len()]
}

fn addr(a: &Addr, shared: u64) -> u64 {
    match *a {
        Addr::Shared(off) => shared + off as u64,
        Addr::Raw(x) => x,
    }
}

async fn kernel(m: Arc<Machine>, pe: PeCoord, ops: Vec<Op>, shared: u64) {
    let mut slots: Vec<TensorRef> = Vec::new();
    let pick = |slots: &Vec<TensorRef>, i: u8| -> Option<TensorRef> {
        (!slots.is_empty()).then(|| slots[i as usize % slots.len()].clone())
    };
    for op in ops {
        let made = match op {
            Op::Load {
                addr: a,
                shape,
                dtype: d,
            } => {
                let shape: Vec<u32> = shape.iter().map(|&x| x as u32).collect();
                m.load(pe, addr(&a, shared), &shape, dtype(d)).ok()
            }
            Op::LoadWild {
                addr: a,
                shape,
                dtype: d,
            } => m.load(pe, addr(&a, shared), &shape, dtype(d)).ok(),
            Op::Store { slot, addr: a } => {
                if let Some(t) = pick(&slots, slot) {
                    let _ = m.store(pe, addr(&a, shared), &t);
                }
                None
            }
            Op::Send { slot, dir } => {
                if let Some(t) = pick(&slots, slot) {
                    let d = m.direction(pe, CommId::WORLD, DIRS[dir as usize % 3]);
                    let _ = m.send((pe, CommId::WORLD), &d, t).await;
                }
                None
            }
            Op::Recv {
                dir,
                shape,
                dtype: d,
                into,
            } => {
                let shape: Shape = shape.iter().map(|&x| x as u32).collect();
                let dir = dir.map(|x| m.direction(pe, CommId::WORLD, DIRS[x as usize % 3]));
                let dst = into.map(|a| addr(&a, shared));
                m.recv((pe, CommId::WORLD), dir.as_ref(), &shape, dtype(d), dst)
                    .await
                    .ok()
            }
            Op::Binary { op, a, b } => {
                let op =
                    [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Max, BinOp::Min][op as usize % 5];
                match (pick(&slots, a), pick(&slots, b)) {
                    (Some(a), Some(b)) => m.binary(pe, op, &a, &b).ok(),
                    _ => None,
                }
            }
            Op::Scale { a, factor } => pick(&slots, a).and_then(|a| m.scale(pe, &a, factor).ok()),
            Op::Drop { slot } => {
                if !slots.is_empty() {
                    let i = slot as usize % slots.len();
                    slots.swap_remove(i);
                }
                None
            }
        };
        if let Some(t) = made {
            slots.push(t);
        }
    }
    drop(slots);
    for done in m.take_outstanding(pe) {
        done.wait().await;
    }
}

/// The default machine with two SIPs, compiled once.
fn topology() -> Arc<kernbench::topology::Topology> {
    static T: OnceLock<Arc<kernbench::topology::Topology>> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = TopologySpec::default_embedded();
        t.system.sips.count = 2;
        Arc::new(kernbench::topology::build(&t).expect("default topology"))
    })
    .clone()
}

/// Run both programs; (outcome finished?, end time, memory digest).
fn run(progs: &[Vec<Op>; 2]) -> (bool, u64, String) {
    let m = Machine::new(topology());
    let pes = [0, 1].map(|sip| PeCoord {
        sip,
        cube: 0,
        pe: 0,
    });
    let tables = kernbench::ccl::tables::builtin(NeighbourTopology::Ring1d, &pes, (2, 1))
        .expect("a 2-PE ring");
    m.install_ipcq(
        CommId::WORLD,
        &tables,
        IpcqSettings::new(BufferKind::Tcm, 2, 4096),
    )
    .expect("IPCQ fits");
    let shared = m
        .alloc_tensor(Space::Hbm { sip: 0, cube: 0 }, &[1 << 16], Dtype::F32)
        .expect("fits");
    m.host_write(shared.space, shared.offset, &vec![0x3c; 1 << 18])
        .expect("budget");
    let ex = Executor::new();
    for (pe, prog) in pes.iter().zip(progs) {
        ex.spawn(kernel(m.clone(), *pe, prog.clone(), shared.addr()));
    }
    let outcome = ex.run();
    let _ = engine::try_now();
    let finished = matches!(outcome, RunOutcome::Finished);
    (finished, ex.now(), m.memory_digest())
}

fuzz_target!(|progs: [Vec<Op>; 2]| {
    if progs.iter().any(|p| p.len() > 64) {
        return;
    }
    let a = run(&progs);
    let b = run(&progs);
    assert_eq!(a, b, "the same program must give the same result");
});
