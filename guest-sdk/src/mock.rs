//! A native mock runner (seed 003 §6, `run_kernel_in_mock`): runs an
//! algorithm's kernel for every rank concurrently on OS threads, with
//! in-memory FIFOs for `send`/`recv`. Correctness only: no timing, no DMA,
//! no fabric. Each rank is one SIP whose single participating PE is
//! (cube 0, pe 0), as on the simulator's leader-only mapping.

use crate::{Algorithm, BinOp, Dtype, Tensor, Tl};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::time::Duration;

/// Address at which each rank's input shard lives (the kernel's `t_ptr`).
pub const MOCK_T_PTR: u64 = 0x1000;
/// First address handed out for mock scratch tensors.
const SCRATCH_BASE: u64 = 0x4000_0000_0000;
/// How long a `recv` waits before the mock declares a deadlock.
const DEADLOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// Mock run configuration.
#[derive(Debug, Clone)]
pub struct MockConfig {
    pub world_size: u32,
    /// "ring_1d" (E/W neighbours) or "mesh_2d" / "torus_2d" (N/S/E/W on a
    /// `w × h` grid, `w·h = world_size`).
    pub topology: String,
    pub grid_w: u32,
    /// Slots per direction; a `send` blocks while the peer's queue is full.
    pub n_slots: usize,
    pub dtype: Dtype,
    /// `kernel_args(...)` (the four host-appended args are added by the mock).
    pub kernel_args: Vec<i64>,
}

impl MockConfig {
    pub fn ring(world_size: u32, dtype: Dtype, kernel_args: Vec<i64>) -> Self {
        MockConfig {
            world_size,
            topology: "ring_1d".into(),
            grid_w: 0,
            n_slots: 4,
            dtype,
            kernel_args,
        }
    }
}

fn reverse(dir: &str) -> String {
    match dir {
        "E" => "W".into(),
        "W" => "E".into(),
        "N" => "S".into(),
        "S" => "N".into(),
        other => match other.strip_prefix("global_") {
            Some(d) => format!("global_{}", reverse(d)),
            None => other.to_string(),
        },
    }
}

/// Neighbour `(direction, peer rank)` pairs of `rank`.
fn neighbours(cfg: &MockConfig, rank: u32) -> Vec<(String, u32)> {
    let n = cfg.world_size;
    match cfg.topology.as_str() {
        "ring_1d" => vec![
            ("E".into(), (rank + 1) % n),
            ("W".into(), (rank + n - 1) % n),
        ],
        "mesh_2d" | "torus_2d" => {
            let w = if cfg.grid_w == 0 {
                (n as f64).sqrt() as u32
            } else {
                cfg.grid_w
            };
            assert!(
                w > 0 && n.is_multiple_of(w),
                "mock: world_size {n} is not a {w}-wide grid"
            );
            let h = n / w;
            let (x, y) = (rank % w, rank / w);
            let wrap = cfg.topology == "torus_2d";
            let mut v = Vec::new();
            let mut add = |d: &str, nx: i64, ny: i64| {
                let (nx, ny) = if wrap {
                    (nx.rem_euclid(w as i64), ny.rem_euclid(h as i64))
                } else {
                    (nx, ny)
                };
                if nx >= 0
                    && ny >= 0
                    && nx < w as i64
                    && ny < h as i64
                    && (nx, ny) != (x as i64, y as i64)
                {
                    v.push((d.to_string(), ny as u32 * w + nx as u32));
                }
            };
            add("E", x as i64 + 1, y as i64);
            add("W", x as i64 - 1, y as i64);
            add("S", x as i64, y as i64 + 1);
            add("N", x as i64, y as i64 - 1);
            v
        }
        other => panic!("mock: unknown topology {other:?}"),
    }
}

/// A mock tensor owns its bytes.
#[derive(Debug, Clone)]
pub struct MockTensor {
    addr: u64,
    shape: Vec<u32>,
    dtype: Dtype,
    data: Vec<u8>,
}

impl Tensor for MockTensor {
    fn shape(&self) -> Vec<u32> {
        self.shape.clone()
    }
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn addr(&self) -> u64 {
        self.addr
    }
    fn nbytes(&self) -> u64 {
        self.data.len() as u64
    }
}

