//! Where a kernel's `tl` call becomes a [`Command`], and only here.
//!
//! A kernel runs one of two ways (kernbench-host's `runtime::kernel`): recorded ahead of
//! simulated time (kernbench-host's `runtime::eager`: the commands are kept and replayed
//! later) or in step with it (each command is executed at once). Both
//! hold a [`Recorder`], and every `tl` call and every call of a
//! `tl.submit` batch goes through one of its methods: it checks what can
//! be checked without simulated time (a bad address, an unknown
//! direction, mismatched operands, a message larger than a slot), works
//! out the shape and dtype of the tensor the call makes, hands out the
//! tensor's id and gives back the command. The command is then executed,
//! now or later, by [`super::commands::execute`]: one definition of each op,
//! one interpreter.
//!
//! A tensor or future handle of either kind of kernel is its id here (the
//! rep of the guest's handle): what the kernel may ask of it without
//! simulated time — its shape, dtype and size — is answered from here.

use super::commands::{call, Command, CommandList, TensorId};
use super::futures::Unwaited;
use super::slots::Slots;
use crate::error::{HwError, TlCallError};
use crate::hw::dtype::{BinOp, Dtype};
use crate::hw::gemm_ops::CompositeOp;
use crate::hw::machine::{check_same_operands, CommId};
use crate::hw::math_ops::{ReduceOp, UnaryOp};
use crate::hw::{Machine, TensorRef};
use crate::topology::PeCoord;
use std::sync::Arc;

/// Accepted sends / receive directions a [`Recorder`] remembers (a kernel
/// uses a few; past this many, the rest are checked every time).
const MAX_ACCEPTED: usize = 16;

/// Distinct shapes and directions one kernel may name (a kernel uses a
/// handful; each is kept while the kernel runs).
pub const MAX_NAMES: usize = 1 << 20;

