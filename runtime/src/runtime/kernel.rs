//! The kernel side: `tl.*` host functions for one PE kernel instance run
//! in step with simulated time, and the launch of a kernel (one Store per
//! instance, dropped when it ends; recorded first when it can be,
//! [`super::eager`]).
//!
//! In step, each call is made into a command by the kernel's
//! [`Recorder`] (as a recorded kernel's is) and run at once by
//! [`super::commands::execute`] (as a recorded kernel's are replayed): these
//! host functions only translate the WIT's types.

use super::batch::{batch_call_fn, BatchIds};
use super::bindings::algorithm::kernbench::sim::{tl, types};
use super::bindings::algorithm::AlgorithmPre;
use super::bindings::algorithm_eager::AlgorithmPre as EagerPre;
use super::commands::{execute, replay, Command, CommandList, Exec, Frame, TensorId};
use super::eager::{EagerHost, NeedsSimulatedTime};
use super::fail::trap;
use super::recorder::{CallError, Recorder};

use super::console::FlushOnDrop;
use super::limits::{guard_store, Guarded, InstanceGuard, RunLimits};
use super::recording_memo::{Commands, Kept, Source};
use super::wasi::{sandbox, CapturePipe, Output};
use super::{describe_guest_error, describe_wasm_error};
use crate::error::SimError;
use crate::hw::dtype::{BinOp, Dtype};
use crate::hw::gemm_ops::CompositeOp;
use crate::hw::machine::CommId;
use crate::hw::trace::Track;
use crate::hw::Machine;
use crate::topology::PeCoord;
use std::sync::Arc;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime::Store;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// An in-step kernel's `tl.tensor` handle: its rep is the tensor's id in
/// the [`Recorder`] and in the kernel's [`Frame`].
pub enum KernelTensor {}

/// An in-step kernel's `tl.recv-future` handle: its rep is the future's
/// id in the [`Recorder`] and in the kernel's [`Frame`].
pub enum KernelFuture {}

/// Store data of one PE kernel instance.
pub struct KernelHost {
    wasi: WasiCtx,
    table: ResourceTable,
    guard: InstanceGuard,
    /// Where `tl.log` lines go (the instance's captured stderr).
    log: CapturePipe,
    /// Its calls made into commands.
    rec: Recorder,
    /// What its commands made.
    frame: Frame,
    /// The ids of its `tl.submit` batches.
    batch: BatchIds,
}

impl Guarded for KernelHost {
    fn guard(&mut self) -> &mut InstanceGuard {
        &mut self.guard
    }
}

impl WasiView for KernelHost {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The WIT's dtype as the host's: both list the cases in the WIT's order
/// (`batch_bytes::DTYPES`, [`Dtype::ALL`]).
pub(crate) fn dtype_in(d: types::Dtype) -> Dtype {
    Dtype::ALL[d as usize]
}

/// The host's dtype as the WIT's (see [`dtype_in`]).
pub(crate) fn dtype_out(d: Dtype) -> types::Dtype {
    super::batch_bytes::DTYPES[d as usize]
}

impl KernelHost {
    /// Execute the command a call made, now, in simulated time.
    async fn run(&mut self, c: Result<Command, CallError>) -> wasmtime::Result<()> {
        let c = c.map_err(trap)?;
        let mut at = Exec {
            machine: self.rec.machine(),
            pe: self.rec.pe(),
            comm: self.rec.comm(),
            names: self.rec.list.names(),
            frame: &mut self.frame,
        };
        let done = execute(&mut at, std::iter::once(c)).await;
        done.map_err(|e| {
            // The tensor it was to make was not made.
            self.rec.undo(&c);
            wasmtime::Error::new(e)
        })
    }

    /// Execute a command that never waits (a drop, a `recv_async`) from a
    /// host call that cannot.
    fn run_at_once(&mut self, c: Result<Command, CallError>) -> wasmtime::Result<()> {
        use std::future::Future;
        use std::task::{Context, Poll, Waker};
        let run = std::pin::pin!(self.run(c));
        match run.poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(done) => done,
            Poll::Pending => Err(wasmtime::format_err!("a command that waits, run at once")),
        }
    }

    /// Execute the command a call made; the handle of the tensor it makes.
    async fn made(
        &mut self,
        c: Result<Command, CallError>,
    ) -> wasmtime::Result<Resource<KernelTensor>> {
        let out = c.as_ref().ok().and_then(Command::out);
        self.run(c).await?;
        let out = out.ok_or_else(|| wasmtime::format_err!("the call made no tensor"))?;
        Ok(Resource::new_own(out))
    }

