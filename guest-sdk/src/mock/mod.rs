//! A native mock runner (seed 003 §6, `run_kernel_in_mock`): runs an
//! algorithm's kernel for every rank concurrently on OS threads, with
//! in-memory FIFOs for `send`/`recv`. Correctness only: no timing, no DMA,
//! no fabric. Each rank is one SIP whose single participating PE is
//! (cube 0, pe 0), as on the simulator's leader-only mapping.

mod math;
mod tables;

pub use tables::{rows, table};

use crate::{Algorithm, BinOp, Dtype, Tensor, Tl};
use math::elementwise;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Address at which each rank's input shard lives (the kernel's `t_ptr`).
pub const MOCK_T_PTR: u64 = 0x1000;
/// First address handed out for mock scratch tensors.
const SCRATCH_BASE: u64 = 0x4000_0000_0000;
/// How long a `recv`, or a `send` with no free slot, waits before the mock
/// declares a deadlock.
const DEADLOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// The IPCQ slots of one direction, a counting semaphore: a message holds
/// one from its `send` until the tensor it was received as is dropped, as
/// in the simulator (whose received tensors point at their slot), so a
/// kernel that keeps more received tensors alive than there are slots
/// deadlocks here as it would there.
#[derive(Debug)]
struct Slots {
    free: Mutex<usize>,
    freed: Condvar,
}

impl Slots {
    fn new(n: usize) -> Arc<Self> {
        Arc::new(Slots {
            free: Mutex::new(n),
            freed: Condvar::new(),
        })
    }

    /// Take a slot; false when none came free within `timeout`.
    fn take(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            free = self
                .freed
                .wait_timeout(free, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        *free -= 1;
        true
    }

    fn give(&self) {
        *self.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.freed.notify_one();
    }
}

/// A slot held by a received tensor (and its clones), given back when the
/// last of them is dropped.
#[derive(Debug)]
struct SlotHeld(Arc<Slots>);

impl Drop for SlotHeld {
    fn drop(&mut self) {
        self.0.give();
    }
}

/// A message in flight: its bytes and the slots of its direction.
type Message = (Vec<u8>, Arc<Slots>);

/// A rank's side of a direction it sends on.
type Outbox = (Sender<Message>, Arc<Slots>);

/// Mock run configuration.
#[derive(Debug, Clone)]
pub struct MockConfig {
    pub world_size: u32,
    /// "ring_1d" (E/W neighbours), "global_ring" (global_E / global_W: the
    /// SIP ring of `intercube_multisip` with one cube per SIP),
    /// "tree_binary" (P, C0, C1) or "mesh_2d" /
    /// "torus_2d" (N/S/E/W on a `w × h` grid, `w·h = world_size`), as the
    /// host's builtin tables.
    pub topology: String,
    pub grid_w: u32,
    /// Slots per direction; a `send` blocks while the peer's queue is full.
    pub n_slots: usize,
    pub dtype: Dtype,
    /// `kernel_args(...)` (the four host-appended args are added by the mock).
    pub kernel_args: Vec<i64>,
    /// A premul_sum call's factor of each rank: the mock appends
    /// `out-ptr` and the factor as the host does.
    pub factor: Option<fn(u32) -> f64>,
}

impl MockConfig {
    /// `world_size` ranks on the table `topology` (a 2-D table: the
    /// squarest grid unless `grid_w` is set), 4 slots per direction.
    pub fn new(topology: &str, world_size: u32, dtype: Dtype, kernel_args: Vec<i64>) -> Self {
        MockConfig {
            world_size,
            topology: topology.into(),
            grid_w: 0,
            n_slots: 4,
            dtype,
            kernel_args,
            factor: None,
        }
    }

