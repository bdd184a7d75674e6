//! [`Tl`] over `tl.submit-encoded` (WIT 0.6.3): a kernel's calls kept in
//! guest memory, as the bytes that function reads, and handed to the host
//! in one call, when the kernel needs an
//! answer only the host has (an address, the time), when [`BATCH_CALLS`]
//! are waiting, or when it ends. A call through the component model costs
//! more than the call itself; a ring step makes seven. As bytes (a case
//! byte, then LEB128 fields: ~1 byte a field) the calls cross in one
//! copy; as `tl.submit`'s `list<batch-call>` each 48-byte element was
//! built here, then lowered field by field (~90 instructions a call).
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

use crate::__algorithm::kernbench::sim::tl;
use crate::batch_bytes::{case, Fields};
use crate::kernel::reduced_shape;
use crate::{BinOp, CompositeOp, Dtype, ReduceOp, Tensor, Tl, UnaryOp};
use std::cell::RefCell;
use std::panic::Location;
use std::rc::Rc;

/// Calls kept before they are submitted anyway (bounds guest memory: a
/// batch and its call sites take ~20 KB, which the initial heap of this
/// tree's kernels holds, see `algorithms/kernel_heap.rs`).
pub const BATCH_CALLS: usize = 1024;

/// Bytes reserved for a batch's calls: a ring step's calls take 3–6
/// bytes each; a batch of longer ones grows its buffer.
const BATCH_BYTES: usize = 8 * BATCH_CALLS;

#[derive(Default)]
struct Pending {
    /// The directions and shapes calls name by index (a kernel uses a
    /// handful; sent with every submit).
    dirs: Vec<String>,
    shapes: Vec<Vec<u32>>,
    /// The calls, as `tl.submit-encoded` reads them.
    calls: Vec<u8>,
    /// Where each call was made (for a refusal's message); one per call.
    sites: Vec<&'static Location<'static>>,
    /// Tensor and future ids handed out and not in use again yet.
    free_tensors: Vec<u32>,
    next_tensor: u32,
    free_futures: Vec<u32>,
    next_future: u32,
}

impl Pending {
    /// Start a call of `case` made at `site`: its fields follow.
    #[inline]
    fn call(&mut self, case: u8, site: &'static Location<'static>) -> Fields<'_> {
        if self.calls.capacity() == 0 {
            self.make_room();
        }
        self.sites.push(site);
        self.calls.push(case);
        Fields(&mut self.calls)
    }

    /// Submit when the batch is full (after a call's fields are written).
    #[inline]
    fn submit_if_full(&mut self) {
        if self.sites.len() >= BATCH_CALLS {
            self.submit();
        }
    }

    /// Room for a whole batch at once: grown by doubling, a batch of calls
    /// was copied about once more on its way to the host. A kernel linked
    /// with the default initial memory has ~50 KB of heap, so the room
    /// grows its linear memory (two `mprotect`s a launch); host pages are
    /// touched only where calls are written.
    #[cold]
    #[inline(never)]
    fn make_room(&mut self) {
        self.calls.reserve_exact(BATCH_BYTES);
        self.sites.reserve_exact(BATCH_CALLS);
    }

    #[inline(always)]
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

    #[inline(always)]
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
        if self.sites.is_empty() {
            return;
        }
        let result = tl::submit_encoded(&self.dirs, &self.shapes, &self.calls);
        self.calls.clear();
        if let Err(e) = result {
            let site = self
                .sites
                .get(e.index as usize)
                .map_or_else(|| "an unknown place".to_string(), |l| l.to_string());
            // The host reads this form (runtime/src/runtime/trap.rs) and
            // names the call's place instead of this one.
            panic!("{} (the tl call at {site})", e.message);
        }
        // Cleared, not taken: the next batch reuses its room.
        self.sites.clear();
    }
}