    /// `tl.load`, the shape by reference (see [`super::batch`]).
    async fn load_named(
        &mut self,
        addr: u64,
        shape: &[u32],
        dtype: types::Dtype,
    ) -> wasmtime::Result<Resource<KernelTensor>> {
        let c = self.rec.load(addr, shape, dtype_in(dtype));
        self.made(c).await
    }

    /// `tl.fill`, the shape by reference.
    async fn fill_named(
        &mut self,
        shape: &[u32],
        dtype: types::Dtype,
        value: f64,
    ) -> wasmtime::Result<Resource<KernelTensor>> {
        let c = self.rec.fill(shape, dtype_in(dtype), value);
        self.made(c).await
    }

    /// `tl.send`, the direction by reference.
    async fn send_named(
        &mut self,
        dir: &str,
        value: Resource<KernelTensor>,
    ) -> wasmtime::Result<()> {
        let c = self.rec.send(dir, value.rep());
        self.run(c).await
    }

    /// `tl.recv` (`dst` none) and `tl.recv-into`, by reference.
    async fn recv_named(
        &mut self,
        dir: Option<&str>,
        shape: &[u32],
        dtype: types::Dtype,
        dst: Option<u64>,
    ) -> wasmtime::Result<Resource<KernelTensor>> {
        let c = self.rec.recv(dir, shape, dtype_in(dtype), dst);
        self.made(c).await
    }
}

impl types::Host for KernelHost {}
impl super::bindings::algorithm::kernbench::sim::ccl::Host for KernelHost {}

/// `binop_in`, `unary_in`, `composite_in` and `reduce_in`: the WIT enums of `tl` as the
/// machine's, for a bindings module (the in-step and the recorded kernels
/// each have their own `tl` types).
macro_rules! tl_ops_in {
    ($($tl:ident)::+) => {
        fn binop_in(op: $($tl)::+::Binop) -> crate::hw::dtype::BinOp {
            use crate::hw::dtype::BinOp;
            use $($tl)::+::Binop as B;
            match op {
                B::Add => BinOp::Add,
                B::Sub => BinOp::Sub,
                B::Mul => BinOp::Mul,
                B::Max => BinOp::Max,
                B::Min => BinOp::Min,
                B::Div => BinOp::Div,
            }
        }

        fn unary_in(op: $($tl)::+::UnaryOp) -> crate::hw::math_ops::UnaryOp {
            use crate::hw::math_ops::UnaryOp as U;
            use $($tl)::+::UnaryOp as W;
            match op {
                W::Neg => U::Neg,
                W::Abs => U::Abs,
                W::Exp => U::Exp,
                W::Log => U::Log,
                W::Sqrt => U::Sqrt,
                W::Relu => U::Relu,
                W::Recip => U::Recip,
            }
        }

        fn composite_in(op: $($tl)::+::CompositeOp) -> crate::hw::gemm_ops::CompositeOp {
            use crate::hw::gemm_ops::CompositeOp as C;
            use $($tl)::+::CompositeOp as W;
            match op {
                W::Gemm => C::Gemm,
                W::GemmAcc => C::GemmAcc,
                W::GemmBias => C::GemmBias,
                W::GemmRelu => C::GemmRelu,
                W::GemmBiasRelu => C::GemmBiasRelu,
            }
        }

        fn reduce_in(op: $($tl)::+::ReduceOp) -> crate::hw::math_ops::ReduceOp {
            use crate::hw::math_ops::ReduceOp as R;
            use $($tl)::+::ReduceOp as W;
            match op {
                W::Sum => R::Sum,
                W::Max => R::Max,
                W::Min => R::Min,
            }
        }
    };
}
pub(crate) use tl_ops_in;

tl_ops_in!(tl);

impl tl::HostTensor for KernelHost {
    fn shape(&mut self, r: Resource<KernelTensor>) -> wasmtime::Result<Vec<u32>> {
        Ok(self.rec.shape_of(r.rep()).map_err(trap)?.to_vec())
    }
    fn dtype(&mut self, r: Resource<KernelTensor>) -> wasmtime::Result<types::Dtype> {
        Ok(dtype_out(self.rec.dtype_of(r.rep()).map_err(trap)?))
    }
    fn addr(&mut self, r: Resource<KernelTensor>) -> wasmtime::Result<u64> {
        self.rec.live(r.rep()).map_err(trap)?;
        Ok(self.frame.tensor(r.rep()).addr())
    }
    fn nbytes(&mut self, r: Resource<KernelTensor>) -> wasmtime::Result<u64> {
        self.rec.nbytes_of(r.rep()).map_err(trap)
    }
    fn drop(&mut self, r: Resource<KernelTensor>) -> wasmtime::Result<()> {
        let c = self.rec.drop_tensor(r.rep());
        self.run_at_once(c)
    }
}

