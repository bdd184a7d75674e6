//! The data plane: the machine's memory store and the reads and writes
//! its commands make of it, in the order the engine makes them.
//!
//! Timing never depends on the bytes (no `tl` call hands data back to a
//! kernel), so the engine need not wait for a command's bytes to move: on
//! a machine with a spare core ([`DataPlane::use_a_thread`]) the engine
//! queues each command's reads and writes ([`DataOp`]: a DMA's source
//! read when its transfer starts, its landing, a compute command's
//! result) and a thread of its own applies them, in batches, in exactly
//! the order they were queued, which is the order the engine would have
//! applied them itself: the bytes are the same. Anything that looks at
//! memory from the engine's side (a bench's read or write, an
//! allocation's zeroing, the digest) first waits until every queued op
//! has been applied ([`DataPlane::store`]). At 1024 ranks x 16 B the data
//! work was about a quarter of the engine thread's time (a `--timing-only`
//! run took 1.2 s against 1.6 s).
//!
//! A machine split into partitions, each run by a thread of its own, has
//! no data thread: on two cores it was a third thread beside the two
//! partitions, slowing whichever shared its core while the other waited
//! at the window's end. Instead each partition queues its ops and applies
//! them itself, a batch at a time under its lock (one lock per
//! [`OWN_BATCH`] ops, not one per op, which is what made an earlier trial
//! without the thread slower). At 1024 ranks x 16 B, `--partitions 2`,
//! the windows took 0.91-0.98 s against 0.96-1.14 s with the thread, and
//! 2.2-2.4 s of processor time against 2.4-2.9 s (7 interleaved pairs).
//!
//! Each partition has a shard of the store of its own (its SIPs' memory,
//! see [`DataPlane`]), so the two apply their batches at once. With one
//! store under one lock they took turns, and where the bytes are most of
//! the work the split run was slower than one executor with the data
//! thread (512 ranks x 64 KiB, 3 iterations: 9.06 s against 8.43 s);
//! with a shard each it takes 5.58 s against 8.35 s, and 64 ranks x 1 MiB
//! 0.63-0.66 s against 0.83-0.92 s.
//!
//! A write can fail (the host-memory budget refuses a page). Applied at
//! once, the failure stops the command at once, as before. Applied on the
//! thread, or in a partition's batch, it is found when the engine next
//! settles the plane (at the latest when the run ends): nothing is
//! applied after it, and the run stops with the same fault, named by the
//! command's PE, unit and simulated time ([`DataFault`]).

use super::compute_op::{ComputeOp, Region};
use super::memory::{MemoryStore, Staged};
use crate::address::Space;
use crate::budget::BudgetExceeded;
use crate::engine::lock::OneThread;
use crate::units::Ps;
use crossbeam_utils::CachePadded;
use smallvec::SmallVec;
use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;

/// Ops queued before the thread is handed them: enough that handing over
/// (a lock and a wake-up of the sleeping thread, a system call on each
/// side) is rare. At 1024 ranks x 16 B (about 3 M ops), batches of 256
/// gave no gain over applying the ops inline; 1024 gave 1.27 s against
/// 1.48 s, 16384 1.24 s (medians of 4 interleaved runs).
const BATCH: usize = 4096;

/// Ops a partition queues before it applies them itself (a split
/// machine without the data thread): one lock of the store per batch,
/// and few enough that the ops just queued are still in the core's cache.
/// 1024 ranks x 16 B, `--partitions 2`, the windows' wall time in 4
/// interleaved runs each: 64 ops 0.86-0.96 s (the lock too often), 256
/// 0.82-0.93 s, 512 0.79-0.90 s, 1024 0.82-0.94 s, 4096 ([`BATCH`])
/// 0.84-0.88 s against 512's 0.81-0.85 s in the same minutes.
const OWN_BATCH: usize = 512;

/// Who made an op, to name it in a fault: the PE (the machine's index
/// of it), the unit (`dma_read`, `math`, ...) and the simulated time it
/// was applied at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Culprit {
    pub pe: usize,
    pub what: &'static str,
    pub at: Ps,
}