struct RankState {
    memory: Vec<u8>,
    next_scratch: u64,
    rr: usize,
}

/// The mock's kernel language for one rank.
pub struct MockTl {
    rank: u32,
    tx: HashMap<String, SyncSender<Vec<u8>>>,
    rx: Vec<(String, Receiver<Vec<u8>>)>,
    state: RefCell<RankState>,
}

fn nbytes_of(shape: &[u32], dtype: Dtype) -> usize {
    shape.iter().map(|&d| d as usize).product::<usize>() * dtype.itemsize()
}

impl MockTl {
    fn scratch(&self, shape: &[u32], dtype: Dtype, data: Vec<u8>) -> MockTensor {
        let mut st = self.state.borrow_mut();
        let addr = st.next_scratch;
        st.next_scratch += data.len() as u64;
        MockTensor {
            addr,
            shape: shape.to_vec(),
            dtype,
            data,
        }
    }

    fn range(&self, addr: u64, len: usize) -> std::ops::Range<usize> {
        let mem_len = self.state.borrow().memory.len();
        let start = addr.checked_sub(MOCK_T_PTR).unwrap_or_else(|| {
            panic!(
                "mock rank {}: address {addr:#x} is below the shard at {MOCK_T_PTR:#x}",
                self.rank
            )
        }) as usize;
        if start + len > mem_len {
            panic!(
                "mock rank {}: access [{addr:#x}, +{len}) is outside the shard [{MOCK_T_PTR:#x}, +{mem_len})",
                self.rank
            );
        }
        start..start + len
    }

    fn take(&self, dir: Option<&str>) -> Vec<u8> {
        let deadline = std::time::Instant::now() + DEADLOCK_TIMEOUT;
        match dir {
            Some(d) => {
                let (_, rx) = self.rx.iter().find(|(n, _)| n == d).unwrap_or_else(|| {
                    panic!(
                        "mock rank {}: recv from direction {d:?}, which is not installed",
                        self.rank
                    )
                });
                match rx.recv_timeout(DEADLOCK_TIMEOUT) {
                    Ok(v) => v,
                    Err(RecvTimeoutError::Timeout) => {
                        panic!(
                            "mock rank {}: deadlock: recv(dir={d:?}) waited {DEADLOCK_TIMEOUT:?}",
                            self.rank
                        )
                    }
                    Err(RecvTimeoutError::Disconnected) => {
                        panic!(
                            "mock rank {}: recv(dir={d:?}): the peer finished without sending",
                            self.rank
                        )
                    }
                }
            }
            None => loop {
                let n = self.rx.len();
                let start = self.state.borrow().rr;
                for i in 0..n {
                    let idx = (start + i) % n;
                    if let Ok(v) = self.rx[idx].1.try_recv() {
                        self.state.borrow_mut().rr = (idx + 1) % n;
                        return v;
                    }
                }
                if std::time::Instant::now() > deadline {
                    panic!(
                        "mock rank {}: deadlock: recv(any) waited {DEADLOCK_TIMEOUT:?}",
                        self.rank
                    );
                }
                std::thread::sleep(Duration::from_micros(50));
            },
        }
    }
}

fn elementwise(op: BinOp, dtype: Dtype, a: &[u8], b: &[u8]) -> Vec<u8> {
    let (x, y) = (dtype.decode(a), dtype.decode(b));
    let r: Vec<f64> = x
        .iter()
        .zip(&y)
        .map(|(&p, &q)| match op {
            BinOp::Add => p + q,
            BinOp::Sub => p - q,
            BinOp::Mul => p * q,
            BinOp::Max => p.max(q),
            BinOp::Min => p.min(q),
        })
        .collect();
    dtype.encode(&r)
}

impl Tl for MockTl {
    type Tensor = MockTensor;

