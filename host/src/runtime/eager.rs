//! Kernels run ahead of simulated time: the guest runs to completion at
//! once, each `tl` call a plain host call that checks what it can and
//! records the call (see [`super::commands`]); the recorded list then
//! drives the machine. The guest's instance is gone before the first
//! command is simulated, so a rank costs no fiber, no Store and no host
//! call glue per command while the simulation runs.
//!
//! A call whose answer depends on simulated time or on where the machine
//! put a tensor — `tl.now_ps`, `tl.log` (its lines carry the time),
//! `tensor.addr`, the WASI clocks and sleeps — cannot be answered ahead
//! of time: it stops the recording with [`NeedsSimulatedTime`], and the
//! kernel runs again from the start in step with simulated time
//! ([`super::kernel`]). The recording had no effect on the machine, and
//! its output is discarded.
//!
//! Errors that need no simulated time (a bad address, an unknown
//! direction, mismatched shapes, a message larger than a slot) trap the
//! guest at the call, with its backtrace, as they do in step; the rest
//! (scratch memory, a message of another size) are found by the replay.

use super::batch::{batch_call_fn, BatchIds};
use super::bindings::algorithm::kernbench::sim::types;
use super::bindings::algorithm_eager::kernbench::sim::tl;
use super::commands::{call, Command, CommandList, TensorId};
use super::kernel::{dtype_in, dtype_out, program_axis, tl_ops_in};
use super::limits::{Guarded, InstanceGuard};
use crate::error::{HwError, TlCallError};
use crate::hw::dtype::{BinOp, Dtype};
use crate::hw::gemm_ops::CompositeOp;
use crate::hw::machine::check_same_operands;
use crate::hw::{Machine, TensorRef};
use crate::topology::PeCoord;
use std::sync::Arc;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// Commands one recording may hold; a kernel issuing more runs in step
/// with simulated time instead (where the command queue bounds it).
pub const MAX_RECORDED_COMMANDS: usize = 1 << 20;

/// Accepted sends / receive directions an [`EagerHost`] remembers (a
/// kernel uses a few; past this many, the rest are checked every time).
const MAX_ACCEPTED: usize = 16;

/// A kernel asked for something only simulated time can answer.
#[derive(Debug, thiserror::Error)]
#[error("{what} cannot be answered ahead of simulated time")]
pub struct NeedsSimulatedTime {
    pub what: &'static str,
}

/// The host object behind a recorded kernel's `tl.tensor` handle: what
/// the kernel may ask of it without simulated time. Kept in
/// [`EagerHost::tensors`] at its id, which is also the handle's rep (not
/// in the resource table: a boxed entry per tensor made and dropped was
/// a tenth of recording a ring step).
pub struct EagerTensor {
    id: TensorId,
    /// Its shape's index in the list's shapes: a tensor made from another
    /// shares its shape without a copy, and equal shapes have one index.
    shape: u32,
    dtype: Dtype,
}

/// The host object behind a recorded kernel's `tl.recv-future` handle.
pub struct EagerFuture {
    fut: u32,
    /// Its shape's index in the list's shapes (see [`EagerTensor`]).
    shape: u32,
    dtype: Dtype,
    /// Its id in [`EagerHost::unwaited`].
    id: u64,
}

/// Store data of a kernel being recorded.
pub struct EagerHost {
    wasi: WasiCtx,
    table: ResourceTable,
    machine: Arc<Machine>,
    pe: PeCoord,
    guard: InstanceGuard,
    pub(crate) list: CommandList,
    /// The live tensors by id (= the rep of their handles).
    tensors: Vec<Option<EagerTensor>>,
    /// Tensor ids whose handles were dropped, for reuse.
    free: Vec<TensorId>,
    /// `recv_async` futures not waited for.
    pub(crate) unwaited: super::futures::Unwaited,
    /// The ids of its `tl.submit` batches.
    batch: BatchIds,
    /// Sends (direction id, bytes) and receive directions the machine
    /// has accepted: they depend on the installed IPCQ only, which a
    /// kernel cannot change, so each is asked once per kernel.
    accepted_sends: Vec<(u32, u64)>,
    accepted_recvs: Vec<Option<u32>>,
    /// A call addressed another SIP's virtual memory (its recording
    /// depends on that SIP's address map; see [`super::recording_memo`]).
    pub(crate) addresses_other_sips: std::cell::Cell<bool>,
}