    /// [`MockConfig::new`] on `ring_1d`.
    pub fn ring(world_size: u32, dtype: Dtype, kernel_args: Vec<i64>) -> Self {
        Self::new("ring_1d", world_size, dtype, kernel_args)
    }
}

impl MockConfig {
    /// `(w, h)` of a 2-D topology's grid.
    fn grid(&self) -> (u32, u32) {
        let n = self.world_size;
        let w = if self.grid_w == 0 {
            (n as f64).sqrt() as u32
        } else {
            self.grid_w
        };
        assert!(
            w > 0 && n.is_multiple_of(w),
            "mock: world_size {n} is not a {w}-wide grid"
        );
        (w, n / w)
    }
}

/// A mock tensor owns its bytes.
#[derive(Debug, Clone)]
pub struct MockTensor {
    addr: u64,
    shape: Vec<u32>,
    dtype: Dtype,
    data: Vec<u8>,
    /// A received tensor's IPCQ slot, held until the tensor (and its
    /// clones) are dropped.
    _slot: Option<Arc<SlotHeld>>,
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
    /// `recv_async` futures per direction not yet given a message, in
    /// issue order, and the messages of those that were.
    pending: HashMap<Option<String>, std::collections::VecDeque<u64>>,
    claimed: HashMap<u64, Message>,
    next_future: u64,
}

/// A mock `recv_async` future.
#[derive(Debug)]
pub struct MockFuture {
    id: u64,
    dir: Option<String>,
    shape: Vec<u32>,
    dtype: Dtype,
}

/// The mock's kernel language for one rank.
pub struct MockTl {
    rank: u32,
    tx: HashMap<String, Outbox>,
    rx: Vec<(String, Receiver<Message>)>,
    state: RefCell<RankState>,
}

fn nbytes_of(shape: &[u32], dtype: Dtype) -> usize {
    shape.iter().map(|&d| d as usize).product::<usize>() * dtype.itemsize()
}

impl MockTl {
    /// Give the next message from `dir` to the oldest future waiting on it.
    fn serve_one(&self, dir: &Option<String>) {
        let id = self
            .state
            .borrow_mut()
            .pending
            .get_mut(dir)
            .and_then(|q| q.pop_front())
            .expect("a future waits on this direction");
        let data = self.take(dir.as_deref());
        self.state.borrow_mut().claimed.insert(id, data);
    }

    fn scratch(&self, shape: &[u32], dtype: Dtype, data: Vec<u8>) -> MockTensor {
        let mut st = self.state.borrow_mut();
        let addr = st.next_scratch;
        st.next_scratch += data.len() as u64;
        MockTensor {
            addr,
            shape: shape.to_vec(),
            dtype,
            data,
            _slot: None,
        }
    }