impl tl::HostRecvFuture for KernelHost {
    fn shape(&mut self, r: Resource<KernelFuture>) -> wasmtime::Result<Vec<u32>> {
        Ok(self.rec.future_shape(r.rep()).map_err(trap)?.0.to_vec())
    }
    fn dtype(&mut self, r: Resource<KernelFuture>) -> wasmtime::Result<types::Dtype> {
        Ok(dtype_out(self.rec.future_shape(r.rep()).map_err(trap)?.1))
    }
    fn drop(&mut self, r: Resource<KernelFuture>) -> wasmtime::Result<()> {
        // Not waited for: it stays unwaited, and the kernel fails at its end.
        self.rec.drop_future(r.rep()).map_err(trap)
    }
}

impl tl::Host for KernelHost {
    fn recv_async(
        &mut self,
        dir: Option<String>,
        shape: Vec<u32>,
        dtype: types::Dtype,
    ) -> wasmtime::Result<Resource<KernelFuture>> {
        let c = self.rec.recv_async(dir.as_deref(), &shape, dtype_in(dtype));
        let fut = c.as_ref().ok().and_then(Command::future);
        self.run_at_once(c)?;
        let fut = fut.ok_or_else(|| wasmtime::format_err!("recv_async made no future"))?;
        Ok(Resource::new_own(fut))
    }

    async fn wait(
        &mut self,
        f: Resource<KernelFuture>,
    ) -> wasmtime::Result<Resource<KernelTensor>> {
        let c = self.rec.wait(f.rep());
        self.made(c).await
    }

    fn program_id(&mut self, axis: u32) -> wasmtime::Result<i64> {
        self.rec.program_axis(axis, false).map_err(trap)
    }

    fn num_programs(&mut self, axis: u32) -> wasmtime::Result<i64> {
        self.rec.program_axis(axis, true).map_err(trap)
    }

    async fn load(
        &mut self,
        addr: u64,
        shape: Vec<u32>,
        dtype: types::Dtype,
    ) -> wasmtime::Result<Resource<KernelTensor>> {
        self.load_named(addr, &shape, dtype).await
    }

    async fn store(&mut self, addr: u64, value: Resource<KernelTensor>) -> wasmtime::Result<()> {
        let c = self.rec.store(addr, value.rep());
        self.run(c).await
    }

    async fn send(&mut self, dir: String, value: Resource<KernelTensor>) -> wasmtime::Result<()> {
        self.send_named(&dir, value).await
    }

    async fn send_addr(
        &mut self,
        dir: String,
        src_addr: u64,
        shape: Vec<u32>,
        dtype: types::Dtype,
    ) -> wasmtime::Result<()> {
        let c = self.rec.send_addr(&dir, src_addr, &shape, dtype_in(dtype));
        self.run(c).await
    }

    async fn recv(
        &mut self,
        dir: Option<String>,
        shape: Vec<u32>,
        dtype: types::Dtype,
    ) -> wasmtime::Result<Resource<KernelTensor>> {
        self.recv_named(dir.as_deref(), &shape, dtype, None).await
    }

    async fn recv_into(
        &mut self,
        dir: Option<String>,
        shape: Vec<u32>,
        dtype: types::Dtype,
        dst_addr: u64,
    ) -> wasmtime::Result<Resource<KernelTensor>> {
        self.recv_named(dir.as_deref(), &shape, dtype, Some(dst_addr))
            .await
    }

    async fn add(
        &mut self,
        a: Resource<KernelTensor>,
        b: Resource<KernelTensor>,
    ) -> wasmtime::Result<Resource<KernelTensor>> {
        let c = self.rec.binary(BinOp::Add, a.rep(), b.rep());
        self.made(c).await
    }

    async fn binary(
        &mut self,
        op: tl::Binop,
        a: Resource<KernelTensor>,
        b: Resource<KernelTensor>,
    ) -> wasmtime::Result<Resource<KernelTensor>> {
        let c = self.rec.binary(binop_in(op), a.rep(), b.rep());
        self.made(c).await
    }