/// One command's effect on memory (`W`: a compute command's write; see
/// [`Queued`] for the other).
#[derive(Debug)]
pub enum DataOp<W = ComputeWrite> {
    /// A DMA transfer starts: its source bytes as they are now are held
    /// (copy-on-write) under the command's `slot`.
    Stage {
        slot: u32,
        src: (Space, u64),
        len: u64,
    },
    /// The transfer in `slot` lands its held bytes at `dst`.
    Land {
        slot: u32,
        dst: (Space, u64),
        who: Culprit,
    },
    /// A compute command's write.
    Compute(W),
    /// A transfer whose bytes land in another partition starts: its
    /// source bytes as they are now are held in `cell`, which travels with
    /// the mail that lands them (see [`crate::hw::mail`]).
    StageInto {
        cell: Arc<StagedCell>,
        src: (Space, u64),
        len: u64,
    },
    /// The bytes held in a cell (by another partition's transfer) land.
    LandFrom(Box<(Arc<StagedCell>, (Space, u64), Culprit)>),
}

/// Bytes held for a transfer that lands in another partition.
pub type StagedCell = Mutex<Option<Staged>>;

impl<W> DataOp<W> {
    /// The same op with `f` of its write, if it has one.
    fn map_write<V>(self, f: impl FnOnce(W) -> V) -> DataOp<V> {
        match self {
            DataOp::Stage { slot, src, len } => DataOp::Stage { slot, src, len },
            DataOp::Land { slot, dst, who } => DataOp::Land { slot, dst, who },
            DataOp::Compute(w) => DataOp::Compute(f(w)),
            DataOp::StageInto { cell, src, len } => DataOp::StageInto { cell, src, len },
            DataOp::LandFrom(l) => DataOp::LandFrom(l),
        }
    }
}

/// An op as a batch holds it: a compute op's write waits in the batch's
/// own list of writes ([`Batch::writes`], in the order of the ops), so
/// that the ops of a ring step's send and receive take 64 bytes each
/// rather than a write's ~200. The write is not boxed either: a box was
/// made on the engine thread and freed on the data thread, and each
/// reuse of its memory (and mimalloc's free list of its page) was a line
/// the other core had touched last — the engine thread's largest single
/// stall at 1024 ranks x 16 B (`perf`: ~7 % of its samples on the op's
/// first read in `submit`, half of them from the compute ops).
type Queued = DataOp<()>;

/// Ops queued together, and their compute writes.
#[derive(Default)]
struct Batch {
    ops: Vec<Queued>,
    writes: Vec<ComputeWrite>,
}

impl Batch {
    fn with_capacity(n: usize) -> Self {
        Batch {
            ops: Vec::with_capacity(n),
            writes: Vec::with_capacity(n / 2),
        }
    }

    fn push(&mut self, op: DataOp) {
        let queued = op.map_write(|w| self.writes.push(w));
        self.ops.push(queued);
    }

    fn len(&self) -> usize {
        self.ops.len()
    }

    fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Its ops, in order, as they were submitted; leaves it empty.
    fn drain(&mut self) -> impl Iterator<Item = DataOp> + '_ {
        let mut writes = self.writes.drain(..);
        self.ops
            .drain(..)
            .map(move |op| op.map_write(|()| writes.next().expect("a compute op has its write")))
    }
}

/// A compute command writes `op` of `inputs` into `out` (`unit`: the
/// output's element size).
#[derive(Debug)]
pub struct ComputeWrite {
    pub op: ComputeOp,
    pub inputs: SmallVec<[Region; 3]>,
    pub out: Region,
    pub unit: u64,
    pub who: Culprit,
}

/// A write the data thread could not make: who made it and why.
#[derive(Debug, Clone)]
pub struct DataFault {
    pub who: Culprit,
    pub error: BudgetExceeded,
}

/// The store and the transfers in flight.
struct Bytes {
    store: MemoryStore,
    /// Held source bytes per DMA command slot (see [`DataOp::Stage`]).
    staged: Vec<Option<Staged>>,
    /// Set by the first failed op; nothing is applied after it.
    failed: bool,
    /// The first failed op of a batch applied by its partition's own
    /// thread (see [`DataPlane::submit`]), until [`DataPlane::settle`].
    fault: Option<DataFault>,
}

impl Bytes {
    /// Apply `ops` in order, none after the first that fails (in this
    /// call or an earlier one); that failure, if this call met it.
    fn apply_all(&mut self, ops: impl Iterator<Item = DataOp>) -> Option<DataFault> {
        let mut fault = None;
        for op in ops {
            if self.failed {
                continue;
            }
            if let Err(f) = self.apply(op) {
                self.failed = true;
                fault = Some(f);
            }
        }
        fault
    }