impl Guarded for EagerHost {
    fn guard(&mut self) -> &mut InstanceGuard {
        &mut self.guard
    }
}

impl WasiView for EagerHost {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl EagerHost {
    pub fn new(wasi: WasiCtx, machine: Arc<Machine>, pe: PeCoord, guard: InstanceGuard) -> Self {
        EagerHost {
            wasi,
            table: ResourceTable::new(),
            machine,
            pe,
            guard,
            list: CommandList::default(),
            tensors: Vec::new(),
            free: Vec::new(),
            unwaited: Default::default(),
            batch: BatchIds::default(),
            accepted_sends: Vec::new(),
            accepted_recvs: Vec::new(),
            addresses_other_sips: Default::default(),
        }
    }

    /// [`Machine::view`], noting an address of another SIP's virtual
    /// memory.
    fn view(&self, addr: u64, shape: &[u32], dtype: Dtype) -> Result<TensorRef, HwError> {
        if crate::address::as_virtual(addr).is_some_and(|(sip, _)| sip != self.pe.sip) {
            self.addresses_other_sips.set(true);
        }
        self.machine.view(addr, shape, dtype)
    }

    fn fail(&self, call: String, source: HwError) -> wasmtime::Error {
        wasmtime::Error::new(TlCallError {
            call,
            pe: self.pe.to_string(),
            source,
        })
    }

    /// The index of direction `dir` in the list: the PE's own `Dir` for it.
    fn dir(&mut self, dir: &str) -> u32 {
        let (machine, pe) = (&self.machine, self.pe);
        self.list.dir(dir, |d| machine.direction(pe, d))
    }

    fn record(&mut self, c: Command) -> wasmtime::Result<()> {
        if self.list.len() >= MAX_RECORDED_COMMANDS {
            return Err(wasmtime::Error::new(NeedsSimulatedTime {
                what: "a kernel of more than 2^20 commands",
            }));
        }
        self.list.push(c);
        Ok(())
    }

    /// A new handle to a tensor of `shape` / `dtype`; `make` records the
    /// command that produces it, given its id.
    fn produce(
        &mut self,
        shape: u32,
        dtype: Dtype,
        make: impl FnOnce(TensorId) -> Command,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        let id = self.free.pop().unwrap_or_else(|| {
            self.list.tensors += 1;
            self.list.tensors - 1
        });
        self.record(make(id))?;
        let i = id as usize;
        if self.tensors.len() <= i {
            self.tensors.resize_with(i + 1, || None);
        }
        self.tensors[i] = Some(EagerTensor { id, shape, dtype });
        Ok(Resource::new_own(id))
    }

    fn tensor(&self, r: &Resource<EagerTensor>) -> wasmtime::Result<&EagerTensor> {
        // Wasmtime hands the host only reps of handles it made and the
        // guest still holds; a dead one is a host bug, refused anyway.
        self.tensors
            .get(r.rep() as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| wasmtime::format_err!("tensor handle {} is not live", r.rep()))
    }

    fn binary_op(
        &mut self,
        op: BinOp,
        a: Resource<EagerTensor>,
        b: Resource<EagerTensor>,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        let (a, b) = (self.tensor(&a)?, self.tensor(&b)?);
        // One shape index is one shape: only operands that differ in it
        // (or in dtype) need the check that names what differs.
        if (a.shape, a.dtype) != (b.shape, b.dtype) {
            let (sa, sb) = (self.list.shape_at(a.shape), self.list.shape_at(b.shape));
            check_same_operands(op, (sa, a.dtype), (sb, b.dtype))
                .map_err(|e| self.fail(call::binary(op), e))?;
        }
        let (ia, ib, shape, dtype) = (a.id, b.id, a.shape, a.dtype);
        self.produce(shape, dtype, |out| Command::Binary {
            op,
            a: ia,
            b: ib,
            out,
        })
    }

