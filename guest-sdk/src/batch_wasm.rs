//! [`Tl`] over `tl.submit` (WIT 0.1.2): a kernel's calls kept in guest
//! memory and handed to the host in one call, when the kernel needs an
//! answer only the host has (an address, the time), when [`BATCH_CALLS`]
//! are waiting, or when it ends. A call through the component model costs
//! more than the call itself; a ring step makes seven.
//!
//! The host makes the calls in order, exactly as if each had been made by
//! itself (a `send` waits for a slot, a `recv` for its message), so the
//! run is the same. What differs is when a refused call is noticed: at the
//! next submit, not at the call. The kernel then panics with the host's
//! message and the file and line of the call (each call records its
//! caller; the SDK's own helpers, `ring_allreduce` and the rest, pass
//! their caller's place on), e.g. `tl.send(dir="X") on sip0.cube0.pe1: ... (the tl call at
//! src/lib.rs:42:9)`.
//!
//! A tensor's shape and dtype are known here without asking the host (the
//! host refuses the call if they are not what this module expects); its
//! address is not: [`Tensor::addr`] submits and asks.

use crate::__algorithm::kernbench::sim::tl::{self, BatchCall};
use crate::kernel::reduced_shape;
use crate::{BinOp, CompositeOp, Dtype, ReduceOp, Tensor, Tl, UnaryOp};
use std::cell::RefCell;
use std::panic::Location;
use std::rc::Rc;

/// Calls kept before they are submitted anyway (bounds guest memory: a
/// batch, its call sites and the copy `tl.submit` lowers it to take
/// ~100 KB, which the initial heap of this tree's kernels holds, see
/// `algorithms/kernel_heap.rs`; 4096 took ~370 KB, three more pages than
/// a kernel starts with, so every launch grew its memory).
pub const BATCH_CALLS: usize = 1024;

#[derive(Default)]
struct Pending {
    /// The directions and shapes calls name by index (a kernel uses a
    /// handful; sent with every submit).
    dirs: Vec<String>,
    shapes: Vec<Vec<u32>>,
    calls: Vec<BatchCall>,
    /// Where each call was made (for a refusal's message).
    sites: Vec<&'static Location<'static>>,
    /// Tensor and future ids handed out and not in use again yet.
    free_tensors: Vec<u32>,
    next_tensor: u32,
    free_futures: Vec<u32>,
    next_future: u32,
}

impl Pending {
    #[inline]
    fn push(&mut self, call: BatchCall, site: &'static Location<'static>) {
        if self.calls.capacity() == 0 {
            self.make_room();
        }
        self.calls.push(call);
        self.sites.push(site);
    }

    /// Room for a whole batch at once: grown by doubling, a batch of calls
    /// was copied about once more on its way to the host (~1 MB of copies
    /// per ring kernel at 1024 ranks). A kernel linked with the default
    /// initial memory has ~50 KB of heap, so the room grows its linear
    /// memory (two `mprotect`s a launch); host pages are touched only
    /// where calls are written.
    #[cold]
    #[inline(never)]
    fn make_room(&mut self) {
        self.calls.reserve_exact(BATCH_CALLS);
        self.sites.reserve_exact(BATCH_CALLS);
    }

    fn dir(&mut self, dir: &str) -> u32 {
        intern(
            &mut self.dirs,
            dir.as_bytes(),
            |_| dir.to_string(),
            String::as_bytes,
        )
    }

    fn any_dir(&mut self, dir: Option<&str>) -> Option<u32> {
        dir.map(|d| self.dir(d))
    }

    fn shape(&mut self, shape: &[u32]) -> u32 {
        intern(&mut self.shapes, shape, <[u32]>::to_vec, Vec::as_slice)
    }

    fn tensor_id(&mut self) -> u32 {
        self.free_tensors.pop().unwrap_or_else(|| {
            self.next_tensor += 1;
            self.next_tensor - 1
        })
    }