    async fn scale(
        &mut self,
        a: Resource<KernelTensor>,
        factor: f64,
    ) -> wasmtime::Result<Resource<KernelTensor>> {
        let c = self.rec.scale(a.rep(), factor);
        self.made(c).await
    }

    async fn unary(
        &mut self,
        op: tl::UnaryOp,
        a: Resource<KernelTensor>,
    ) -> wasmtime::Result<Resource<KernelTensor>> {
        let c = self.rec.unary(unary_in(op), a.rep());
        self.made(c).await
    }

    async fn cast(
        &mut self,
        a: Resource<KernelTensor>,
        dtype: types::Dtype,
    ) -> wasmtime::Result<Resource<KernelTensor>> {
        let c = self.rec.cast(a.rep(), dtype_in(dtype));
        self.made(c).await
    }

    async fn fill(
        &mut self,
        shape: Vec<u32>,
        dtype: types::Dtype,
        value: f64,
    ) -> wasmtime::Result<Resource<KernelTensor>> {
        self.fill_named(&shape, dtype, value).await
    }

    async fn gemm(
        &mut self,
        a: Resource<KernelTensor>,
        b: Resource<KernelTensor>,
        out_dtype: types::Dtype,
    ) -> wasmtime::Result<Resource<KernelTensor>> {
        let operands = (a.rep(), b.rep(), None);
        let c = self
            .rec
            .composite(CompositeOp::Gemm, operands, dtype_in(out_dtype));
        self.made(c).await
    }

    async fn composite(
        &mut self,
        op: tl::CompositeOp,
        a: Resource<KernelTensor>,
        b: Resource<KernelTensor>,
        c: Option<Resource<KernelTensor>>,
        out_dtype: types::Dtype,
    ) -> wasmtime::Result<Resource<KernelTensor>> {
        let operands = (a.rep(), b.rep(), c.map(|c| c.rep()));
        let c = self
            .rec
            .composite(composite_in(op), operands, dtype_in(out_dtype));
        self.made(c).await
    }

    async fn reduce(
        &mut self,
        op: tl::ReduceOp,
        a: Resource<KernelTensor>,
        axis: u32,
    ) -> wasmtime::Result<Resource<KernelTensor>> {
        let c = self.rec.reduce(reduce_in(op), a.rep(), axis);
        self.made(c).await
    }

    fn now_ps(&mut self) -> wasmtime::Result<u64> {
        Ok(crate::engine::now())
    }

    fn log(&mut self, msg: String) -> wasmtime::Result<()> {
        tracing::info!(target: "kernbench::kernel", "[{} t={}ps] {msg}", self.rec.pe(), crate::engine::now());
        // Captured like stderr: bounded, and printed with the PE's name.
        let line = format!(
            "[t={:.3}us] {msg}\n",
            crate::units::ps_to_us(crate::engine::now())
        );
        self.log.write(line.as_bytes());
        Ok(())
    }

    async fn submit(
        &mut self,
        dirs: Vec<String>,
        shapes: Vec<Vec<u32>>,
        calls: Vec<tl::BatchCall>,
    ) -> wasmtime::Result<Result<(), tl::BatchError>> {
        super::fail::to_wit(submit_batch(self, dirs, shapes, calls).await)
    }

    async fn submit_encoded(
        &mut self,
        dirs: Vec<String>,
        shapes: Vec<Vec<u32>>,
        calls: Vec<u8>,
    ) -> wasmtime::Result<Result<(), tl::BatchError>> {
        super::fail::to_wit(submit_encoded_batch(self, dirs, shapes, calls).await)
    }

    /// A second handle to the tensor batch id `id` names.
    fn batch_tensor(&mut self, id: u32) -> wasmtime::Result<Resource<KernelTensor>> {
        let of: TensorId = self.batch.tensors.get(id)?;
        let alias = self.rec.alias(of).map_err(trap)?;
        let t = self.frame.tensor(of).clone();
        self.frame.put(alias, t);
        Ok(Resource::new_own(alias))
    }
}

batch_call_fn!(submit_batch, submit_encoded_batch, KernelHost, live_cases, [.await], async);

/// One kernel launch on one PE.
#[derive(Debug, Clone)]
pub struct KernelLaunch {
    pub pe: PeCoord,
    /// The communicator whose IPCQ its sends and receives use (its
    /// process group's; [`CommId::WORLD`] for `torch.launch`).
    pub comm: CommId,
    pub t_ptr: u64,
    pub args: Vec<i64>,
}