    /// `tl.gemm` / `tl.composite`: its operands are checked now, the
    /// command recorded.
    fn composite_of(
        &mut self,
        op: CompositeOp,
        (a, b, c): (
            Resource<EagerTensor>,
            Resource<EagerTensor>,
            Option<Resource<EagerTensor>>,
        ),
        out_dtype: types::Dtype,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        let dtype = dtype_in(out_dtype);
        let (a, b) = (self.tensor(&a)?, self.tensor(&b)?);
        let c = c.map(|c| self.tensor(&c)).transpose()?;
        let shape = crate::hw::gemm_ops::composite_shape(
            op,
            (self.list.shape_at(a.shape), a.dtype),
            (self.list.shape_at(b.shape), b.dtype),
            c.map(|c| self.list.shape_at(c.shape)),
            self.machine.timing.gemm_max,
        );
        let (ia, ib, ic) = (a.id, b.id, c.map(|c| c.id));
        let (m, n, _) = match shape {
            Ok(s) => s,
            Err(what) => {
                let e = HwError::Mismatch { what };
                return Err(self.fail(call::composite(op, dtype), e));
            }
        };
        let shape = self.list.shape(&[m, n]);
        self.produce(shape, dtype, |out| Command::Composite {
            op,
            a: ia,
            b: ib,
            c: ic,
            dtype,
            out,
        })
    }

    /// What a receive can be refused for ahead of time: the direction
    /// (unless `dir_accepted`: the machine took it before), the
    /// destination, the shape.
    fn check_receive(
        &self,
        (dir, dir_accepted): (Option<&str>, bool),
        shape: &[u32],
        dtype: Dtype,
        dst: Option<u64>,
    ) -> Result<(), HwError> {
        let dir_ok = match dir_accepted {
            true => Ok(()),
            false => self.machine.check_recv(self.pe, dir),
        };
        dir_ok.and_then(|()| match dst {
            Some(addr) => self.view(addr, shape, dtype).map(drop),
            None => dtype.nbytes(shape).map(drop).map_err(HwError::from),
        })
    }

    /// `tl.recv` (`dst` none) and `tl.recv-into`, the direction and shape
    /// by reference (see [`super::batch`]).
    fn recv_named(
        &mut self,
        dir: Option<&str>,
        shape: &[u32],
        dtype: types::Dtype,
        dst: Option<u64>,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        let dtype = dtype_in(dtype);
        let dir_id = dir.map(|d| self.dir(d));
        let accepted = self.accepted_recvs.contains(&dir_id);
        if let Err(e) = self.check_receive((dir, accepted), shape, dtype, dst) {
            return Err(self.fail(call::recv(dir, dst), e));
        }
        if !accepted && self.accepted_recvs.len() < MAX_ACCEPTED {
            self.accepted_recvs.push(dir_id);
        }
        let dir = dir_id;
        let shape_id = self.list.shape(shape);
        self.produce(shape_id, dtype, |out| match dst {
            None => Command::Recv {
                dir,
                shape: shape_id,
                dtype,
                out,
            },
            Some(dst) => Command::RecvInto {
                dir,
                shape: shape_id,
                dtype,
                dst,
                out,
            },
        })
    }

    /// `tl.load`, the shape by reference.
    fn load_named(
        &mut self,
        addr: u64,
        shape: &[u32],
        dtype: types::Dtype,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        let dtype = dtype_in(dtype);
        if let Err(e) = self.view(addr, shape, dtype) {
            return Err(self.fail(call::load(addr, shape), e));
        }
        let shape_id = self.list.shape(shape);
        self.produce(shape_id, dtype, |out| Command::Load {
            addr,
            shape: shape_id,
            dtype,
            out,
        })
    }

