//! Kernels run ahead of simulated time: the guest runs to completion at
//! once, each `tl` call a plain host call that the kernel's
//! [`Recorder`] checks and makes into a command, kept in a list; the list
//! then drives the machine ([`super::commands::replay`]). The guest's instance is gone before the first
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
use super::commands::Command;
use super::fail::trap;
use super::kernel::{dtype_in, dtype_out, tl_ops_in};
use super::limits::{Guarded, InstanceGuard};
use super::recorder::{CallError, Recorder};
use crate::hw::dtype::BinOp;
use crate::hw::gemm_ops::CompositeOp;
use crate::hw::machine::CommId;
use crate::hw::Machine;
use crate::topology::PeCoord;
use std::sync::Arc;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// Commands one recording may hold; a kernel issuing more runs in step
/// with simulated time instead (where the command queue bounds it).
pub const MAX_RECORDED_COMMANDS: usize = 1 << 20;

/// A kernel asked for something only simulated time can answer.
#[derive(Debug, thiserror::Error)]
#[error("{what} cannot be answered ahead of simulated time")]
pub struct NeedsSimulatedTime {
    pub what: &'static str,
}

/// A recorded kernel's `tl.tensor` handle: its rep is the tensor's id in
/// the [`Recorder`].
pub enum EagerTensor {}

/// A recorded kernel's `tl.recv-future` handle: its rep is the future's
/// id in the [`Recorder`].
pub enum EagerFuture {}

/// Store data of a kernel being recorded.
pub struct EagerHost {
    wasi: WasiCtx,
    table: ResourceTable,
    guard: InstanceGuard,
    /// Its calls made into commands, and the commands kept.
    pub(crate) rec: Recorder,
    /// The ids of its `tl.submit` batches.
    batch: BatchIds,
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
    pub fn new(
        wasi: WasiCtx,
        machine: Arc<Machine>,
        at: (PeCoord, CommId),
        guard: InstanceGuard,
    ) -> Self {
        EagerHost {
            wasi,
            table: ResourceTable::new(),
            rec: Recorder::new(machine, at),
            guard,
            batch: BatchIds::default(),
        }
    }

    /// Keep the command a call made.
    fn record(&mut self, c: Result<Command, CallError>) -> wasmtime::Result<()> {
        let c = c.map_err(trap)?;
        if self.rec.list.len() >= MAX_RECORDED_COMMANDS {
            return Err(wasmtime::Error::new(NeedsSimulatedTime {
                what: "a kernel of more than 2^20 commands",
            }));
        }
        self.rec.list.push(c);
        Ok(())
    }

    /// Keep the command a call made; the handle of the tensor it makes.
    fn made(&mut self, c: Result<Command, CallError>) -> wasmtime::Result<Resource<EagerTensor>> {
        let out = c.as_ref().ok().and_then(Command::out);
        self.record(c)?;
        let out = out.ok_or_else(|| wasmtime::format_err!("the call made no tensor"))?;
        Ok(Resource::new_own(out))
    }

    /// `tl.load`, the shape by reference (see [`super::batch`]).
    fn load_named(
        &mut self,
        addr: u64,
        shape: &[u32],
        dtype: types::Dtype,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        let c = self.rec.load(addr, shape, dtype_in(dtype));
        self.made(c)
    }

    /// `tl.fill`, the shape by reference.
    fn fill_named(
        &mut self,
        shape: &[u32],
        dtype: types::Dtype,
        value: f64,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        let c = self.rec.fill(shape, dtype_in(dtype), value);
        self.made(c)
    }

    /// `tl.send`, the direction by reference.
    fn send_named(&mut self, dir: &str, value: Resource<EagerTensor>) -> wasmtime::Result<()> {
        let c = self.rec.send(dir, value.rep());
        self.record(c)
    }

    /// `tl.recv` (`dst` none) and `tl.recv-into`, by reference.
    fn recv_named(
        &mut self,
        dir: Option<&str>,
        shape: &[u32],
        dtype: types::Dtype,
        dst: Option<u64>,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        let c = self.rec.recv(dir, shape, dtype_in(dtype), dst);
        self.made(c)
    }
}

tl_ops_in!(tl);

impl types::Host for EagerHost {}
impl crate::runtime::bindings::algorithm::kernbench::sim::ccl::Host for EagerHost {}

impl tl::HostTensor for EagerHost {
    fn shape(&mut self, r: Resource<EagerTensor>) -> wasmtime::Result<Vec<u32>> {
        Ok(self.rec.shape_of(r.rep()).map_err(trap)?.to_vec())
    }
    fn dtype(&mut self, r: Resource<EagerTensor>) -> wasmtime::Result<types::Dtype> {
        Ok(dtype_out(self.rec.dtype_of(r.rep()).map_err(trap)?))
    }
    fn addr(&mut self, _: Resource<EagerTensor>) -> wasmtime::Result<u64> {
        Err(wasmtime::Error::new(NeedsSimulatedTime {
            what: "tensor.addr",
        }))
    }
    fn nbytes(&mut self, r: Resource<EagerTensor>) -> wasmtime::Result<u64> {
        self.rec.nbytes_of(r.rep()).map_err(trap)
    }
    fn drop(&mut self, r: Resource<EagerTensor>) -> wasmtime::Result<()> {
        let c = self.rec.drop_tensor(r.rep());
        self.record(c)
    }
}