/// A loaded algorithm component, ready to instantiate.
#[derive(Clone)]
pub struct AlgorithmComponent {
    pub name: String,
    /// The earlier snapshot of the interface it was built against, served
    /// by adapters ([`super::shapes`]); none for today's.
    pub snapshot: Option<&'static str>,
    /// Instances that run in step with simulated time.
    pub pre: AlgorithmPre<KernelHost>,
    /// Instances recorded ahead of simulated time ([`super::eager`]);
    /// `None` when every kernel runs in step.
    pub eager: Option<EagerPre<EagerHost>>,
}

/// What recording a kernel ahead of simulated time gave.
pub enum RecordOutcome {
    /// Its calls, and how the guest ended.
    Made(Recorded),
    /// It asked for something only simulated time can answer (or
    /// recording is off): it runs in step. `keepable`: the verdict
    /// depends only on what a [`super::recording_memo::LaunchKey`] holds.
    InStep { keepable: bool },
}

/// A kernel recorded ahead of simulated time.
pub struct Recorded {
    list: CommandList,
    out: Output,
    /// How the guest failed after the recorded calls, if it did.
    pub(super) guest_error: Option<wasmtime::Error>,
    /// A call addressed another SIP's virtual memory.
    addresses_other_sips: bool,
}

impl AlgorithmComponent {
    pub(super) fn store(
        &self,
        machine: &Arc<Machine>,
        limits: &RunLimits,
        (pe, comm): (PeCoord, CommId),
        seed: u64,
    ) -> wasmtime::Result<(Store<KernelHost>, Output)> {
        let who = pe.to_string();
        let sb = sandbox(seed, &who, (&limits.budget, &limits.console));
        let host = KernelHost {
            wasi: sb.ctx,
            table: ResourceTable::new(),
            guard: limits.guard(&who),
            log: sb.output.stderr.clone(),
            rec: Recorder::new(machine.clone(), (pe, comm)),
            frame: Frame::default(),
            batch: BatchIds::default(),
        };
        let mut store = Store::new(self.pre.engine(), host);
        guard_store(&mut store)?;
        Ok((store, sb.output))
    }

    pub(super) fn failed(
        &self,
        algorithm: &str,
        pe: PeCoord,
        e: &wasmtime::Error,
        out: Option<&Output>,
    ) -> SimError {
        SimError::KernelFailed {
            algorithm: algorithm.to_string(),
            component: self.name.clone(),
            pe: pe.to_string(),
            message: match out {
                Some(out) => describe_guest_error(e, out),
                None => describe_wasm_error(e),
            },
        }
    }

    /// Run the kernel on `launch.pe` to completion, then wait until every
    /// command it issued has completed. The kernel's calls come from
    /// `source` ([`super::recording_memo`]): a kept recording of an equal
    /// launch, or a new recording ([`super::eager`]) — by the helper
    /// thread when the source holds its ticket ([`super::prerecord`]) —
    /// whose calls are then replayed; one that needs simulated time to
    /// run runs again, in step with it.
    pub async fn run_kernel(
        &self,
        algorithm: &str,
        machine: Arc<Machine>,
        limits: &RunLimits,
        launch: KernelLaunch,
        source: Source,
    ) -> Result<(), SimError> {
        let pe = launch.pe;
        let actor = (pe, launch.comm);
        let started = crate::engine::now();
        machine.note_kernel_start(actor);
        let fail = |e: &wasmtime::Error, out: Option<&Output>| self.failed(algorithm, pe, e, out);
        // (commands, the guest's output and error after them), or `None`:
        // in step.
        let plan = match source {
            Source::Kept(Kept::Commands(commands)) => Some((commands, None, None)),
            Source::Kept(Kept::InStep) => None,
            Source::Record { ticket, memo } => {
                let recorded = match ticket {
                    Some(ticket) => ticket.take(&limits.budget, pe),
                    None => self.record(algorithm, &machine, limits, &launch),
                }?;
                let (plan, keep) = match recorded {
                    RecordOutcome::InStep { keepable } => (None, keepable.then_some(Kept::InStep)),
                    RecordOutcome::Made(rec) => {
                        let commands = Commands::charge(rec.list, &limits.budget, pe)
                            .map_err(|e| fail(&wasmtime::Error::new(e), None))?;
                        let clean = rec.guest_error.is_none()
                            && !rec.addresses_other_sips
                            && rec.out.is_empty();
                        let keep = clean.then(|| Kept::Commands(commands.clone()));
                        (Some((commands, Some(rec.out), rec.guest_error)), keep)
                    }
                };
                if let (Some((memo, key)), Some(kept)) = (memo, keep) {
                    memo.keep_if_current(key, kept, machine.layout_version(pe.sip));
                }
                plan
            }
        };
        match plan {
            Some((commands, out, guest_error)) => {
                let _flush = out.clone().map(|out| FlushOnDrop::new(pe.to_string(), out));
                let replayed = replay(&machine, (pe, launch.comm), commands.list()).await;
                drop(commands);
                if let Err(e) = replayed {
                    return Err(fail(&wasmtime::Error::new(e), None));
                }
                if let Some(e) = guest_error {
                    return Err(fail(&e, out.as_ref()));
                }
            }
            None if machine.partitions() > 1 => {
                let why = format!("the kernel on {pe} runs in step with simulated time");
                machine.give_up_split(why.clone());
                return Err(SimError::Usage(why));
            }
            None => {
                self.run_in_step(algorithm, &machine, limits, &launch)
                    .await?
            }
        }
        for done in machine.take_outstanding(actor) {
            done.wait().await;
        }
        machine.note_kernel_end(actor);
        if let Some(tr) = &machine.trace {
            tr.record(
                Track::Kernel(pe, launch.comm),
                format!("kernel {algorithm}"),
                started,
                crate::engine::now(),
            );
        }
        Ok(())
    }