    /// `tl.send`, the direction by reference.
    fn send_named(&mut self, dir: &str, value: Resource<EagerTensor>) -> wasmtime::Result<()> {
        let v = self.tensor(&value)?;
        let nbytes = v.dtype.nbytes(self.list.shape_at(v.shape))?;
        let value = v.id;
        let dir_id = self.dir(dir);
        if !self.accepted_sends.contains(&(dir_id, nbytes)) {
            if let Err(e) = self.machine.check_send(self.pe, dir, nbytes) {
                return Err(self.fail(call::send(dir), e));
            }
            if self.accepted_sends.len() < MAX_ACCEPTED {
                self.accepted_sends.push((dir_id, nbytes));
            }
        }
        self.record(Command::Send { dir: dir_id, value })
    }
}

tl_ops_in!(tl);

impl types::Host for EagerHost {}
impl crate::runtime::bindings::algorithm::kernbench::sim::ccl::Host for EagerHost {}

impl tl::HostTensor for EagerHost {
    fn shape(&mut self, r: Resource<EagerTensor>) -> wasmtime::Result<Vec<u32>> {
        let t = self.tensor(&r)?;
        Ok(self.list.shape_at(t.shape).to_vec())
    }
    fn dtype(&mut self, r: Resource<EagerTensor>) -> wasmtime::Result<types::Dtype> {
        Ok(dtype_out(self.tensor(&r)?.dtype))
    }
    fn addr(&mut self, _: Resource<EagerTensor>) -> wasmtime::Result<u64> {
        Err(wasmtime::Error::new(NeedsSimulatedTime {
            what: "tensor.addr",
        }))
    }
    fn nbytes(&mut self, r: Resource<EagerTensor>) -> wasmtime::Result<u64> {
        let t = self.tensor(&r)?;
        Ok(t.dtype.nbytes(self.list.shape_at(t.shape))?)
    }
    fn drop(&mut self, r: Resource<EagerTensor>) -> wasmtime::Result<()> {
        let t = self
            .tensors
            .get_mut(r.rep() as usize)
            .and_then(Option::take)
            .ok_or_else(|| wasmtime::format_err!("tensor handle {} is not live", r.rep()))?;
        self.record(Command::Drop(t.id))?;
        self.free.push(t.id);
        Ok(())
    }
}

impl tl::HostRecvFuture for EagerHost {
    fn shape(&mut self, r: Resource<EagerFuture>) -> wasmtime::Result<Vec<u32>> {
        let shape = self.table.get(&r)?.shape;
        Ok(self.list.shape_at(shape).to_vec())
    }
    fn dtype(&mut self, r: Resource<EagerFuture>) -> wasmtime::Result<types::Dtype> {
        Ok(dtype_out(self.table.get(&r)?.dtype))
    }
    fn drop(&mut self, r: Resource<EagerFuture>) -> wasmtime::Result<()> {
        // Not waited for: it stays in `unwaited`, and the kernel fails at its end.
        self.table.delete(r)?;
        Ok(())
    }
}

impl tl::Host for EagerHost {
    fn recv_async(
        &mut self,
        dir: Option<String>,
        shape: Vec<u32>,
        dtype: types::Dtype,
    ) -> wasmtime::Result<Resource<EagerFuture>> {
        let dtype = dtype_in(dtype);
        if let Err(e) = self.check_receive((dir.as_deref(), false), &shape, dtype, None) {
            return Err(self.fail(super::futures::recv_async_call(dir.as_deref()), e));
        }
        let fut = self.list.futures;
        self.list.futures += 1;
        let dir_id = dir.as_deref().map(|d| self.dir(d));
        let shape_id = self.list.shape(&shape);
        self.record(Command::RecvAsync {
            dir: dir_id,
            shape: shape_id,
            dtype,
            fut,
        })?;
        let id = self.unwaited.issued(dir.clone());
        Ok(self.table.push(EagerFuture {
            fut,
            shape: shape_id,
            dtype,
            id,
        })?)
    }

    fn wait(&mut self, f: Resource<EagerFuture>) -> wasmtime::Result<Resource<EagerTensor>> {
        let EagerFuture {
            fut,
            shape,
            dtype,
            id,
            ..
        } = self.table.delete(f)?;
        self.unwaited.waited(id);
        self.produce(shape, dtype, |out| Command::Wait { fut, out })
    }

    fn program_id(&mut self, axis: u32) -> wasmtime::Result<i64> {
        program_axis(&self.machine, self.pe, axis, false).map_err(|(c, e)| self.fail(c, e))
    }

    fn num_programs(&mut self, axis: u32) -> wasmtime::Result<i64> {
        program_axis(&self.machine, self.pe, axis, true).map_err(|(c, e)| self.fail(c, e))
    }

    fn load(
        &mut self,
        addr: u64,
        shape: Vec<u32>,
        dtype: types::Dtype,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        self.load_named(addr, &shape, dtype)
    }