    fn apply(&mut self, op: DataOp) -> Result<(), DataFault> {
        match op {
            DataOp::Stage { slot, src, len } => {
                let slot = slot as usize;
                if self.staged.len() <= slot {
                    self.staged.resize_with(slot + 1, || None);
                }
                self.staged[slot] = Some(self.store.stage(src.0, src.1, len));
                Ok(())
            }
            DataOp::Land { slot, dst, who } => {
                let staged = self
                    .staged
                    .get_mut(slot as usize)
                    .and_then(Option::take)
                    .expect("a landing transfer has started");
                self.store
                    .land(staged, dst)
                    .map_err(|error| DataFault { who, error })
            }
            DataOp::StageInto { cell, src, len } => {
                // Copied: the bytes land in another partition's store.
                *lock(&cell) = Some(self.store.stage_copy(src.0, src.1, len));
                Ok(())
            }
            DataOp::LandFrom(l) => {
                let (cell, dst, who) = *l;
                let staged = lock(&cell)
                    .take()
                    .expect("a transfer's bytes were held before its landing");
                self.store
                    .land_copy(staged, dst)
                    .map_err(|error| DataFault { who, error })
            }
            DataOp::Compute(write) => {
                let ComputeWrite {
                    op,
                    inputs,
                    out,
                    unit,
                    who,
                } = write;
                op.apply_to_memory(&mut self.store, &inputs, out, unit)
                    .map_err(|error| DataFault { who, error })
            }
        }
    }
}

/// See the module doc.
///
/// A machine split into partitions (see [`crate::engine::windows`]) has a
/// queue of pending ops per partition, filled by its own thread and
/// applied, a batch at a time, by that thread (or by the data thread, if
/// one was started), and a shard of the memory store per partition: the
/// memory of its SIPs, and the bytes its transfers hold. Partitions write
/// only their own SIPs' memory and read another's only through what a
/// message carries (a command that would is the split run's divergence,
/// see [`crate::hw::machine`]'s `crossings`), so a partition's ops touch
/// its own shard alone, and two partitions apply their batches at once.
/// The bytes a message carries to another partition are copied where it
/// starts and written where it lands ([`MemoryStore::stage_copy`]): no
/// page buffer is shared by two shards.
pub struct DataPlane {
    /// The store's shards, one per partition (each on lines of its own).
    shards: Box<[CachePadded<Arc<Mutex<Bytes>>>]>,
    /// Per SIP, its partition (the shard of its memory).
    of_sip: Arc<[u32]>,
    /// Ops not yet handed to the thread, per partition (its thread only;
    /// each on lines of its own, as every op writes its length).
    pending: Box<[CachePadded<OneThread<Batch>>]>,
    /// Set by [`DataPlane::use_a_thread`]: ops go to the thread.
    worker: OnceLock<Worker>,
}

impl DataPlane {
    /// The data plane of `store` (empty) for a machine whose SIP `s` is
    /// in partition `of_sip[s]`, of `parts` partitions.
    pub fn new(store: MemoryStore, parts: usize, of_sip: Arc<[u32]>) -> Self {
        let parts = parts.max(1);
        let bytes = |store| {
            CachePadded::new(Arc::new(Mutex::new(Bytes {
                store,
                staged: Vec::new(),
                failed: false,
                fault: None,
            })))
        };
        let siblings: Vec<_> = (1..parts).map(|_| store.sibling()).collect();
        DataPlane {
            shards: std::iter::once(store).chain(siblings).map(bytes).collect(),
            of_sip,
            pending: (0..parts).map(|_| CachePadded::default()).collect(),
            worker: OnceLock::new(),
        }
    }

    /// From now on, apply ops on a thread of their own (started here).
    /// Call before the first op; a second call changes nothing.
    pub fn use_a_thread(&self) {
        self.worker
            .get_or_init(|| Worker::start(self.shards.iter().map(|s| Arc::clone(s)).collect()));
    }

    /// The shard holding `space`.
    fn shard_of(&self, space: Space) -> &Mutex<Bytes> {
        match &*self.shards {
            [one] => one,
            all => {
                let part = self.of_sip.get(space.sip() as usize).copied();
                &all[part.unwrap_or(0) as usize]
            }
        }
    }