    /// A received message as a tensor that holds its slot.
    fn received(&self, shape: &[u32], dtype: Dtype, (data, slots): Message) -> MockTensor {
        MockTensor {
            _slot: Some(Arc::new(SlotHeld(slots))),
            ..self.scratch(shape, dtype, data)
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

    fn take(&self, dir: Option<&str>) -> Message {
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

impl Tl for MockTl {
    type Tensor = MockTensor;
    type Future = MockFuture;

    fn recv_async(&self, dir: Option<&str>, shape: &[u32], dtype: Dtype) -> MockFuture {
        let mut st = self.state.borrow_mut();
        st.next_future += 1;
        let id = st.next_future;
        let dir = dir.map(str::to_string);
        st.pending.entry(dir.clone()).or_default().push_back(id);
        MockFuture {
            id,
            dir,
            shape: shape.to_vec(),
            dtype,
        }
    }
    fn wait(&self, f: MockFuture) -> MockTensor {
        // Earlier futures on the direction take their messages first.
        loop {
            let claimed = self.state.borrow_mut().claimed.remove(&f.id);
            if let Some(message) = claimed {
                let data = &message.0;
                assert_eq!(
                    data.len(),
                    nbytes_of(&f.shape, f.dtype),
                    "mock rank {}: wait expected {:?} {:?}, got {} bytes",
                    self.rank,
                    f.shape,
                    f.dtype,
                    data.len()
                );
                return self.received(&f.shape, f.dtype, message);
            }
            self.serve_one(&f.dir);
        }
    }

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
            _slot: None,
        }
    }
    fn store(&self, addr: u64, value: &MockTensor) {
        let r = self.range(addr, value.data.len());
        self.state.borrow_mut().memory[r].copy_from_slice(&value.data);
    }
    fn send_addr(&self, dir: &str, src_addr: u64, shape: &[u32], dtype: Dtype) {
        let t = self.load(src_addr, shape, dtype);
        self.send(dir, &t);
    }
    fn send(&self, dir: &str, value: &MockTensor) {
        let (tx, slots) = self.tx.get(dir).unwrap_or_else(|| {
            panic!(
                "mock rank {}: send to direction {dir:?}, which is not installed",
                self.rank
            )
        });
        if !slots.take(DEADLOCK_TIMEOUT) {
            panic!(
                "mock rank {}: deadlock: send(dir={dir:?}) waited {DEADLOCK_TIMEOUT:?} for a free slot \
                 (a slot is free again when the peer drops the tensor it received there: does it \
                 keep received tensors alive?)",
                self.rank
            );
        }
        tx.send((value.data.clone(), slots.clone()))
            .unwrap_or_else(|_| {
                panic!(
                    "mock rank {}: send(dir={dir:?}): the peer has finished",
                    self.rank
                )
            });
    }
    fn recv(&self, dir: Option<&str>, shape: &[u32], dtype: Dtype) -> MockTensor {
        // Futures issued earlier on this direction take their messages first.
        let key = dir.map(str::to_string);
        while self
            .state
            .borrow()
            .pending
            .get(&key)
            .is_some_and(|q| !q.is_empty())
        {
            self.serve_one(&key);
        }
        let message = self.take(dir);
        assert_eq!(
            message.0.len(),
            nbytes_of(shape, dtype),
            "mock rank {}: recv expected {shape:?} {dtype:?}, got {} bytes",
            self.rank,
            message.0.len()
        );
        self.received(shape, dtype, message)
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
        // The copy is done: the slot is free again.
        MockTensor {
            addr: dst_addr,
            _slot: None,
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
    fn fill(&self, shape: &[u32], dtype: Dtype, value: f64) -> MockTensor {
        let n = nbytes_of(shape, dtype) / dtype.itemsize();
        self.scratch(shape, dtype, dtype.encode(&vec![value; n]))
    }
    fn scale(&self, a: &MockTensor, factor: f64) -> MockTensor {
        let v: Vec<f64> = a.dtype.decode(&a.data).iter().map(|x| x * factor).collect();
        self.scratch(&a.shape, a.dtype, a.dtype.encode(&v))
    }
    fn unary(&self, op: crate::UnaryOp, a: &MockTensor) -> MockTensor {
        let v: Vec<f64> = a
            .dtype
            .decode(&a.data)
            .iter()
            .map(|&x| op.apply(x))
            .collect();
        self.scratch(&a.shape, a.dtype, a.dtype.encode(&v))
    }
    fn gemm(&self, a: &MockTensor, b: &MockTensor, out_dtype: Dtype) -> MockTensor {
        self.composite(crate::CompositeOp::Gemm, a, b, None, out_dtype)
    }
    fn composite(
        &self,
        op: crate::CompositeOp,
        a: &MockTensor,
        b: &MockTensor,
        c: Option<&MockTensor>,
        out_dtype: Dtype,
    ) -> MockTensor {
        let (&[m, k], &[k2, n]) = (a.shape.as_slice(), b.shape.as_slice()) else {
            panic!(
                "mock rank {}: {op:?} of {:?} and {:?}",
                self.rank, a.shape, b.shape
            )
        };
        assert!(
            k == k2 && a.dtype == b.dtype,
            "mock rank {}: {op:?} of {:?} {:?} and {:?} {:?}",
            self.rank,
            a.shape,
            a.dtype,
            b.shape,
            b.dtype
        );
        let (x, y) = (a.dtype.decode(&a.data), b.dtype.decode(&b.data));
        let (m, n, k) = (m as usize, n as usize, k as usize);
        let mut r = vec![0f64; m * n];
        for i in 0..m {
            for p in 0..k {
                for j in 0..n {
                    r[i * n + j] += x[i * k + p] * y[p * n + j];
                }
            }
        }
        let c = c.map(|c| c.dtype.decode(&c.data));
        op.epilogue(&mut r, n, c.as_deref());
        self.scratch(&[m as u32, n as u32], out_dtype, out_dtype.encode(&r))
    }
    fn cast(&self, a: &MockTensor, dtype: Dtype) -> MockTensor {
        self.scratch(&a.shape, dtype, dtype.encode(&a.dtype.decode(&a.data)))
    }
    fn reduce(&self, op: crate::ReduceOp, a: &MockTensor, axis: u32) -> MockTensor {
        let ax = axis as usize;
        assert!(
            ax < a.shape.len() && a.shape[ax] > 0,
            "mock rank {}: reduce over axis {axis} of {:?}",
            self.rank,
            a.shape
        );
        let v = a.dtype.decode(&a.data);
        let len = a.shape[ax] as usize;
        let inner: usize = a.shape[ax + 1..].iter().map(|&d| d as usize).product();
        let outer: usize = a.shape[..ax].iter().map(|&d| d as usize).product();
        let mut r = Vec::with_capacity(outer * inner);
        for o in 0..outer {
            for i in 0..inner {
                let at = |k: usize| v[(o * len + k) * inner + i];
                r.push((1..len).fold(at(0), |acc, k| match op {
                    crate::ReduceOp::Sum => acc + at(k),
                    crate::ReduceOp::Max => acc.max(at(k)),
                    crate::ReduceOp::Min => acc.min(at(k)),
                }));
            }
        }
        let shape = crate::kernel::reduced_shape(&a.shape, axis);
        self.scratch(&shape, a.dtype, a.dtype.encode(&r))
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
    run_in_mock::<A>(cfg, inputs, None)
}

/// Run `A`'s kernel on every rank as the host does for a collective with
/// an output buffer of its own of `out_elems` elements (Some): the host
/// appends its address (`out-ptr`) to the arguments; here it lies right
/// after the input. Returns every rank's memory (input, then output).
pub fn run_in_mock<A: Algorithm>(
    cfg: &MockConfig,
    inputs: &[Vec<f64>],
    out_elems: Option<u64>,
) -> Vec<Vec<f64>> {
    let n = cfg.world_size;
    assert_eq!(inputs.len(), n as usize, "mock: need one input per rank");
    let kind = crate::topo::standard_kind(&cfg.topology).unwrap_or(0) as i64;
    // sip_topo_w / _h as the host appends them: the grid of a 2-D table.
    let (grid_w, grid_h) = match cfg.topology.as_str() {
        "mesh_2d" | "torus_2d" => cfg.grid(),
        _ => (0, 0),
    };
    let mut tx: Vec<HashMap<String, Outbox>> = (0..n).map(|_| HashMap::new()).collect();
    let mut rx: Vec<Vec<(String, Receiver<Message>)>> = (0..n).map(|_| Vec::new()).collect();
    for r in 0..n {
        for (dir, peer, peer_dir) in rows::<A>(cfg, r) {
            let (s, q) = channel();
            tx[r as usize].insert(dir, (s, Slots::new(cfg.n_slots)));
            rx[peer as usize].push((peer_dir, q));
        }
    }
    let ranks: Vec<_> = tx.into_iter().zip(rx).enumerate().collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = ranks
            .into_iter()
            .map(|(r, (tx, rx))| {
                let mut memory = cfg.dtype.encode(&inputs[r]);
                let mut args = cfg.kernel_args.clone();
                args.extend([r as i64, kind, grid_w as i64, grid_h as i64]);
                if let Some(out) = out_elems {
                    args.push((MOCK_T_PTR + memory.len() as u64) as i64);
                    memory.extend(cfg.dtype.encode(&vec![0.0; out as usize]));
                }
                if let Some(factor) = cfg.factor {
                    if out_elems.is_none() {
                        args.push(MOCK_T_PTR as i64);
                    }
                    args.push(factor(r as u32).to_bits() as i64);
                }
                s.spawn(move || {
                    let tl = MockTl {
                        rank: r as u32,
                        tx,
                        rx,
                        state: RefCell::new(RankState {
                            memory,
                            next_scratch: SCRATCH_BASE,
                            rr: 0,
                            pending: HashMap::new(),
                            claimed: HashMap::new(),
                            next_future: 0,
                        }),
                    };
                    A::kernel(&tl, MOCK_T_PTR, &args);
                    let st = tl.state.into_inner();
                    let unwaited = st.pending.values().map(|q| q.len()).sum::<usize>()
                        + st.claimed.len();
                    assert!(
                        unwaited == 0,
                        "mock rank {r}: the kernel ended without waiting for {unwaited} recv_async future(s)"
                    );
                    cfg.dtype.decode(&st.memory)
                })
            })
            .collect();
        let joined: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        let mut shards = Vec::with_capacity(joined.len());
        let mut failures = Vec::new();
        for j in joined {
            match j {
                Ok(shard) => shards.push(shard),
                Err(e) => failures.push(e),
            }
        }
        if let Some(root) = root_cause(failures) {
            std::panic::resume_unwind(root);
        }
        shards
    })
}

/// The failure to report when ranks failed: a deadlock is the cause of
/// whatever its peers then saw (a send to a rank that gave up reads "the
/// peer has finished"), so a deadlock wins; else the lowest rank's.
fn root_cause(
    failures: Vec<Box<dyn std::any::Any + Send>>,
) -> Option<Box<dyn std::any::Any + Send>> {
    fn message(e: &(dyn std::any::Any + Send)) -> &str {
        e.downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| e.downcast_ref::<&str>().copied())
            .unwrap_or("")
    }
    let deadlock = failures
        .iter()
        .position(|e| message(e.as_ref()).contains(": deadlock: "));
    let mut failures = failures;
    match deadlock {
        Some(i) => Some(failures.swap_remove(i)),
        None => failures.into_iter().next(),
    }
}

/// Check that `A` is an all-reduce (sum) under `cfg`: every rank starts
/// with its own `n_elem` small integers (exact in every dtype) and must
/// end holding the element-wise sum over all ranks.
pub fn assert_allreduce_sums<A: Algorithm>(cfg: &MockConfig, n_elem: u64) {
    let ws = cfg.world_size;
    let inputs: Vec<Vec<f64>> = (0..ws)
        .map(|r| (0..n_elem).map(|i| (r * 7 + i as u32 % 5) as f64).collect())
        .collect();
    let expect: Vec<f64> = (0..n_elem as usize)
        .map(|i| inputs.iter().map(|v| v[i]).sum())
        .collect();
    for (r, got) in run_kernel_in_mock::<A>(cfg, &inputs).iter().enumerate() {
        assert_eq!(
            got, &expect,
            "{} ranks on {} ({} wide): rank {r}",
            ws, cfg.topology, cfg.grid_w
        );
    }
}

/// Parameters with `chunk_size: chunk` (an algorithm that works in
/// rounds or chunks).
pub fn chunk_size(chunk: i64) -> crate::Params {
    crate::Params::new(vec![("chunk_size".into(), crate::ParamValue::Int(chunk))])
}

/// Check that `A` all-reduces like `call` (any op, any dtype) on a ring.
pub fn assert_all_reduce<A: Algorithm>(call: &crate::Call, params: &crate::Params) {
    assert_collective::<A>(call, params)
}

/// [`assert_collective`] of an all-reduce of `A` with every dtype and op
///  at world sizes 1 to 8 and 12
/// and 1, 5 and 16 elements per rank.
pub fn assert_all_reduce_everywhere<A: crate::Algorithm>() {
    use crate::{Call, Collective, Dtype, Params, RedOp};
    for dtype in Dtype::ALL {
        for op in RedOp::ALL {
            for ws in [1u32, 2, 3, 4, 5, 6, 7, 8, 12] {
                for n in [1u64, 5, 16] {
                    let call = Call {
                        dtype,
                        op,
                        ..Call::of(Collective::AllReduce, n, ws)
                    };
                    assert_collective::<A>(&call, &Params::new(vec![]));
                }
            }
        }
    }
}

/// Check that `A` performs `call` (any collective, op, dtype, root) on
/// `call.world_size` ranks laid out by its default IPCQ table (a ring
/// when it names none) with the inputs and expected outputs of
/// [`crate::reference`]: every element of every rank's output must be
/// exact (a non-root rank of `reduce` is not checked, as PyTorch leaves
/// it unspecified). Collectives with an output buffer of their own get it
/// after the input, as `out-ptr`.
pub fn assert_collective<A: Algorithm>(call: &crate::Call, params: &crate::Params) {
    let topology = A::entry_defaults().topology.unwrap_or("ring_1d");
    assert_collective_on::<A>(call, params, topology, 0)
}

/// [`assert_collective`] on the table `topology`, a 2-D one `grid_w`
/// ranks wide (0: the squarest grid).
pub fn assert_collective_on<A: Algorithm>(
    call: &crate::Call,
    params: &crate::Params,
    topology: &str,
    grid_w: u32,
) {
    use crate::reference::{expected, Values};
    let ws = call.world_size;
    let values = Values::of_call(call);
    let (n_in, n_out) = call.buffers();
    let inputs: Vec<Vec<f64>> = (0..ws)
        .map(|r| (0..n_in).map(|i| values.value(r, i)).collect())
        .collect();
    let args = A::kernel_args_for(call, params).unwrap_or_else(|e| panic!("kernel_args_for: {e}"));
    let mut cfg = MockConfig::new(topology, ws, call.dtype, args);
    cfg.grid_w = grid_w;
    if call.op == crate::RedOp::PremulSum {
        cfg.factor = Some(crate::reference::premul_factor);
    }
    let in_place = call.collective.in_place();
    let out = (!in_place).then_some(n_out);
    for (r, mem) in run_in_mock::<A>(&cfg, &inputs, out).iter().enumerate() {
        let got = if in_place {
            &mem[..]
        } else {
            &mem[n_in as usize..]
        };
        for (j, &g) in got.iter().enumerate() {
            if let Some(want) = expected(call, &values, r as u32, j as u64) {
                assert_eq!(
                    g,
                    want,
                    "{} root {} block {} on {ws} ranks ({topology}, {grid_w} wide): \
                     rank {r} element {j}",
                    call.describe(),
                    call.root,
                    call.block
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadlock_is_reported_over_what_its_peers_saw_after_it() {
        let boxed = |m: &str| -> Box<dyn std::any::Any + Send> { Box::new(m.to_string()) };
        let root = root_cause(vec![
            boxed("mock rank 0: send(dir=\"E\"): the peer has finished"),
            boxed("mock rank 1: deadlock: send(dir=\"E\") waited 10s for a free slot"),
        ])
        .unwrap();
        assert!(root
            .downcast_ref::<String>()
            .unwrap()
            .starts_with("mock rank 1: deadlock"));
        let first = root_cause(vec![boxed("rank 0: bad"), boxed("rank 1: worse")]).unwrap();
        assert_eq!(first.downcast_ref::<String>().unwrap(), "rank 0: bad");
        assert!(root_cause(Vec::new()).is_none());
    }

    /// Sends two tiles east; takes the first from the west with a future
    /// and the second with `recv` issued after it.
    struct InOrder;

    impl Algorithm for InOrder {
        fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
            let n = args[0] as u32;
            let mine = tl.load(t_ptr, &[n], Dtype::F16);
            tl.send("E", &mine);
            tl.send("E", &tl.add(&mine, &mine));
            let f = tl.recv_async(Some("W"), &[n], Dtype::F16);
            let second = tl.recv(Some("W"), &[n], Dtype::F16);
            let first = tl.wait(f);
            tl.store(t_ptr, &tl.add(&tl.add(&first, &first), &second));
        }
        fn kernel_args(_: u32, n_elem: u64, _: u32, _: u32) -> Vec<i64> {
            vec![n_elem as i64]
        }
    }

    /// Divides its tile by `args[1]` as `avg` finishes an integer
    /// reduction ([`crate::Finish::Divide`]), in dtype `args[2]`.
    struct DivideBy;

    impl Algorithm for DivideBy {
        fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
            let (n, by) = (args[0] as u32, args[1] as u32);
            let dt = Dtype::from_code(args[2]).unwrap();
            let t = tl.load(t_ptr, &[n], dt);
            tl.store(t_ptr, &crate::Finish::Divide(by).apply(tl, &t));
        }
        fn kernel_args(_: u32, n_elem: u64, _: u32, _: u32) -> Vec<i64> {
            vec![n_elem as i64]
        }
    }

    /// Stores a fill of `args[1]` in dtype `args[2]` over its tile.
    struct FillTile;

    impl Algorithm for FillTile {
        fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
            let (n, value) = (args[0] as u32, args[1] as f64);
            let dt = Dtype::from_code(args[2]).unwrap();
            tl.store(t_ptr, &tl.fill(&[n], dt, value));
        }
        fn kernel_args(_: u32, n_elem: u64, _: u32, _: u32) -> Vec<i64> {
            vec![n_elem as i64]
        }
    }

    #[test]
    fn a_fill_converts_its_value_as_a_cast_does() {
        for (dt, value, want) in [
            (Dtype::I8, 300, 127.0),
            (Dtype::U8, -5, 0.0),
            (Dtype::F16, 70_000, f64::INFINITY),
            (Dtype::I64, -3, -3.0),
        ] {
            let cfg = MockConfig::ring(1, dt, vec![3, value, dt.code()]);
            let got = run_kernel_in_mock::<FillTile>(&cfg, &[vec![1.0; 3]]).remove(0);
            assert_eq!(got, [want; 3], "{dt:?} {value}");
        }
    }

    #[test]
    fn an_integer_average_truncates_and_a_divisor_past_the_dtype_still_divides() {
        let divide = |dt: Dtype, by: u32, values: &[f64]| {
            let args = vec![values.len() as i64, by as i64, dt.code()];
            let cfg = MockConfig::ring(1, dt, args);
            run_kernel_in_mock::<DivideBy>(&cfg, &[values.to_vec()]).remove(0)
        };
        let v = [127.0, -128.0, 100.0, -7.0];
        assert_eq!(divide(Dtype::I8, 3, &v), [42.0, -42.0, 33.0, -2.0]);
        // 200 does not fit an i8 (127 would divide 127 into 1): in i32.
        assert_eq!(divide(Dtype::I8, 200, &v), [0.0; 4]);
        assert_eq!(divide(Dtype::U8, 255, &[255.0, 254.0]), [1.0, 0.0]);
        assert_eq!(divide(Dtype::U8, 300, &[255.0, 254.0]), [0.0, 0.0]);
        assert_eq!(divide(Dtype::I64, 2, &[7.0, -7.0]), [3.0, -3.0]);
        assert_eq!(divide(Dtype::U32, 4, &[4_000_000_000.0]), [1_000_000_000.0]);
    }

    /// A ring of three steps that adds what it receives, keeping the
    /// received tensors alive (`KEEP`) or dropping each after its add.
    struct Keeps<const KEEP: bool>;

    impl<const KEEP: bool> Algorithm for Keeps<KEEP> {
        fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]) {
            let n = args[0] as u32;
            let mine = tl.load(t_ptr, &[n], Dtype::F16);
            let mut total = tl.add(&mine, &mine);
            let mut kept = Vec::new();
            for _ in 0..3 {
                tl.send("E", &mine);
                let got = tl.recv(Some("W"), &[n], Dtype::F16);
                total = tl.add(&total, &got);
                if KEEP {
                    kept.push(got);
                }
            }
            tl.store(t_ptr, &total);
        }
        fn kernel_args(_: u32, n_elem: u64, _: u32, _: u32) -> Vec<i64> {
            vec![n_elem as i64]
        }
    }

    #[test]
    fn a_dropped_received_tensor_frees_its_slot() {
        let mut cfg = MockConfig::ring(2, Dtype::F16, vec![1]);
        cfg.n_slots = 1;
        let out = run_kernel_in_mock::<Keeps<false>>(&cfg, &[vec![1.0], vec![2.0]]);
        assert_eq!(out, vec![vec![8.0], vec![7.0]]);
    }

    /// As in the simulator, where a received tensor points at its slot.
    #[test]
    #[should_panic(expected = "waited 10s for a free slot")]
    fn received_tensors_kept_alive_hold_their_slots_and_deadlock() {
        let mut cfg = MockConfig::ring(2, Dtype::F16, vec![1]);
        cfg.n_slots = 1;
        run_kernel_in_mock::<Keeps<true>>(&cfg, &[vec![1.0], vec![2.0]]);
    }

    #[test]
    fn futures_and_receives_take_their_messages_in_issue_order() {
        let cfg = MockConfig::ring(2, Dtype::F16, vec![2]);
        let out = run_kernel_in_mock::<InOrder>(&cfg, &[vec![1.0; 2], vec![2.0; 2]]);
        assert_eq!(out, vec![vec![8.0; 2], vec![4.0; 2]]);
    }
}