    fn store(&mut self, addr: u64, value: Resource<EagerTensor>) -> wasmtime::Result<()> {
        let v = self.tensor(&value)?;
        if let Err(e) = self.view(addr, self.list.shape_at(v.shape), v.dtype) {
            return Err(self.fail(call::store(addr), e));
        }
        let value = v.id;
        self.record(Command::Store { addr, value })
    }

    fn send(&mut self, dir: String, value: Resource<EagerTensor>) -> wasmtime::Result<()> {
        self.send_named(&dir, value)
    }

    fn send_addr(
        &mut self,
        dir: String,
        src_addr: u64,
        shape: Vec<u32>,
        dtype: types::Dtype,
    ) -> wasmtime::Result<()> {
        let dtype = dtype_in(dtype);
        let checked = self
            .view(src_addr, &shape, dtype)
            .and_then(|v| self.machine.check_send(self.pe, &dir, v.nbytes()));
        if let Err(e) = checked {
            return Err(self.fail(call::send_addr(&dir, src_addr, &shape), e));
        }
        let (dir, shape) = (self.dir(&dir), self.list.shape(&shape));
        self.record(Command::SendAddr {
            dir,
            addr: src_addr,
            shape,
            dtype,
        })
    }

    fn recv(
        &mut self,
        dir: Option<String>,
        shape: Vec<u32>,
        dtype: types::Dtype,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        self.recv_named(dir.as_deref(), &shape, dtype, None)
    }

    fn recv_into(
        &mut self,
        dir: Option<String>,
        shape: Vec<u32>,
        dtype: types::Dtype,
        dst_addr: u64,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        self.recv_named(dir.as_deref(), &shape, dtype, Some(dst_addr))
    }

    fn add(
        &mut self,
        a: Resource<EagerTensor>,
        b: Resource<EagerTensor>,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        self.binary_op(BinOp::Add, a, b)
    }

    fn binary(
        &mut self,
        op: tl::Binop,
        a: Resource<EagerTensor>,
        b: Resource<EagerTensor>,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        let op = binop_in(op);
        self.binary_op(op, a, b)
    }

    fn scale(
        &mut self,
        a: Resource<EagerTensor>,
        factor: f64,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        let a = self.tensor(&a)?;
        let (id, shape, dtype) = (a.id, a.shape, a.dtype);
        self.produce(shape, dtype, |out| Command::Scale { a: id, factor, out })
    }

    fn unary(
        &mut self,
        op: tl::UnaryOp,
        a: Resource<EagerTensor>,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        let op = unary_in(op);
        let a = self.tensor(&a)?;
        let (id, shape, dtype) = (a.id, a.shape, a.dtype);
        self.produce(shape, dtype, |out| Command::Unary { op, a: id, out })
    }

    fn cast(
        &mut self,
        a: Resource<EagerTensor>,
        dtype: types::Dtype,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        let dtype = dtype_in(dtype);
        let a = self.tensor(&a)?;
        let (id, shape) = (a.id, a.shape);
        self.produce(shape, dtype, |out| Command::Cast { a: id, dtype, out })
    }

    fn gemm(
        &mut self,
        a: Resource<EagerTensor>,
        b: Resource<EagerTensor>,
        out_dtype: types::Dtype,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        self.composite_of(CompositeOp::Gemm, (a, b, None), out_dtype)
    }

    fn composite(
        &mut self,
        op: tl::CompositeOp,
        a: Resource<EagerTensor>,
        b: Resource<EagerTensor>,
        c: Option<Resource<EagerTensor>>,
        out_dtype: types::Dtype,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        self.composite_of(composite_in(op), (a, b, c), out_dtype)
    }

    fn reduce(
        &mut self,
        op: tl::ReduceOp,
        a: Resource<EagerTensor>,
        axis: u32,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        let op = reduce_in(op);
        let a = self.tensor(&a)?;
        let (id, dtype) = (a.id, a.dtype);
        let shape = match crate::hw::math_ops::reduced_shape(self.list.shape_at(a.shape), axis) {
            Ok(s) => self.list.shape(&s),
            Err(what) => return Err(self.fail(call::reduce(op, axis), HwError::Mismatch { what })),
        };
        self.produce(shape, dtype, |out| Command::Reduce {
            op,
            a: id,
            axis,
            out,
        })
    }