    /// Whether ops are applied on a thread of their own.
    #[cfg(test)]
    fn threaded(&self) -> bool {
        self.worker.get().is_some()
    }

    /// Apply `op` now (one partition, no thread), or queue it for the
    /// thread or its partition's next batch (then `Ok`: a failure is
    /// found by [`DataPlane::settle`]).
    pub fn submit(&self, op: DataOp) -> Result<(), DataFault> {
        let worker = self.worker.get();
        if worker.is_none() && self.pending.len() == 1 {
            return lock(&self.shards[0]).apply(op);
        }
        let (part, pending) = self.own_pending();
        let mut pending = pending.lock();
        pending.push(op);
        let full = if worker.is_some() { BATCH } else { OWN_BATCH };
        if pending.len() >= full {
            self.pass_on(part, &mut pending);
        }
        Ok(())
    }

    /// Hand partition `part`'s `pending` ops to the thread, or (no
    /// thread) apply them now.
    fn pass_on(&self, part: usize, pending: &mut Batch) {
        match self.worker.get() {
            Some(worker) => worker.hand_over(part, pending),
            None => self.apply_now(part, pending),
        }
    }

    /// Apply partition `part`'s `pending` ops now, on this thread, under
    /// its shard's lock (a split machine without the data thread); the
    /// first failure is kept for [`DataPlane::settle`].
    fn apply_now(&self, part: usize, pending: &mut Batch) {
        let mut b = lock(&self.shards[part]);
        if let Some(f) = b.apply_all(pending.drain()) {
            b.fault = Some(f);
        }
    }

    /// The running executor's partition and its pending ops.
    #[inline]
    fn own_pending(&self) -> (usize, &CachePadded<OneThread<Batch>>) {
        match &*self.pending {
            [one] => (0, one),
            all => {
                let part = crate::engine::partition();
                (part, &all[part])
            }
        }
    }

    /// Apply the running partition's pending ops, or hand them to the
    /// thread, now (so that a partition that lands what they hold, later
    /// in simulated time and so in a later window, finds them applied
    /// before its own).
    pub fn flush_own(&self) {
        let (part, pending) = self.own_pending();
        let mut pending = pending.lock();
        if !pending.is_empty() {
            self.pass_on(part, &mut pending);
        }
    }

    /// Wait until every queued op has been applied; the first that failed
    /// since the last call, if any (of several partitions' failures, the
    /// earliest in simulated time).
    pub fn settle(&self) -> Option<DataFault> {
        let from_thread = self.drain().and_then(|mut state| state.fault.take());
        let from_shards = self.shards.iter().filter_map(|s| lock(s).fault.take());
        from_thread
            .into_iter()
            .chain(from_shards)
            .min_by_key(|f| f.who.at)
    }

    /// Whether the store keeps bytes (not `--timing-only`). Set before
    /// anything is written, so it needs no wait for the thread.
    pub fn keeps_bytes(&self) -> bool {
        lock(&self.shards[0]).store.keeps_bytes()
    }

    /// Keep no bytes from now on (every shard; see
    /// [`MemoryStore::keep_no_bytes`]).
    pub fn keep_no_bytes(&self) {
        drop(self.drain());
        for shard in &*self.shards {
            lock(shard).store.keep_no_bytes();
        }
    }