    fn future_id(&mut self) -> u32 {
        self.free_futures.pop().unwrap_or_else(|| {
            self.next_future += 1;
            self.next_future - 1
        })
    }

    /// Hand the calls to the host; a refused call ends the kernel with
    /// the host's message and where the call was made.
    fn submit(&mut self) {
        if self.calls.is_empty() {
            return;
        }
        let result = tl::submit(&self.dirs, &self.shapes, &self.calls);
        self.calls.clear();
        if let Err(e) = result {
            let site = self
                .sites
                .get(e.index as usize)
                .map_or_else(|| "an unknown place".to_string(), |l| l.to_string());
            // The host reads this form (host/src/runtime/trap.rs) and
            // names the call's place instead of this one.
            panic!("{} (the tl call at {site})", e.message);
        }
        // Cleared, not taken: the next batch reuses its room.
        self.sites.clear();
    }
}

/// The index of `key` in `table` (each entry seen as `view` gives it),
/// added as `make` makes it if new.
fn intern<K: Copy + PartialEq, V>(
    table: &mut Vec<V>,
    key: &[K],
    make: impl FnOnce(&[K]) -> V,
    view: impl Fn(&V) -> &[K],
) -> u32 {
    match table.iter().position(|v| same(view(v), key)) {
        Some(i) => i as u32,
        None => {
            table.push(make(key));
            (table.len() - 1) as u32
        }
    }
}