    fn now_ps(&mut self) -> wasmtime::Result<u64> {
        Err(wasmtime::Error::new(NeedsSimulatedTime {
            what: "tl.now_ps",
        }))
    }

    fn log(&mut self, _msg: String) -> wasmtime::Result<()> {
        Err(wasmtime::Error::new(NeedsSimulatedTime { what: "tl.log" }))
    }

    fn submit(
        &mut self,
        dirs: Vec<String>,
        shapes: Vec<Vec<u32>>,
        calls: Vec<tl::BatchCall>,
    ) -> wasmtime::Result<Result<(), tl::BatchError>> {
        super::fail::to_wit(submit_batch(self, dirs, shapes, calls))
    }

    fn submit_encoded(
        &mut self,
        dirs: Vec<String>,
        shapes: Vec<Vec<u32>>,
        calls: Vec<u8>,
    ) -> wasmtime::Result<Result<(), tl::BatchError>> {
        super::fail::to_wit(submit_encoded_batch(self, dirs, shapes, calls))
    }

    /// A batch asks for a handle only for what a recorded tensor cannot
    /// tell (its address).
    fn batch_tensor(&mut self, _id: u32) -> wasmtime::Result<Resource<EagerTensor>> {
        Err(wasmtime::Error::new(NeedsSimulatedTime {
            what: "tl.batch-tensor",
        }))
    }
}

batch_call_fn!(
    submit_batch,
    submit_encoded_batch,
    EagerHost,
    eager_cases,
    [],
);

#[cfg(test)]
mod tests {
    use super::{read_call, tl};
    use crate::runtime::batch_bytes::BatchReader;
    use kernbench_guest::batch_bytes::{case, Fields};
    use kernbench_guest::{BinOp, CompositeOp, ReduceOp, UnaryOp};
    use tl::BatchCall as C;

    type G = kernbench_guest::Dtype;
    type W = tl::Dtype;