    /// The shard of the store that holds `space`, every queued op applied
    /// (a failure, if any, is kept for the next [`DataPlane::settle`]).
    pub fn store_of(&self, space: Space) -> StoreGuard<'_> {
        drop(self.drain());
        StoreGuard(lock(self.shard_of(space)))
    }

    /// `len` bytes of `space` from `offset`, every queued op applied.
    pub fn read(&self, space: Space, offset: u64, len: u64) -> Vec<u8> {
        self.store_of(space).read(space, offset, len)
    }

    /// Write `data` into `space` at `offset`, every queued op applied
    /// first.
    pub fn write(&self, space: Space, offset: u64, data: &[u8]) -> Result<(), BudgetExceeded> {
        self.store_of(space).write(space, offset, data)
    }

    /// Zero `len` bytes of `space` from `offset`, every queued op applied
    /// first.
    pub fn zero(&self, space: Space, offset: u64, len: u64) -> Result<(), BudgetExceeded> {
        self.store_of(space).zero(space, offset, len)
    }

    /// The digest of the whole store (see [`MemoryStore::digest`]), every
    /// queued op applied.
    pub fn digest(&self) -> String {
        drop(self.drain());
        let shards: Vec<_> = self.shards.iter().map(|s| lock(s)).collect();
        crate::hw::memory::digest_of(shards.iter().map(|b| &b.store))
    }

    /// Apply what is pending (or hand it to the thread and wait until it
    /// has applied everything); the thread's state then (`None`: no
    /// thread).
    fn drain(&self) -> Option<MutexGuard<'_, QueueState>> {
        // On a thread of a windowed run, its own partition's ops are all
        // that can touch what it reads (the other partitions' threads own
        // theirs); otherwise every partition's.
        let parts = match crate::engine::lock::is_windows_thread() {
            true => {
                let own = self.own_pending().0;
                own..own + 1
            }
            false => 0..self.pending.len(),
        };
        for part in parts {
            let mut pending = self.pending[part].lock();
            if !pending.is_empty() {
                self.pass_on(part, &mut pending);
            }
        }
        Some(self.worker.get()?.idle_state())
    }
}

/// The store, with nothing queued ahead of it (see [`DataPlane::store`]).
pub struct StoreGuard<'a>(MutexGuard<'a, Bytes>);

impl std::ops::Deref for StoreGuard<'_> {
    type Target = MemoryStore;
    fn deref(&self) -> &MemoryStore {
        &self.0.store
    }
}

impl std::ops::DerefMut for StoreGuard<'_> {
    fn deref_mut(&mut self) -> &mut MemoryStore {
        &mut self.0.store
    }
}

/// A panic while the store was held (a bug) leaves it as it was: the
/// run reports the panic, not a poisoned lock.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The thread and its queue of batches.
struct Worker {
    queue: Arc<Queue>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    /// A batch arrived, or the thread is to stop.
    work: Condvar,
    /// The thread ran out of batches.
    idle: Condvar,
}

#[derive(Default)]
struct QueueState {
    /// Batches and the partition (shard) of each.
    batches: VecDeque<(usize, Batch)>,
    /// Emptied batches, for reuse.
    spare: Vec<Batch>,
    /// The thread is applying a batch it took.
    busy: bool,
    stop: bool,
    fault: Option<DataFault>,
    /// What a panic on the thread left (raised on the engine thread).
    panic: Option<Box<dyn std::any::Any + Send>>,
}

impl Worker {
    fn start(shards: Box<[Arc<Mutex<Bytes>>]>) -> Worker {
        let queue = Arc::new(Queue::default());
        let q = queue.clone();
        let thread = std::thread::Builder::new()
            .name("data-plane".into())
            .spawn(move || q.serve(&shards))
            .expect("the data-plane thread starts");
        Worker {
            queue,
            thread: Some(thread),
        }
    }

    /// Queue the ops of `pending`, partition `part`'s, as a batch (it is
    /// left empty).
    fn hand_over(&self, part: usize, pending: &mut Batch) {
        let mut st = lock(&self.queue.state);
        let next = st
            .spare
            .pop()
            .unwrap_or_else(|| Batch::with_capacity(BATCH));
        st.batches
            .push_back((part, std::mem::replace(pending, next)));
        drop(st);
        self.queue.work.notify_one();
    }

    /// Wait until the thread has nothing left to apply; its panic, if it
    /// had one, is raised here.
    fn idle_state(&self) -> MutexGuard<'_, QueueState> {
        let mut st = lock(&self.queue.state);
        while st.busy || !st.batches.is_empty() {
            st = self.queue.idle.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        if let Some(panic) = st.panic.take() {
            drop(st);
            std::panic::resume_unwind(panic);
        }
        st
    }
}