/// `a == b`, element by element: a direction or a shape is a few
/// elements, and `==` on slices of bytes or integers calls `memcmp`,
/// which in wasm is a call into a byte loop of the C library (a ring
/// step's three lookups were ~400 of the ~3 200 wasm instructions the
/// kernel takes to record it, callgrind).
#[inline]
fn same<K: Copy + PartialEq>(a: &[K], b: &[K]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

type Shared = Rc<RefCell<Pending>>;

/// The kernel language as provided by the simulator host, calls handed
/// over in batches (see the module doc). [`crate::export_algorithm!`]
/// runs kernels with it and submits what is left when the kernel returns.
#[derive(Default, Clone)]
pub struct BatchTl {
    pending: Shared,
}

/// A tensor of a [`BatchTl`] kernel: an id the host knows it by, and the
/// shape (an index into the batch's shapes) and dtype it has.
pub struct BatchTensor {
    id: u32,
    shape: u32,
    dtype: Dtype,
    pending: Shared,
}

/// A receive in progress of a [`BatchTl`] kernel.
pub struct BatchFuture {
    id: u32,
    shape: u32,
    dtype: Dtype,
    pending: Shared,
    waited: bool,
}

impl Drop for BatchTensor {
    fn drop(&mut self) {
        let mut p = self.pending.borrow_mut();
        p.push(BatchCall::DropTensor(self.id), Location::caller());
        p.free_tensors.push(self.id);
    }
}

impl Drop for BatchFuture {
    fn drop(&mut self) {
        if !self.waited {
            let mut p = self.pending.borrow_mut();
            p.push(BatchCall::DropFuture(self.id), Location::caller());
            p.free_futures.push(self.id);
        }
    }
}

impl Tensor for BatchTensor {
    fn shape(&self) -> Vec<u32> {
        self.pending.borrow().shapes[self.shape as usize].clone()
    }
    fn numel(&self) -> u64 {
        let p = self.pending.borrow();
        p.shapes[self.shape as usize]
            .iter()
            .map(|&d| d as u64)
            .product()
    }
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn addr(&self) -> u64 {
        self.pending.borrow_mut().submit();
        tl::batch_tensor(self.id).addr()
    }
    fn nbytes(&self) -> u64 {
        self.numel() * self.dtype.itemsize() as u64
    }
}

impl BatchTl {
    /// Submit the calls not submitted yet.
    pub fn flush(&self) {
        self.pending.borrow_mut().submit();
    }

    /// Record `call` (made at `site`); submit when the batch is full.
    fn call(&self, call: BatchCall, site: &'static Location<'static>) {
        let mut p = self.pending.borrow_mut();
        p.push(call, site);
        if p.calls.len() >= BATCH_CALLS {
            p.submit();
        }
    }

    /// A new tensor of `shape` / `dtype`, made by the call `make` builds
    /// from its id (and the batch, to name directions and shapes).
    fn make(
        &self,
        shape: u32,
        dtype: Dtype,
        site: &'static Location<'static>,
        make: impl FnOnce(&mut Pending, u32) -> BatchCall,
    ) -> BatchTensor {
        let call = {
            let mut p = self.pending.borrow_mut();
            let id = p.tensor_id();
            (make(&mut p, id), id)
        };
        let (call, id) = call;
        self.call(call, site);
        BatchTensor {
            id,
            shape,
            dtype,
            pending: self.pending.clone(),
        }
    }
}

impl BatchTl {
    /// `recv` (`into` none) and `recv_into`.
    fn receive(
        &self,
        dir: Option<&str>,
        shape: &[u32],
        dtype: Dtype,
        into: Option<u64>,
        site: &'static Location<'static>,
    ) -> BatchTensor {
        let shape = self.pending.borrow_mut().shape(shape);
        self.make(shape, dtype, site, |p, out| {
            BatchCall::Recv(tl::BatchRecv {
                dir: p.any_dir(dir),
                shape,
                dtype: dtype.into(),
                into,
                out,
            })
        })
    }
}

impl Tl for BatchTl {
    type Tensor = BatchTensor;
    type Future = BatchFuture;

    fn program_id(&self, axis: u32) -> i64 {
        tl::program_id(axis)
    }
    fn num_programs(&self, axis: u32) -> i64 {
        tl::num_programs(axis)
    }
    #[track_caller]
    fn load(&self, addr: u64, shape: &[u32], dtype: Dtype) -> BatchTensor {
        let shape = self.pending.borrow_mut().shape(shape);
        self.make(shape, dtype, Location::caller(), |_, out| {
            BatchCall::Load((addr, shape, dtype.into(), out))
        })
    }
    #[track_caller]
    fn store(&self, addr: u64, value: &BatchTensor) {
        self.call(BatchCall::Store((addr, value.id)), Location::caller());
    }
    #[track_caller]
    fn send(&self, dir: &str, value: &BatchTensor) {
        let dir = self.pending.borrow_mut().dir(dir);
        self.call(BatchCall::Send((dir, value.id)), Location::caller());
    }
    #[track_caller]
    fn send_addr(&self, dir: &str, src_addr: u64, shape: &[u32], dtype: Dtype) {
        let (dir, shape) = {
            let mut p = self.pending.borrow_mut();
            (p.dir(dir), p.shape(shape))
        };
        let call = BatchCall::SendAddr((dir, src_addr, shape, dtype.into()));
        self.call(call, Location::caller());
    }
    #[track_caller]
    fn recv(&self, dir: Option<&str>, shape: &[u32], dtype: Dtype) -> BatchTensor {
        self.receive(dir, shape, dtype, None, Location::caller())
    }
    #[track_caller]
    fn recv_into(
        &self,
        dir: Option<&str>,
        shape: &[u32],
        dtype: Dtype,
        dst_addr: u64,
    ) -> BatchTensor {
        self.receive(dir, shape, dtype, Some(dst_addr), Location::caller())
    }
    #[track_caller]
    fn recv_async(&self, dir: Option<&str>, shape: &[u32], dtype: Dtype) -> BatchFuture {
        let (call, id) = {
            let mut p = self.pending.borrow_mut();
            let id = p.future_id();
            let (dir, shape) = (p.any_dir(dir), p.shape(shape));
            (BatchCall::RecvAsync((dir, shape, dtype.into(), id)), id)
        };
        self.call(call, Location::caller());
        let shape = self.pending.borrow_mut().shape(shape);
        BatchFuture {
            id,
            shape,
            dtype,
            pending: self.pending.clone(),
            waited: false,
        }
    }
    #[track_caller]
    fn wait(&self, mut f: BatchFuture) -> BatchTensor {
        f.waited = true;
        let (fut, shape) = (f.id, f.shape);
        self.pending.borrow_mut().free_futures.push(fut);
        self.make(shape, f.dtype, Location::caller(), |_, out| {
            BatchCall::Wait((fut, out))
        })
    }
    #[track_caller]
    fn binary(&self, op: BinOp, a: &BatchTensor, b: &BatchTensor) -> BatchTensor {
        let call = |_: &mut Pending, out| BatchCall::Binary((op.into(), a.id, b.id, out));
        self.make(a.shape, a.dtype, Location::caller(), call)
    }
    #[track_caller]
    fn add(&self, a: &BatchTensor, b: &BatchTensor) -> BatchTensor {
        // The trait's own `add` does this, but without the caller's place.
        self.binary(BinOp::Add, a, b)
    }
    #[track_caller]
    fn scale(&self, a: &BatchTensor, factor: f64) -> BatchTensor {
        let call = |_: &mut Pending, out| BatchCall::Scale((a.id, factor, out));
        self.make(a.shape, a.dtype, Location::caller(), call)
    }
    #[track_caller]
    fn unary(&self, op: UnaryOp, a: &BatchTensor) -> BatchTensor {
        let call = |_: &mut Pending, out| BatchCall::Unary((op.into(), a.id, out));
        self.make(a.shape, a.dtype, Location::caller(), call)
    }
    #[track_caller]
    fn cast(&self, a: &BatchTensor, dtype: Dtype) -> BatchTensor {
        let call = |_: &mut Pending, out| BatchCall::Cast((a.id, dtype.into(), out));
        self.make(a.shape, dtype, Location::caller(), call)
    }
    #[track_caller]
    fn gemm(&self, a: &BatchTensor, b: &BatchTensor, out_dtype: Dtype) -> BatchTensor {
        self.composite(CompositeOp::Gemm, a, b, None, out_dtype)
    }
    #[track_caller]
    fn composite(
        &self,
        op: CompositeOp,
        a: &BatchTensor,
        b: &BatchTensor,
        c: Option<&BatchTensor>,
        out_dtype: Dtype,
    ) -> BatchTensor {
        // [m, k] x [k, n] -> [m, n]; other shapes are refused by the host.
        let shape = {
            let mut p = self.pending.borrow_mut();
            let (sa, sb) = (&p.shapes[a.shape as usize], &p.shapes[b.shape as usize]);
            match (sa.as_slice(), sb.as_slice()) {
                (&[m, _], &[_, n]) => p.shape(&[m, n]),
                _ => a.shape,
            }
        };
        let c = c.map(|c| c.id);
        let call = |_: &mut Pending, out| {
            BatchCall::Composite(tl::BatchComposite {
                op: op.into(),
                a: a.id,
                b: b.id,
                c,
                out_dtype: out_dtype.into(),
                out,
            })
        };
        self.make(shape, out_dtype, Location::caller(), call)
    }
    #[track_caller]
    fn reduce(&self, op: ReduceOp, a: &BatchTensor, axis: u32) -> BatchTensor {
        let call = |_: &mut Pending, out| BatchCall::Reduce((op.into(), a.id, axis, out));
        let shape = {
            let mut p = self.pending.borrow_mut();
            let out = reduced_shape(&p.shapes[a.shape as usize], axis);
            p.shape(&out)
        };
        self.make(shape, a.dtype, Location::caller(), call)
    }
    fn now_ps(&self) -> u64 {
        self.flush();
        tl::now_ps()
    }
    fn log(&self, msg: &str) {
        self.flush();
        tl::log(msg)
    }
}