    fn seed(pe: PeCoord) -> u64 {
        ((pe.sip as u64) << 32) | ((pe.cube as u64) << 16) | pe.pe as u64
    }

    /// Run the guest to completion at once, recording its `tl` calls;
    /// [`RecordOutcome::InStep`] when it asked for something only
    /// simulated time can answer (or recording is off).
    pub(super) fn record(
        &self,
        algorithm: &str,
        machine: &Arc<Machine>,
        limits: &RunLimits,
        launch: &KernelLaunch,
    ) -> Result<RecordOutcome, SimError> {
        let Some(eager) = &self.eager else {
            return Ok(RecordOutcome::InStep { keepable: true });
        };
        let pe = launch.pe;
        let who = pe.to_string();
        let sb = sandbox(Self::seed(pe), &who, (&limits.budget, &limits.console));
        let host = EagerHost::new(
            sb.ctx,
            machine.clone(),
            (pe, launch.comm),
            limits.guard(&who),
        );
        let mut store = Store::new(eager.engine(), host);
        guard_store(&mut store).map_err(|e| self.failed(algorithm, pe, &e, None))?;
        let result = eager
            .instantiate(&mut store)
            .and_then(|inst| inst.call_kernel(&mut store, launch.t_ptr, &launch.args));
        if let Err(e) = &result {
            if e.downcast_ref::<NeedsSimulatedTime>().is_some() {
                let keepable = !store.data().rec.addresses_other_sips.get();
                return Ok(RecordOutcome::InStep { keepable });
            }
        }
        // A future never waited for fails the kernel after its calls ran.
        let unwaited = match store.data().rec.unwaited.error(&pe.to_string()) {
            Some(e) => Err(wasmtime::Error::new(e)),
            None => Ok(()),
        };
        let mut list = std::mem::take(&mut store.data_mut().rec.list);
        list.shrink_to_fit();
        Ok(RecordOutcome::Made(Recorded {
            list,
            addresses_other_sips: store.data().rec.addresses_other_sips.get(),
            out: sb.output,
            guest_error: result.and(unwaited).err(),
        }))
    }

    /// Run the kernel in step with simulated time: instantiate, call
    /// `kernel`, each `tl` call waiting in simulated time as it goes.
    async fn run_in_step(
        &self,
        algorithm: &str,
        machine: &Arc<Machine>,
        limits: &RunLimits,
        launch: &KernelLaunch,
    ) -> Result<(), SimError> {
        let pe = launch.pe;
        let (mut store, out) = self
            .store(machine, limits, (pe, launch.comm), Self::seed(pe))
            .map_err(|e| self.failed(algorithm, pe, &e, None))?;
        let _flush = FlushOnDrop::new(pe.to_string(), out.clone());
        let result = async {
            let inst = self.pre.instantiate_async(&mut store).await?;
            inst.call_kernel(&mut store, launch.t_ptr, &launch.args)
                .await
        }
        .await;
        if let Err(e) = result {
            return Err(self.failed(algorithm, pe, &e, Some(&out)));
        }
        match store.data().rec.unwaited.error(&pe.to_string()) {
            Some(e) => Err(self.failed(algorithm, pe, &wasmtime::Error::new(e), None)),
            None => Ok(()),
        }
    }
}