impl tl::HostRecvFuture for EagerHost {
    fn shape(&mut self, r: Resource<EagerFuture>) -> wasmtime::Result<Vec<u32>> {
        Ok(self.rec.future_shape(r.rep()).map_err(trap)?.0.to_vec())
    }
    fn dtype(&mut self, r: Resource<EagerFuture>) -> wasmtime::Result<types::Dtype> {
        Ok(dtype_out(self.rec.future_shape(r.rep()).map_err(trap)?.1))
    }
    fn drop(&mut self, r: Resource<EagerFuture>) -> wasmtime::Result<()> {
        self.rec.drop_future(r.rep()).map_err(trap)
    }
}

impl tl::Host for EagerHost {
    fn recv_async(
        &mut self,
        dir: Option<String>,
        shape: Vec<u32>,
        dtype: types::Dtype,
    ) -> wasmtime::Result<Resource<EagerFuture>> {
        let c = self.rec.recv_async(dir.as_deref(), &shape, dtype_in(dtype));
        let fut = c.as_ref().ok().and_then(Command::future);
        self.record(c)?;
        let fut = fut.ok_or_else(|| wasmtime::format_err!("recv_async made no future"))?;
        Ok(Resource::new_own(fut))
    }

    fn wait(&mut self, f: Resource<EagerFuture>) -> wasmtime::Result<Resource<EagerTensor>> {
        let c = self.rec.wait(f.rep());
        self.made(c)
    }

    fn program_id(&mut self, axis: u32) -> wasmtime::Result<i64> {
        self.rec.program_axis(axis, false).map_err(trap)
    }

    fn num_programs(&mut self, axis: u32) -> wasmtime::Result<i64> {
        self.rec.program_axis(axis, true).map_err(trap)
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
        let c = self.rec.store(addr, value.rep());
        self.record(c)
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
        let c = self.rec.send_addr(&dir, src_addr, &shape, dtype_in(dtype));
        self.record(c)
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
        let c = self.rec.binary(BinOp::Add, a.rep(), b.rep());
        self.made(c)
    }

    fn binary(
        &mut self,
        op: tl::Binop,
        a: Resource<EagerTensor>,
        b: Resource<EagerTensor>,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        let c = self.rec.binary(binop_in(op), a.rep(), b.rep());
        self.made(c)
    }

    fn scale(
        &mut self,
        a: Resource<EagerTensor>,
        factor: f64,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        let c = self.rec.scale(a.rep(), factor);
        self.made(c)
    }

    fn unary(
        &mut self,
        op: tl::UnaryOp,
        a: Resource<EagerTensor>,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        let c = self.rec.unary(unary_in(op), a.rep());
        self.made(c)
    }

    fn cast(
        &mut self,
        a: Resource<EagerTensor>,
        dtype: types::Dtype,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        let c = self.rec.cast(a.rep(), dtype_in(dtype));
        self.made(c)
    }

    fn fill(
        &mut self,
        shape: Vec<u32>,
        dtype: types::Dtype,
        value: f64,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        self.fill_named(&shape, dtype, value)
    }

    fn gemm(
        &mut self,
        a: Resource<EagerTensor>,
        b: Resource<EagerTensor>,
        out_dtype: types::Dtype,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        let operands = (a.rep(), b.rep(), None);
        let c = self
            .rec
            .composite(CompositeOp::Gemm, operands, dtype_in(out_dtype));
        self.made(c)
    }

    fn composite(
        &mut self,
        op: tl::CompositeOp,
        a: Resource<EagerTensor>,
        b: Resource<EagerTensor>,
        c: Option<Resource<EagerTensor>>,
        out_dtype: types::Dtype,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        let operands = (a.rep(), b.rep(), c.map(|c| c.rep()));
        let c = self
            .rec
            .composite(composite_in(op), operands, dtype_in(out_dtype));
        self.made(c)
    }

    fn reduce(
        &mut self,
        op: tl::ReduceOp,
        a: Resource<EagerTensor>,
        axis: u32,
    ) -> wasmtime::Result<Resource<EagerTensor>> {
        let c = self.rec.reduce(reduce_in(op), a.rep(), axis);
        self.made(c)
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
    use super::{read_call, tl, Call};
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
        let mut made = |c: u8, want_call: Call, write: &dyn Fn(&mut Fields<'_>)| {
            bytes.push(c);
            write(&mut Fields(&mut bytes));
            want.push(want_call);
        };
        let mut call = |c: u8, want_call: C, write: &dyn Fn(&mut Fields<'_>)| {
            made(c, Call::Typed(want_call), write)
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
        // A call only the bytes carry (WIT 0.8.1).
        made(case::FILL, Call::Fill((2, W::U64, -1.5, 6)), &|f| {
            f.u32(2).dtype(G::U64).f64(-1.5).u32(6);
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