    fn program_id(&self, _axis: u32) -> i64 {
        0
    }
    fn num_programs(&self, _axis: u32) -> i64 {
        1
    }
    fn load(&self, addr: u64, shape: &[u32], dtype: Dtype) -> MockTensor {
        let r = self.range(addr, nbytes_of(shape, dtype));
        let data = self.state.borrow().memory[r].to_vec();
        MockTensor {
            addr,
            shape: shape.to_vec(),
            dtype,
            data,
        }
    }
    fn store(&self, addr: u64, value: &MockTensor) {
        let r = self.range(addr, value.data.len());
        self.state.borrow_mut().memory[r].copy_from_slice(&value.data);
    }
    fn send(&self, dir: &str, value: &MockTensor) {
        let tx = self.tx.get(dir).unwrap_or_else(|| {
            panic!(
                "mock rank {}: send to direction {dir:?}, which is not installed",
                self.rank
            )
        });
        tx.send(value.data.clone()).unwrap_or_else(|_| {
            panic!(
                "mock rank {}: send(dir={dir:?}): the peer has finished",
                self.rank
            )
        });
    }
    fn recv(&self, dir: Option<&str>, shape: &[u32], dtype: Dtype) -> MockTensor {
        let data = self.take(dir);
        assert_eq!(
            data.len(),
            nbytes_of(shape, dtype),
            "mock rank {}: recv expected {shape:?} {dtype:?}, got {} bytes",
            self.rank,
            data.len()
        );
        self.scratch(shape, dtype, data)
    }
    fn recv_into(
        &self,
        dir: Option<&str>,
        shape: &[u32],
        dtype: Dtype,
        dst_addr: u64,
    ) -> MockTensor {
        let t = self.recv(dir, shape, dtype);
        self.store(dst_addr, &t);
        MockTensor {
            addr: dst_addr,
            ..t
        }
    }
    fn binary(&self, op: BinOp, a: &MockTensor, b: &MockTensor) -> MockTensor {
        assert!(
            a.shape == b.shape && a.dtype == b.dtype,
            "mock rank {}: {op:?} of mismatched tensors {:?} {:?} and {:?} {:?}",
            self.rank,
            a.shape,
            a.dtype,
            b.shape,
            b.dtype
        );
        self.scratch(
            &a.shape,
            a.dtype,
            elementwise(op, a.dtype, &a.data, &b.data),
        )
    }
    fn scale(&self, a: &MockTensor, factor: f64) -> MockTensor {
        let v: Vec<f64> = a.dtype.decode(&a.data).iter().map(|x| x * factor).collect();
        self.scratch(&a.shape, a.dtype, a.dtype.encode(&v))
    }
    fn now_ps(&self) -> u64 {
        0
    }
    fn log(&self, msg: &str) {
        println!("[mock rank {}] {msg}", self.rank);
    }
}

/// Run `A`'s kernel on every rank with `inputs[rank]` as its shard at
/// [`MOCK_T_PTR`]; return every rank's shard afterwards. A panic in any rank
/// (bad direction, deadlock, ...) is re-raised with the rank's message.
pub fn run_kernel_in_mock<A: Algorithm>(cfg: &MockConfig, inputs: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let n = cfg.world_size;
    assert_eq!(inputs.len(), n as usize, "mock: need one input per rank");
    let kind = crate::topo::standard_kind(&cfg.topology).unwrap_or(0) as i64;
    let mut tx: Vec<HashMap<String, SyncSender<Vec<u8>>>> =
        (0..n).map(|_| HashMap::new()).collect();
    let mut rx: Vec<Vec<(String, Receiver<Vec<u8>>)>> = (0..n).map(|_| Vec::new()).collect();
    for r in 0..n {
        for (dir, peer) in neighbours(cfg, r) {
            let (s, q) = sync_channel(cfg.n_slots);
            tx[r as usize].insert(dir.clone(), s);
            rx[peer as usize].push((reverse(&dir), q));
        }
    }
    let ranks: Vec<_> = tx.into_iter().zip(rx).enumerate().collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = ranks
            .into_iter()
            .map(|(r, (tx, rx))| {
                let memory = cfg.dtype.encode(&inputs[r]);
                let mut args = cfg.kernel_args.clone();
                args.extend([r as i64, kind, 0, 0]);
                s.spawn(move || {
                    let tl = MockTl {
                        rank: r as u32,
                        tx,
                        rx,
                        state: RefCell::new(RankState {
                            memory,
                            next_scratch: SCRATCH_BASE,
                            rr: 0,
                        }),
                    };
                    A::kernel(&tl, MOCK_T_PTR, &args);
                    let st = tl.state.into_inner();
                    cfg.dtype.decode(&st.memory)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}