/// The index of `key` in `table` (each entry seen as `view` gives it),
/// added as `make` makes it if new.
#[inline(always)]
fn intern<K: Copy + PartialEq, V>(
    table: &mut Vec<V>,
    key: &[K],
    make: impl FnOnce(&[K]) -> V,
    view: impl Fn(&V) -> &[K],
) -> u32 {
    match table.iter().position(|v| same(view(v), key)) {
        Some(i) => i as u32,
        None => append_new(table, make(key)),
    }
}

/// `value` as the new last entry of `table`; its index.
#[cold]
#[inline(never)]
fn append_new<V>(table: &mut Vec<V>, value: V) -> u32 {
    table.push(value);
    (table.len() - 1) as u32
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
        p.call(case::DROP_TENSOR, Location::caller()).u32(self.id);
        p.free_tensors.push(self.id);
    }
}

impl Drop for BatchFuture {
    fn drop(&mut self) {
        if !self.waited {
            let mut p = self.pending.borrow_mut();
            p.call(case::DROP_FUTURE, Location::caller()).u32(self.id);
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

    /// Record a call of `case` made at `site`: `intern` names its
    /// directions and shapes in the batch, `fields` writes its fields with
    /// them; submit when the batch is full. One borrow of the batch.
    fn call<P>(
        &self,
        case: u8,
        site: &'static Location<'static>,
        intern: impl FnOnce(&mut Pending) -> P,
        fields: impl FnOnce(&mut Fields<'_>, P),
    ) {
        let mut p = self.pending.borrow_mut();
        let named = intern(&mut p);
        fields(&mut p.call(case, site), named);
        p.submit_if_full();
    }

    /// A new tensor of `dtype`, made by a call of `case` made at `site`:
    /// `intern` names its directions and shapes (and gives the new
    /// tensor's shape first), `fields` writes its fields but the last,
    /// which is the new tensor's id.
    fn make<P>(
        &self,
        dtype: Dtype,
        case: u8,
        site: &'static Location<'static>,
        intern: impl FnOnce(&mut Pending) -> (u32, P),
        fields: impl FnOnce(&mut Fields<'_>, P),
    ) -> BatchTensor {
        let (id, shape) = {
            let mut p = self.pending.borrow_mut();
            let (shape, named) = intern(&mut p);
            let id = p.tensor_id();
            let mut f = p.call(case, site);
            fields(&mut f, named);
            f.u32(id);
            p.submit_if_full();
            (id, shape)
        };
        BatchTensor {
            id,
            shape,
            dtype,
            pending: self.pending.clone(),
        }
    }

    /// `recv` (`into` none) and `recv_into`.
    fn receive(
        &self,
        dir: Option<&str>,
        shape: &[u32],
        dtype: Dtype,
        into: Option<u64>,
        site: &'static Location<'static>,
    ) -> BatchTensor {
        let intern = |p: &mut Pending| {
            let shape = p.shape(shape);
            (shape, (p.any_dir(dir), shape))
        };
        self.make(dtype, case::RECV, site, intern, |f, (dir, shape)| {
            f.opt_u32(dir).u32(shape).dtype(dtype).opt_u64(into);
        })
    }

    /// A call whose tensor has the shape of `a` (a binary, a scale, ...).
    fn like(
        &self,
        a: &BatchTensor,
        dtype: Dtype,
        case: u8,
        site: &'static Location<'static>,
        fields: impl FnOnce(&mut Fields<'_>),
    ) -> BatchTensor {
        self.make(dtype, case, site, |_| (a.shape, ()), |f, ()| fields(f))
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
        let intern = |p: &mut Pending| {
            let shape = p.shape(shape);
            (shape, shape)
        };
        self.make(dtype, case::LOAD, Location::caller(), intern, |f, shape| {
            f.u64(addr).u32(shape).dtype(dtype);
        })
    }
    #[track_caller]
    fn store(&self, addr: u64, value: &BatchTensor) {
        self.call(
            case::STORE,
            Location::caller(),
            |_| (),
            |f, ()| {
                f.u64(addr).u32(value.id);
            },
        );
    }
    #[track_caller]
    fn send(&self, dir: &str, value: &BatchTensor) {
        let intern = |p: &mut Pending| p.dir(dir);
        self.call(case::SEND, Location::caller(), intern, |f, dir| {
            f.u32(dir).u32(value.id);
        });
    }
    #[track_caller]
    fn send_addr(&self, dir: &str, src_addr: u64, shape: &[u32], dtype: Dtype) {
        let intern = |p: &mut Pending| (p.dir(dir), p.shape(shape));
        self.call(
            case::SEND_ADDR,
            Location::caller(),
            intern,
            |f, (dir, shape)| {
                f.u32(dir).u64(src_addr).u32(shape).dtype(dtype);
            },
        );
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
        let (id, shape) = {
            let mut p = self.pending.borrow_mut();
            let id = p.future_id();
            let (dir, shape) = (p.any_dir(dir), p.shape(shape));
            p.call(case::RECV_ASYNC, Location::caller())
                .opt_u32(dir)
                .u32(shape)
                .dtype(dtype)
                .u32(id);
            p.submit_if_full();
            (id, shape)
        };
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
        let intern = |_: &mut Pending| (shape, ());
        self.make(f.dtype, case::WAIT, Location::caller(), intern, |f, ()| {
            f.u32(fut);
        })
    }
    #[track_caller]
    fn binary(&self, op: BinOp, a: &BatchTensor, b: &BatchTensor) -> BatchTensor {
        self.like(a, a.dtype, case::BINARY, Location::caller(), |f| {
            f.binop(op).u32(a.id).u32(b.id);
        })
    }
    #[track_caller]
    fn add(&self, a: &BatchTensor, b: &BatchTensor) -> BatchTensor {
        // The trait's own `add` does this, but without the caller's place.
        self.binary(BinOp::Add, a, b)
    }
    #[track_caller]
    fn scale(&self, a: &BatchTensor, factor: f64) -> BatchTensor {
        self.like(a, a.dtype, case::SCALE, Location::caller(), |f| {
            f.u32(a.id).f64(factor);
        })
    }
    #[track_caller]
    fn unary(&self, op: UnaryOp, a: &BatchTensor) -> BatchTensor {
        self.like(a, a.dtype, case::UNARY, Location::caller(), |f| {
            f.unary_op(op).u32(a.id);
        })
    }
    #[track_caller]
    fn cast(&self, a: &BatchTensor, dtype: Dtype) -> BatchTensor {
        self.like(a, dtype, case::CAST, Location::caller(), |f| {
            f.u32(a.id).dtype(dtype);
        })
    }
    #[track_caller]
    fn fill(&self, shape: &[u32], dtype: Dtype, value: f64) -> BatchTensor {
        let intern = |p: &mut Pending| {
            let shape = p.shape(shape);
            (shape, shape)
        };
        self.make(dtype, case::FILL, Location::caller(), intern, |f, shape| {
            f.u32(shape).dtype(dtype).f64(value);
        })
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
        let intern = |p: &mut Pending| {
            let (sa, sb) = (&p.shapes[a.shape as usize], &p.shapes[b.shape as usize]);
            let shape = match (sa.as_slice(), sb.as_slice()) {
                (&[m, _], &[_, n]) => p.shape(&[m, n]),
                _ => a.shape,
            };
            (shape, ())
        };
        let c = c.map(|c| c.id);
        self.make(
            out_dtype,
            case::COMPOSITE,
            Location::caller(),
            intern,
            |f, ()| {
                f.composite_op(op)
                    .u32(a.id)
                    .u32(b.id)
                    .opt_u32(c)
                    .dtype(out_dtype);
            },
        )
    }
    #[track_caller]
    fn reduce(&self, op: ReduceOp, a: &BatchTensor, axis: u32) -> BatchTensor {
        let intern = |p: &mut Pending| {
            let out = reduced_shape(&p.shapes[a.shape as usize], axis);
            (p.shape(&out), ())
        };
        self.make(
            a.dtype,
            case::REDUCE,
            Location::caller(),
            intern,
            |f, ()| {
                f.reduce_op(op).u32(a.id).u32(axis);
            },
        )
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