/// Why a call made no command.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The call's own refusal: it traps the kernel, naming the call
    /// (boxed: a call's result stays two words wide).
    #[error(transparent)]
    Refused(Box<TlCallError>),
    /// A handle the recorder did not hand out, or one already dropped
    /// (wasmtime hands the host only live handles: a host bug, refused
    /// anyway).
    #[error("{kind} handle {id} is not live")]
    NotLive { kind: &'static str, id: u32 },
    /// More distinct shapes or directions than [`MAX_NAMES`].
    #[error("the kernel names more than {MAX_NAMES} distinct shapes and directions")]
    TooManyNames,
    /// A tensor too large to count in bytes (a cast to a wider dtype).
    #[error(transparent)]
    Size(#[from] crate::units::SizeOverflow),
}

/// What a kernel may ask of a tensor handle without simulated time.
#[derive(Debug, Clone, Copy)]
struct TensorMeta {
    /// Its shape's index in the list's shapes: a tensor made from another
    /// shares its shape without a copy, and equal shapes have one index.
    shape: u32,
    dtype: Dtype,
}

/// A `recv_async` future not yet waited for.
#[derive(Debug, Clone, Copy)]
struct FutureMeta {
    shape: u32,
    dtype: Dtype,
    /// Its id in [`Recorder::unwaited`].
    unwaited: u64,
}

/// The handles of one kernel instance and the checks its calls get; see
/// the module's doc.
pub struct Recorder {
    machine: Arc<Machine>,
    pe: PeCoord,
    /// The communicator whose IPCQ directions its calls name.
    comm: CommId,
    /// The shapes and directions named so far; a recording kernel's
    /// commands too.
    pub list: CommandList,
    tensors: Slots<TensorMeta>,
    futures: Slots<FutureMeta>,
    /// `recv_async` futures not waited for.
    pub unwaited: Unwaited,
    /// Sends (direction id, bytes) and receive directions the machine
    /// has accepted: they depend on the installed IPCQ only, which a
    /// kernel cannot change, so each is asked once per kernel.
    accepted_sends: Vec<(u32, u64)>,
    accepted_recvs: Vec<Option<u32>>,
    /// A call addressed another SIP's virtual memory (a recording that
    /// did depends on that SIP's address map; see
    /// kernbench-host's `runtime::recording_memo`).
    pub addresses_other_sips: std::cell::Cell<bool>,
}

impl Recorder {
    pub fn new(machine: Arc<Machine>, (pe, comm): (PeCoord, CommId)) -> Self {
        Recorder {
            machine,
            pe,
            comm,
            list: CommandList::default(),
            tensors: Slots::default(),
            futures: Slots::default(),
            unwaited: Unwaited::default(),
            accepted_sends: Vec::new(),
            accepted_recvs: Vec::new(),
            addresses_other_sips: Default::default(),
        }
    }

    /// The machine the kernel runs on.
    pub fn machine(&self) -> &Arc<Machine> {
        &self.machine
    }

    /// The PE the kernel runs on.
    pub fn pe(&self) -> PeCoord {
        self.pe
    }

    /// The communicator whose IPCQ its sends and receives use.
    pub fn comm(&self) -> CommId {
        self.comm
    }

    /// `call`'s refusal on this PE.
    pub fn fail(&self, call: String, source: HwError) -> CallError {
        CallError::Refused(Box::new(TlCallError {
            call,
            pe: self.pe.to_string(),
            source,
        }))
    }

    /// [`Machine::view`], noting an address of another SIP's virtual
    /// memory.
    fn view(&self, addr: u64, shape: &[u32], dtype: Dtype) -> Result<TensorRef, HwError> {
        if crate::address::as_virtual(addr).is_some_and(|(sip, _)| sip != self.pe.sip) {
            self.addresses_other_sips.set(true);
        }
        self.machine.view(addr, shape, dtype)
    }

    fn names_left(&self) -> Result<(), CallError> {
        match self.list.name_count() < MAX_NAMES {
            true => Ok(()),
            false => Err(CallError::TooManyNames),
        }
    }

    /// The index of `shape` in the list.
    fn shape_id(&mut self, shape: &[u32]) -> Result<u32, CallError> {
        self.names_left()?;
        Ok(self.list.shape(shape))
    }

    /// The index of direction `dir` in the list: the PE's own `Dir` for it.
    fn dir_id(&mut self, dir: &str) -> Result<u32, CallError> {
        self.names_left()?;
        let (machine, pe, comm) = (&self.machine, self.pe, self.comm);
        Ok(self.list.dir(dir, |d| machine.direction(pe, comm, d)))
    }

    fn meta(&self, id: TensorId) -> Result<TensorMeta, CallError> {
        self.tensors
            .get(id)
            .copied()
            .ok_or(CallError::NotLive { kind: "tensor", id })
    }

    /// The id of a new tensor.
    fn new_tensor(&mut self, meta: TensorMeta) -> TensorId {
        let id = self.tensors.insert(meta);
        self.list.tensors = self.tensors.high_water();
        id
    }

    /// A new tensor of `shape` / `dtype`, made by the command `make` gives
    /// for its id.
    fn produce(
        &mut self,
        shape: u32,
        dtype: Dtype,
        make: impl FnOnce(TensorId) -> Command,
    ) -> Command {
        make(self.new_tensor(TensorMeta { shape, dtype }))
    }

    /// The command `c` was refused when executed: the tensor it was to
    /// make was not made (its id is free again).
    pub fn undo(&mut self, c: &Command) {
        if let Some(id) = c.out() {
            self.tensors.take(id);
        }
    }

    /// Tensor `id` is live (its handle not dropped).
    pub fn live(&self, id: TensorId) -> Result<(), CallError> {
        self.meta(id).map(drop)
    }

    /// `tl.program_id(axis)` (or `tl.num_programs(axis)` when `count`):
    /// axis 0 is the PE in its cube, 1 the cube in its SIP.
    pub fn program_axis(&self, axis: u32, count: bool) -> Result<i64, CallError> {
        let spec = &self.machine.topo.spec;
        match (axis, count) {
            (0, false) => Ok(self.pe.pe as i64),
            (1, false) => Ok(self.pe.cube as i64),
            (0, true) => Ok(spec.pes_per_cube() as i64),
            (1, true) => Ok(spec.cubes_per_sip() as i64),
            _ => Err(self.fail(
                call::program_axis(axis, count),
                HwError::Mismatch {
                    what: "axis must be 0 (PE) or 1 (cube)".into(),
                },
            )),
        }
    }

    /// Tensor `id`'s shape.
    pub fn shape_of(&self, id: TensorId) -> Result<&[u32], CallError> {
        Ok(self.list.shape_at(self.meta(id)?.shape))
    }

    pub fn dtype_of(&self, id: TensorId) -> Result<Dtype, CallError> {
        Ok(self.meta(id)?.dtype)
    }

    pub fn nbytes_of(&self, id: TensorId) -> Result<u64, CallError> {
        let m = self.meta(id)?;
        Ok(m.dtype.nbytes(self.list.shape_at(m.shape))?)
    }

    /// A second handle to tensor `id` (an in-step `tl.batch-tensor`): a
    /// tensor of its own id with the same shape and dtype. The caller
    /// gives it the same machine tensor.
    pub fn alias(&mut self, id: TensorId) -> Result<TensorId, CallError> {
        let m = self.meta(id)?;
        Ok(self.new_tensor(m))
    }

    /// `tl.load`.
    pub fn load(&mut self, addr: u64, shape: &[u32], dtype: Dtype) -> Result<Command, CallError> {
        if let Err(e) = self.view(addr, shape, dtype) {
            return Err(self.fail(call::load(addr, shape), e));
        }
        let shape = self.shape_id(shape)?;
        Ok(self.produce(shape, dtype, |out| Command::Load {
            addr,
            shape,
            dtype,
            out,
        }))
    }

    /// `tl.store`.
    pub fn store(&mut self, addr: u64, value: TensorId) -> Result<Command, CallError> {
        let v = self.meta(value)?;
        if let Err(e) = self.view(addr, self.list.shape_at(v.shape), v.dtype) {
            return Err(self.fail(call::store(addr), e));
        }
        Ok(Command::Store { addr, value })
    }

    /// `tl.send`.
    pub fn send(&mut self, dir: &str, value: TensorId) -> Result<Command, CallError> {
        let nbytes = self.nbytes_of(value)?;
        let dir_id = self.dir_id(dir)?;
        if !self.accepted_sends.contains(&(dir_id, nbytes)) {
            if let Err(e) = self.machine.check_send(self.pe, self.comm, dir, nbytes) {
                return Err(self.fail(call::send(dir), e));
            }
            if self.accepted_sends.len() < MAX_ACCEPTED {
                self.accepted_sends.push((dir_id, nbytes));
            }
        }
        Ok(Command::Send { dir: dir_id, value })
    }

    /// `tl.send(src_addr=...)`.
    pub fn send_addr(
        &mut self,
        dir: &str,
        addr: u64,
        shape: &[u32],
        dtype: Dtype,
    ) -> Result<Command, CallError> {
        let checked = self
            .view(addr, shape, dtype)
            .and_then(|v| self.machine.check_send(self.pe, self.comm, dir, v.nbytes()));
        if let Err(e) = checked {
            return Err(self.fail(call::send_addr(dir, addr, shape), e));
        }
        let (dir, shape) = (self.dir_id(dir)?, self.shape_id(shape)?);
        Ok(Command::SendAddr {
            dir,
            addr,
            shape,
            dtype,
        })
    }

    /// What a receive can be refused for ahead of time: the direction
    /// (unless the machine took it before), the destination, the shape.
    fn check_receive(
        &mut self,
        (dir, dir_id): (Option<&str>, Option<Option<u32>>),
        shape: &[u32],
        dtype: Dtype,
        dst: Option<u64>,
    ) -> Result<(), HwError> {
        let accepted = dir_id.is_some_and(|id| self.accepted_recvs.contains(&id));
        if !accepted {
            self.machine.check_recv(self.pe, self.comm, dir)?;
            if let Some(id) = dir_id {
                if self.accepted_recvs.len() < MAX_ACCEPTED {
                    self.accepted_recvs.push(id);
                }
            }
        }
        match dst {
            Some(addr) => self.view(addr, shape, dtype).map(drop),
            None => dtype.nbytes(shape).map(drop).map_err(HwError::from),
        }
    }

    /// `tl.recv` (`dst` none) and `tl.recv_into`.
    pub fn recv(
        &mut self,
        dir: Option<&str>,
        shape: &[u32],
        dtype: Dtype,
        dst: Option<u64>,
    ) -> Result<Command, CallError> {
        let dir_id = dir.map(|d| self.dir_id(d)).transpose()?;
        if let Err(e) = self.check_receive((dir, Some(dir_id)), shape, dtype, dst) {
            return Err(self.fail(call::recv(dir, dst), e));
        }
        let shape_id = self.shape_id(shape)?;
        Ok(self.produce(shape_id, dtype, |out| match dst {
            None => Command::Recv {
                dir: dir_id,
                shape: shape_id,
                dtype,
                out,
            },
            Some(dst) => Command::RecvInto {
                dir: dir_id,
                shape: shape_id,
                dtype,
                dst,
                out,
            },
        }))
    }

    /// `tl.binary` (and `tl.add`).
    pub fn binary(&mut self, op: BinOp, a: TensorId, b: TensorId) -> Result<Command, CallError> {
        let (ma, mb) = (self.meta(a)?, self.meta(b)?);
        // One shape index is one shape: only operands that differ in it
        // (or in dtype) need the check that names what differs.
        if (ma.shape, ma.dtype) != (mb.shape, mb.dtype) {
            let (sa, sb) = (self.list.shape_at(ma.shape), self.list.shape_at(mb.shape));
            if let Err(e) = check_same_operands(op, (sa, ma.dtype), (sb, mb.dtype)) {
                return Err(self.fail(call::binary(op), e));
            }
        }
        Ok(self.produce(ma.shape, ma.dtype, |out| Command::Binary { op, a, b, out }))
    }

    /// `tl.scale`.
    pub fn scale(&mut self, a: TensorId, factor: f64) -> Result<Command, CallError> {
        let m = self.meta(a)?;
        Ok(self.produce(m.shape, m.dtype, |out| Command::Scale { a, factor, out }))
    }

    /// `tl.fill`: only a shape too large to count in bytes is refused
    /// ahead (room for it in the scratch is asked when it runs).
    pub fn fill(&mut self, shape: &[u32], dtype: Dtype, value: f64) -> Result<Command, CallError> {
        if let Err(e) = dtype.nbytes(shape) {
            return Err(self.fail(call::fill(shape, dtype, value), e.into()));
        }
        let shape_id = self.shape_id(shape)?;
        Ok(self.produce(shape_id, dtype, |out| Command::Fill {
            shape: shape_id,
            dtype,
            value,
            out,
        }))
    }

    /// `tl.unary`.
    pub fn unary(&mut self, op: UnaryOp, a: TensorId) -> Result<Command, CallError> {
        let m = self.meta(a)?;
        Ok(self.produce(m.shape, m.dtype, |out| Command::Unary { op, a, out }))
    }

    /// `tl.cast`.
    pub fn cast(&mut self, a: TensorId, dtype: Dtype) -> Result<Command, CallError> {
        let m = self.meta(a)?;
        Ok(self.produce(m.shape, dtype, |out| Command::Cast { a, dtype, out }))
    }

    /// `tl.reduce`.
    pub fn reduce(&mut self, op: ReduceOp, a: TensorId, axis: u32) -> Result<Command, CallError> {
        let m = self.meta(a)?;
        let shape = match crate::hw::math_ops::reduced_shape(self.list.shape_at(m.shape), axis) {
            Ok(s) => self.shape_id(&s)?,
            Err(what) => return Err(self.fail(call::reduce(op, axis), HwError::Mismatch { what })),
        };
        Ok(self.produce(shape, m.dtype, |out| Command::Reduce { op, a, axis, out }))
    }

    /// `tl.gemm` (`op` [`CompositeOp::Gemm`], no `c`) and `tl.composite`.
    pub fn composite(
        &mut self,
        op: CompositeOp,
        (a, b, c): (TensorId, TensorId, Option<TensorId>),
        dtype: Dtype,
    ) -> Result<Command, CallError> {
        let (ma, mb) = (self.meta(a)?, self.meta(b)?);
        let mc = c.map(|c| self.meta(c)).transpose()?;
        let shape = crate::hw::gemm_ops::composite_shape(
            op,
            (self.list.shape_at(ma.shape), ma.dtype),
            (self.list.shape_at(mb.shape), mb.dtype),
            mc.map(|c| self.list.shape_at(c.shape)),
            self.machine.timing.gemm_max,
        );
        let (m, n, _) = match shape {
            Ok(s) => s,
            Err(what) => {
                let e = HwError::Mismatch { what };
                return Err(self.fail(call::composite(op, dtype), e));
            }
        };
        let shape = self.shape_id(&[m, n])?;
        Ok(self.produce(shape, dtype, |out| Command::Composite {
            op,
            a,
            b,
            c,
            dtype,
            out,
        }))
    }

    /// `tl.recv_async`: the command, whose `fut` is the future's id.
    pub fn recv_async(
        &mut self,
        dir: Option<&str>,
        shape: &[u32],
        dtype: Dtype,
    ) -> Result<Command, CallError> {
        if let Err(e) = self.check_receive((dir, None), shape, dtype, None) {
            return Err(self.fail(call::recv_async(dir), e));
        }
        let dir_id = dir.map(|d| self.dir_id(d)).transpose()?;
        let shape = self.shape_id(shape)?;
        let unwaited = self.unwaited.issued(dir.map(str::to_string));
        let fut = self.futures.insert(FutureMeta {
            shape,
            dtype,
            unwaited,
        });
        self.list.futures = self.futures.high_water();
        Ok(Command::RecvAsync {
            dir: dir_id,
            shape,
            dtype,
            fut,
        })
    }

    fn future(&self, fut: u32) -> Result<FutureMeta, CallError> {
        self.futures.get(fut).copied().ok_or(CallError::NotLive {
            kind: "future",
            id: fut,
        })
    }

    /// Future `fut`'s shape and dtype.
    pub fn future_shape(&self, fut: u32) -> Result<(&[u32], Dtype), CallError> {
        let f = self.future(fut)?;
        Ok((self.list.shape_at(f.shape), f.dtype))
    }

    /// `tl.wait`: the future is used up, its tensor made.
    pub fn wait(&mut self, fut: u32) -> Result<Command, CallError> {
        let f = self.future(fut)?;
        self.futures.take(fut);
        self.unwaited.waited(f.unwaited);
        Ok(self.produce(f.shape, f.dtype, |out| Command::Wait { fut, out }))
    }

    /// The guest dropped future `fut` without waiting for it: it stays
    /// unwaited, and the kernel fails at its end (its message would stay
    /// in the ring). Its id is not reused.
    pub fn drop_future(&mut self, fut: u32) -> Result<(), CallError> {
        self.future(fut)?;
        self.futures.retire(fut);
        Ok(())
    }

    /// The guest dropped tensor `id`'s handle.
    pub fn drop_tensor(&mut self, id: TensorId) -> Result<Command, CallError> {
        self.meta(id)?;
        self.tensors.take(id);
        Ok(Command::Drop(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::Space;

    fn recorder() -> (Recorder, u64) {
        let (m, pe) = crate::hw::machine::test_machine();
        (
            Recorder::new(m, (pe, CommId::WORLD)),
            Space::Hbm { sip: 0, cube: 0 }.addr(0),
        )
    }

    /// A recorder on the middle PE of a 3-SIP ring with IPCQ installed.
    fn ring_recorder() -> Recorder {
        let (machine, pe) = crate::hw::machine::test_ring_machine();
        Recorder::new(machine, (pe, CommId::WORLD))
    }

    fn refused(e: CallError) -> TlCallError {
        match e {
            CallError::Refused(e) => *e,
            other => panic!("not a refusal: {other}"),
        }
    }

    /// A call makes its command with the next free id; a dropped id is
    /// reused; what a handle may be asked is answered from the recorder.
    #[test]
    fn calls_become_commands_with_ids_handed_out_and_reused() {
        let (mut r, hbm) = recorder();
        let a = r.load(hbm, &[4, 2], Dtype::F16).unwrap();
        assert!(matches!(
            a,
            Command::Load {
                out: 0,
                dtype: Dtype::F16,
                ..
            }
        ));
        let b = r.load(hbm, &[4, 2], Dtype::F16).unwrap();
        let s = r.binary(BinOp::Add, 0, 1).unwrap();
        assert_eq!(
            s,
            Command::Binary {
                op: BinOp::Add,
                a: 0,
                b: 1,
                out: 2
            }
        );
        // Equal shapes are one name.
        assert_eq!(
            (a, b).0,
            Command::Load {
                addr: hbm,
                shape: 0,
                dtype: Dtype::F16,
                out: 0
            }
        );
        assert_eq!(r.list.name_count(), 1);
        assert_eq!(r.shape_of(2).unwrap(), &[4, 2]);
        assert_eq!(r.nbytes_of(2).unwrap(), 16);
        assert_eq!(r.drop_tensor(0).unwrap(), Command::Drop(0));
        assert!(matches!(
            r.meta(0),
            Err(CallError::NotLive {
                kind: "tensor",
                id: 0
            })
        ));
        let c = r.cast(2, Dtype::F32).unwrap();
        assert_eq!(c.out(), Some(0), "the dropped id is reused");
        assert_eq!(
            (r.dtype_of(0).unwrap(), r.nbytes_of(0).unwrap()),
            (Dtype::F32, 32)
        );
        let red = r.reduce(ReduceOp::Sum, 0, 1).unwrap();
        assert_eq!(r.shape_of(red.out().unwrap()).unwrap(), &[4]);
        assert_eq!(r.list.tensors, 4);
    }

    /// The checks that need no simulated time refuse the call by name,
    /// and a refused call hands out no id.
    #[test]
    fn refusals_name_the_call_and_make_nothing() {
        let (mut r, hbm) = recorder();
        r.load(hbm, &[8], Dtype::F16).unwrap();
        r.load(hbm, &[4], Dtype::F16).unwrap();
        let e = refused(r.binary(BinOp::Max, 0, 1).unwrap_err());
        assert_eq!(e.call, "tl.binary(max)");
        assert!(e.to_string().contains("different shapes"), "{e}");
        let e = refused(r.reduce(ReduceOp::Sum, 0, 1).unwrap_err());
        assert_eq!(e.call, "tl.reduce(sum, axis=1)");
        let e = refused(r.load(u64::MAX - 4, &[8], Dtype::F16).unwrap_err());
        assert!(e.call.starts_with("tl.load(addr="), "{}", e.call);
        let e = refused(r.send("W", 0).unwrap_err());
        assert_eq!(e.call, "tl.send(dir=\"W\")");
        assert_eq!(r.list.tensors, 2, "no id went to a refused call");
        assert!(matches!(
            r.scale(7, 2.0),
            Err(CallError::NotLive { id: 7, .. })
        ));
    }

    /// A fill makes a tensor of the shape and dtype it names; a shape too
    /// large to count in bytes is refused by name.
    #[test]
    fn a_fill_makes_its_shape_and_refuses_one_too_large() {
        let (mut r, _) = recorder();
        let c = r.fill(&[2, 5], Dtype::U8, 7.0).unwrap();
        assert_eq!(
            c,
            Command::Fill {
                shape: 0,
                dtype: Dtype::U8,
                value: 7.0,
                out: 0
            }
        );
        assert_eq!(
            (r.shape_of(0).unwrap(), r.nbytes_of(0).unwrap()),
            (&[2, 5][..], 10)
        );
        let huge = [u32::MAX; 3];
        let e = refused(r.fill(&huge, Dtype::F64, 0.0).unwrap_err());
        assert!(
            e.call.starts_with("tl.fill(shape=[4294967295"),
            "{}",
            e.call
        );
        assert_eq!(r.list.tensors, 1);
    }

    /// A command refused when executed is undone: its id is free again.
    #[test]
    fn an_undone_command_frees_its_tensor() {
        let (mut r, hbm) = recorder();
        let c = r.load(hbm, &[8], Dtype::F16).unwrap();
        r.undo(&c);
        assert!(r.meta(0).is_err());
        assert_eq!(r.load(hbm, &[8], Dtype::F16).unwrap().out(), Some(0));
        let alias = r.alias(0).unwrap();
        assert_eq!((alias, r.shape_of(alias).unwrap()), (1, &[8][..]));
    }

    /// A waited future's id is reused and its tensor made; one dropped
    /// unwaited stays unwaited (the kernel fails at its end) and its id
    /// is not reused (its receive may still be running).
    #[test]
    fn futures_are_waited_once_and_the_unwaited_are_kept() {
        let mut r = ring_recorder();
        let f = r.recv_async(None, &[8], Dtype::F32).unwrap();
        assert!(matches!(
            f,
            Command::RecvAsync {
                fut: 0,
                dir: None,
                ..
            }
        ));
        assert_eq!(r.future_shape(0).unwrap(), (&[8][..], Dtype::F32));
        assert_eq!(r.wait(0).unwrap(), Command::Wait { fut: 0, out: 0 });
        assert!(r.wait(0).is_err(), "a future is waited once");
        assert!(r.unwaited.error("pe").is_none());
        r.recv_async(None, &[8], Dtype::F32).unwrap();
        r.drop_future(0).unwrap();
        let again = r.recv_async(None, &[8], Dtype::F32).unwrap();
        assert!(matches!(again, Command::RecvAsync { fut: 1, .. }));
        assert!(r.unwaited.error("pe").is_some());
    }
}