impl Queue {
    /// The thread's loop: apply batches in order until told to stop. A
    /// panic (a bug) is kept for the engine thread, which raises it where
    /// it next waits, as it would have met it applying the op itself.
    fn serve(&self, shards: &[Arc<Mutex<Bytes>>]) {
        let mut st = lock(&self.state);
        loop {
            if let Some((part, mut batch)) = st.batches.pop_front() {
                let bytes = &*shards[part];
                st.busy = true;
                drop(st);
                let applied = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    lock(bytes).apply_all(batch.drain())
                }));
                st = lock(&self.state);
                st.busy = false;
                match applied {
                    Ok(fault) => {
                        if st.fault.is_none() {
                            st.fault = fault;
                        }
                    }
                    Err(panic) => {
                        lock(bytes).failed = true;
                        st.panic.get_or_insert(panic);
                    }
                }
                // Emptied by its drain, or by this after a panic in it.
                batch.ops.clear();
                batch.writes.clear();
                st.spare.push(batch);
                if st.batches.is_empty() {
                    self.idle.notify_all();
                }
                continue;
            }
            if st.stop {
                return;
            }
            st = self.work.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        lock(&self.queue.state).stop = true;
        self.queue.work.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::MemoryBudget;
    use crate::hw::dtype::{BinOp, Dtype};

    #[test]
    fn a_queued_op_is_sixty_four_bytes() {
        // Every op is written to a batch the data thread reads on another
        // core: a ring step's three ops take three cache lines (and the
        // add's write its own ~200 bytes beside them), not ten.
        assert_eq!(std::mem::size_of::<Queued>(), 64);
    }

    const HBM: Space = Space::Hbm { sip: 0, cube: 0 };

    /// Two SIPs, one per partition of a machine split in two.
    fn sips() -> Arc<[u32]> {
        Arc::from([0, 1])
    }

    fn who() -> Culprit {
        Culprit {
            pe: 0,
            what: "math",
            at: 7,
        }
    }

    /// A chain of copies and adds over `plane`, then what memory holds.
    fn run(plane: &DataPlane) -> Vec<u8> {
        let f16 = |v: &[f64]| Dtype::F16.from_f64(v);
        plane.write(HBM, 0, &f16(&[1.0; 64])).unwrap();
        for step in 0..1000u64 {
            let (a, b) = ((step % 7) * 128, ((step + 3) % 7) * 128);
            plane
                .submit(DataOp::Stage {
                    slot: (step % 5) as u32,
                    src: (HBM, a),
                    len: 128,
                })
                .unwrap();
            plane
                .submit(DataOp::Land {
                    slot: (step % 5) as u32,
                    dst: (HBM, 4096 + b),
                    who: who(),
                })
                .unwrap();
            plane
                .submit(DataOp::Compute(ComputeWrite {
                    op: ComputeOp::Binary {
                        op: BinOp::Add,
                        dtype: Dtype::F16,
                    },
                    inputs: [(HBM, 4096 + b, 128), (HBM, a, 128)].into_iter().collect(),
                    out: (HBM, b, 128),
                    unit: 2,
                    who: who(),
                }))
                .unwrap();
        }
        assert!(plane.settle().is_none());
        plane.read(HBM, 0, 8192)
    }

    #[test]
    fn the_thread_applies_what_the_engine_would_have() {
        let inline = DataPlane::new(MemoryStore::default(), 1, sips());
        let threaded = DataPlane::new(MemoryStore::default(), 1, sips());
        threaded.use_a_thread();
        assert!(threaded.threaded() && !inline.threaded());
        let (a, b) = (run(&inline), run(&threaded));
        assert!(a.iter().any(|&x| x != 0));
        assert_eq!(a, b);
    }

    /// A chain of `n` copies, each of the one before's destination,
    /// submitted to `plane` (the store not looked at after).
    fn submit_chain(plane: &DataPlane, n: u64) {
        plane
            .store_of(HBM)
            .write(HBM, 0, &Dtype::F16.from_f64(&[3.0]))
            .unwrap();
        let mut src = 0;
        for i in 0..n {
            let (slot, dst) = ((i % 5) as u32, 4096 + 2 * i);
            let stage = DataOp::Stage {
                slot,
                src: (HBM, src),
                len: 2,
            };
            plane.submit(stage).unwrap();
            let land = DataOp::Land {
                slot,
                dst: (HBM, dst),
                who: who(),
            };
            plane.submit(land).unwrap();
            src = dst;
        }
    }

    #[test]
    fn a_partition_applying_its_own_batches_gives_the_same_bytes() {
        // A split plane without the thread: its ops wait in the
        // partition's batch, which is applied when it is full (twice
        // here) or when the store is looked at.
        let inline = DataPlane::new(MemoryStore::default(), 1, sips());
        let batched = DataPlane::new(MemoryStore::default(), 2, sips());
        assert!(!batched.threaded());
        let n = OWN_BATCH as u64 + 10;
        submit_chain(&inline, n);
        submit_chain(&batched, n);
        assert_eq!(
            batched.own_pending().1.lock().len(),
            20,
            "two full batches applied, the rest waits"
        );
        let end = 4096 + 2 * n;
        let (a, b) = (inline.read(HBM, 0, end), batched.read(HBM, 0, end));
        assert!(batched.own_pending().1.lock().is_empty());
        assert_eq!(&a[end as usize - 2..], &a[..2], "the chain's end");
        assert_eq!(a, b);
        assert_eq!(run(&inline), run(&batched));
    }

    /// A split plane keeps each partition's SIPs' memory in a shard of
    /// its own, and its digest is the one store's of the same memory.
    #[test]
    fn a_split_plane_keeps_each_partition_s_memory_in_its_shard() {
        let one = DataPlane::new(MemoryStore::default(), 1, sips());
        let split = DataPlane::new(MemoryStore::default(), 2, sips());
        let far = Space::Hbm { sip: 1, cube: 0 };
        for plane in [&one, &split] {
            plane.write(HBM, 0, &[1; 4096]).unwrap();
            plane.write(far, 8192, &[2; 100]).unwrap();
        }
        assert_eq!(one.store_of(far).pages(), 2);
        assert_eq!(
            (split.store_of(HBM).pages(), split.store_of(far).pages()),
            (1, 1)
        );
        assert_eq!(split.read(far, 8192, 2), vec![2, 2]);
        assert_eq!(split.digest(), one.digest());
    }

    #[test]
    fn a_panic_on_the_thread_is_raised_where_the_engine_waits() {
        // A landing with nothing staged is a bug of the caller: inline it
        // panics at once; on the thread it must not leave the engine
        // waiting forever.
        let plane = DataPlane::new(MemoryStore::default(), 1, sips());
        plane.use_a_thread();
        let land = DataOp::Land {
            slot: 3,
            dst: (HBM, 0),
            who: who(),
        };
        plane.submit(land).unwrap();
        let waited = std::panic::catch_unwind(AssertUnwindSafe(|| plane.settle()));
        let panic = waited.expect_err("the thread's panic is raised here");
        let text = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
        assert!(text.is_some_and(|t| t.contains("started")));
        // The thread is still there to be stopped.
        drop(plane);
    }

    #[test]
    fn a_refused_write_on_the_thread_is_found_and_stops_what_follows() {
        let plane = DataPlane::new(
            MemoryStore::new(Arc::new(MemoryBudget::new(4096))),
            1,
            sips(),
        );
        plane.use_a_thread();
        a_refused_write_is_found_and_stops_what_follows(plane);
    }

    #[test]
    fn a_refused_write_in_a_partition_s_batch_is_found_and_stops_what_follows() {
        let plane = DataPlane::new(
            MemoryStore::new(Arc::new(MemoryBudget::new(4096))),
            2,
            sips(),
        );
        a_refused_write_is_found_and_stops_what_follows(plane);
    }

    /// `plane`'s budget is one page, which the input takes: the first add
    /// (on another page) is refused, the second (on the input's page,
    /// which needs no new one) is not applied after it.
    fn a_refused_write_is_found_and_stops_what_follows(plane: DataPlane) {
        let add = |out: u64, at: Ps| {
            DataOp::Compute(ComputeWrite {
                op: ComputeOp::Binary {
                    op: BinOp::Add,
                    dtype: Dtype::F16,
                },
                inputs: [(HBM, 0, 2), (HBM, 0, 2)].into_iter().collect(),
                out: (HBM, out, 2),
                unit: 2,
                who: Culprit { at, ..who() },
            })
        };
        plane
            .store_of(HBM)
            .write(HBM, 0, &Dtype::F16.from_f64(&[1.0]))
            .unwrap();
        plane.submit(add(8192, 10)).unwrap();
        plane.submit(add(2, 20)).unwrap();
        let fault = plane.settle().expect("the refused write is reported");
        assert_eq!(fault.who.at, 10);
        assert!(plane.settle().is_none(), "reported once");
        // Nothing after the refusal was applied.
        assert_eq!(plane.read(HBM, 2, 2), vec![0, 0]);
    }
}