    /// Every call the Rust SDK writes (`kernbench_guest::batch_bytes`,
    /// what `BatchTl` hands to `tl.submit-encoded`) reads back here as
    /// the call it stands for: every case, every case of every enum (the
    /// SDK's enums paired with the WIT's by name), options both ways and
    /// varints of one to ten bytes.
    #[test]
    fn every_call_the_sdk_writes_reads_back_as_itself() {
        let dtypes = [
            (G::F16, W::F16),
            (G::Bf16, W::Bf16),
            (G::F32, W::F32),
            (G::I32, W::I32),
            (G::I8, W::I8),
            (G::U8, W::U8),
            (G::U32, W::U32),
            (G::I64, W::I64),
            (G::U64, W::U64),
            (G::F64, W::F64),
        ];
        assert_eq!(dtypes.len(), G::ALL.len(), "every dtype");
        let binops = [
            (BinOp::Add, tl::Binop::Add),
            (BinOp::Sub, tl::Binop::Sub),
            (BinOp::Mul, tl::Binop::Mul),
            (BinOp::Max, tl::Binop::Max),
            (BinOp::Min, tl::Binop::Min),
            (BinOp::Div, tl::Binop::Div),
        ];
        let unary = [
            (UnaryOp::Neg, tl::UnaryOp::Neg),
            (UnaryOp::Abs, tl::UnaryOp::Abs),
            (UnaryOp::Exp, tl::UnaryOp::Exp),
            (UnaryOp::Log, tl::UnaryOp::Log),
            (UnaryOp::Sqrt, tl::UnaryOp::Sqrt),
            (UnaryOp::Relu, tl::UnaryOp::Relu),
            (UnaryOp::Recip, tl::UnaryOp::Recip),
        ];
        let reduce = [
            (ReduceOp::Sum, tl::ReduceOp::Sum),
            (ReduceOp::Max, tl::ReduceOp::Max),
            (ReduceOp::Min, tl::ReduceOp::Min),
        ];
        let composite = [
            (CompositeOp::Gemm, tl::CompositeOp::Gemm),
            (CompositeOp::GemmAcc, tl::CompositeOp::GemmAcc),
            (CompositeOp::GemmBias, tl::CompositeOp::GemmBias),
            (CompositeOp::GemmRelu, tl::CompositeOp::GemmRelu),
            (CompositeOp::GemmBiasRelu, tl::CompositeOp::GemmBiasRelu),
        ];
        let mut bytes = Vec::new();
        let mut want = Vec::new();
        let mut call = |c: u8, want_call: C, write: &dyn Fn(&mut Fields<'_>)| {
            bytes.push(c);
            write(&mut Fields(&mut bytes));
            want.push(want_call);
        };
        for (g, w) in dtypes {
            call(case::LOAD, C::Load((u64::MAX, 300, w, 7)), &|f| {
                f.u64(u64::MAX).u32(300).dtype(g).u32(7);
            });
            call(case::CAST, C::Cast((1, w, 2)), &|f| {
                f.u32(1).dtype(g).u32(2);
            });
        }
        call(case::STORE, C::Store((1 << 40, 65535)), &|f| {
            f.u64(1 << 40).u32(65535);
        });
        call(case::SEND, C::Send((2, 9)), &|f| {
            f.u32(2).u32(9);
        });
        call(case::SEND_ADDR, C::SendAddr((1, 0x8000, 3, W::I32)), &|f| {
            f.u32(1).u64(0x8000).u32(3).dtype(G::I32);
        });
        for (dir, into) in [(None, Some(u64::MAX)), (Some(3), None)] {
            let recv = tl::BatchRecv {
                dir,
                shape: 0,
                dtype: W::F32,
                into,
                out: 1,
            };
            call(case::RECV, C::Recv(recv), &|f| {
                f.opt_u32(dir).u32(0).dtype(G::F32).opt_u64(into).u32(1);
            });
        }
        for (g, w) in binops {
            call(case::BINARY, C::Binary((w, 1, 2, 3)), &|f| {
                f.binop(g).u32(1).u32(2).u32(3);
            });
        }
        call(case::SCALE, C::Scale((4, -2.5, 5)), &|f| {
            f.u32(4).f64(-2.5).u32(5);
        });
        for (g, w) in unary {
            call(case::UNARY, C::Unary((w, 1, 2)), &|f| {
                f.unary_op(g).u32(1).u32(2);
            });
        }
        for (g, w) in reduce {
            call(case::REDUCE, C::Reduce((w, 1, 1, 2)), &|f| {
                f.reduce_op(g).u32(1).u32(1).u32(2);
            });
        }
        for (i, (g, w)) in composite.into_iter().enumerate() {
            let c = (i % 2 == 0).then_some(3);
            let made = tl::BatchComposite {
                op: w,
                a: 1,
                b: 2,
                c,
                out_dtype: W::Bf16,
                out: 4,
            };
            call(case::COMPOSITE, C::Composite(made), &|f| {
                f.composite_op(g)
                    .u32(1)
                    .u32(2)
                    .opt_u32(c)
                    .dtype(G::Bf16)
                    .u32(4);
            });
        }
        for dir in [Some(1), None] {
            call(case::RECV_ASYNC, C::RecvAsync((dir, 0, W::F16, 4)), &|f| {
                f.opt_u32(dir).u32(0).dtype(G::F16).u32(4);
            });
        }
        call(case::WAIT, C::Wait((4, 5)), &|f| {
            f.u32(4).u32(5);
        });
        call(case::DROP_TENSOR, C::DropTensor(u32::MAX), &|f| {
            f.u32(u32::MAX);
        });
        call(case::DROP_FUTURE, C::DropFuture(0), &|f| {
            f.u32(0);
        });

        let mut r = BatchReader::new(&bytes);
        let mut got = Vec::new();
        while let Some(c) = read_call(&mut r) {
            got.push(c.unwrap());
        }
        assert_eq!(format!("{got:?}"), format!("{want:?}"));
        // A call cut anywhere is refused, not read: the first is a load
        // of 15 bytes (its address a 10-byte varint), the last 2 bytes.
        for end in 1..15 {
            let e = read_call(&mut BatchReader::new(&bytes[..end])).unwrap();
            assert!(e.unwrap_err().to_string().contains("the bytes end inside"));
        }
        let mut r = BatchReader::new(&bytes[..bytes.len() - 1]);
        let last = std::iter::from_fn(|| read_call(&mut r)).last().unwrap();
        assert!(last
            .unwrap_err()
            .to_string()
            .contains("the bytes end inside"));
    }
}
