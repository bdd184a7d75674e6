//! A kernel's `tl` calls as data, and the one interpreter of them.
//!
//! Every `tl` call becomes a [`Command`] in [`super::recorder`]; this
//! module says what each command does to the machine ([`execute`]: one arm
//! per op, the only place a kernel's call meets the machine). A kernel
//! run in step with simulated time (kernbench-host's `runtime::kernel`) runs each command
//! through [`execute`] as the call is made; a recorded one's commands are
//! kept in a [`CommandList`] (kernbench-host's `runtime::eager`) and [`replay`]ed through
//! the same [`execute`], each when the kernel would have made its call.
//!
//! Every `tl` call either returns at once or waits for something the
//! machine does (a free slot, a message, room in the command queue), and
//! none hands data back to the kernel: so, unless a kernel observes time
//! or addresses, the order and arguments of its calls do not depend on
//! when they are made, and replaying them one after another — waiting
//! where the call would have waited — is the same run. Replay is plain
//! native code: no guest, no fiber, no host-call glue per command.
//!
//! The names of calls in errors (`tl.load(addr=..., shape=...)`) are made
//! here for both ways a kernel runs.

use super::slots::Table;
use crate::error::{HwError, TlCallError};
use crate::hw::blocked::Dir;
use crate::hw::dtype::{BinOp, Dtype};
use crate::hw::machine::{CommId, Shape};
use crate::hw::{Machine, TensorRef};
use crate::topology::PeCoord;
use std::sync::Arc;

/// A tensor handle of a recorded kernel: an index into the replay's
/// table of live tensors (freed indices are reused).
pub type TensorId = u32;

/// One recorded `tl` call. Shapes and directions are interned in the
/// list (a kernel uses a handful), so a command is a few words; the list
/// keeps it encoded in a few bytes (see [`super::command_codec`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Command {
    Load {
        addr: u64,
        shape: u32,
        dtype: Dtype,
        out: TensorId,
    },
    Store {
        addr: u64,
        value: TensorId,
    },
    Send {
        dir: u32,
        value: TensorId,
    },
    /// `send_addr`: send straight from memory.
    SendAddr {
        dir: u32,
        addr: u64,
        shape: u32,
        dtype: Dtype,
    },
    /// `recv`; `dir` indexes the directions, `None` is any direction.
    Recv {
        dir: Option<u32>,
        shape: u32,
        dtype: Dtype,
        out: TensorId,
    },
    /// `recv_into`.
    RecvInto {
        dir: Option<u32>,
        shape: u32,
        dtype: Dtype,
        dst: u64,
        out: TensorId,
    },
    Binary {
        op: BinOp,
        a: TensorId,
        b: TensorId,
        out: TensorId,
    },
    Scale {
        a: TensorId,
        factor: f64,
        out: TensorId,
    },
    Unary {
        op: crate::hw::math_ops::UnaryOp,
        a: TensorId,
        out: TensorId,
    },
    /// `tl.fill`: a tensor of `shape` / `dtype`, every element `value`.
    Fill {
        shape: u32,
        dtype: Dtype,
        value: f64,
        out: TensorId,
    },
    Cast {
        a: TensorId,
        dtype: Dtype,
        out: TensorId,
    },
    Reduce {
        op: crate::hw::math_ops::ReduceOp,
        a: TensorId,
        axis: u32,
        out: TensorId,
    },
    /// `tl.gemm` (op `Gemm`, no `c`) and `tl.composite`.
    Composite {
        op: crate::hw::gemm_ops::CompositeOp,
        a: TensorId,
        b: TensorId,
        c: Option<TensorId>,
        dtype: Dtype,
        out: TensorId,
    },
    /// `recv_async`: start the receive as its own task, future `fut`.
    RecvAsync {
        dir: Option<u32>,
        shape: u32,
        dtype: Dtype,
        fut: u32,
    },
    /// `wait(fut)`: its tensor becomes `out`.
    Wait {
        fut: u32,
        out: TensorId,
    },
    /// The kernel dropped its handle.
    Drop(TensorId),
}

impl Command {
    /// The tensor the command makes, if it makes one.
    pub fn out(&self) -> Option<TensorId> {
        match *self {
            Command::Load { out, .. }
            | Command::Recv { out, .. }
            | Command::RecvInto { out, .. }
            | Command::Binary { out, .. }
            | Command::Scale { out, .. }
            | Command::Fill { out, .. }
            | Command::Unary { out, .. }
            | Command::Cast { out, .. }
            | Command::Reduce { out, .. }
            | Command::Composite { out, .. }
            | Command::Wait { out, .. } => Some(out),
            Command::Store { .. }
            | Command::Send { .. }
            | Command::SendAddr { .. }
            | Command::RecvAsync { .. }
            | Command::Drop(_) => None,
        }
    }

    /// The future a command makes (a `recv_async`'s).
    pub fn future(&self) -> Option<u32> {
        match *self {
            Command::RecvAsync { fut, .. } => Some(fut),
            _ => None,
        }
    }
}

/// A kernel's calls in order, with the shapes and directions they name.
///
/// Every rank's list is recorded before the first command is simulated,
/// so all of them are alive at once: the commands are kept encoded
/// ([`super::command_codec`]: a tag byte, then varint fields), ~4 bytes per call where a
/// [`Command`] is 32. A ring step (send, recv, add, two drops) takes 17
/// bytes instead of 160, which at a thousand ranks is the difference
/// between ~17 MB and ~160 MB of freshly touched host memory.
#[derive(Debug, Default)]
pub struct CommandList {
    encoded: Vec<u8>,
    /// Commands pushed.
    len: usize,
    shapes: Vec<Shape>,
    dirs: Vec<Dir>,
    /// Tensor ids handed out so far (the replay table's size).
    pub tensors: u32,
    /// `recv_async` futures issued (each id used once).
    pub futures: u32,
}

impl CommandList {
    /// A list of `commands`, in order.
    pub fn from_commands(commands: impl IntoIterator<Item = Command>) -> Self {
        let mut l = CommandList::default();
        for c in commands {
            l.push(c);
        }
        l
    }

    /// Append a command.
    pub fn push(&mut self, c: Command) {
        super::command_codec::encode(&c, &mut self.encoded);
        self.len += 1;
    }

    /// Commands in the list.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The commands in order.
    pub fn iter(&self) -> impl Iterator<Item = Command> + '_ {
        let mut rest = &self.encoded[..];
        std::iter::from_fn(move || {
            if rest.is_empty() {
                return None;
            }
            let (c, tail) = super::command_codec::decode(rest);
            rest = tail;
            Some(c)
        })
    }

    /// Give back the growth slack (the list is complete).
    pub fn shrink_to_fit(&mut self) {
        self.encoded.shrink_to_fit();
    }

    /// The index of `shape` in the list's shapes.
    pub fn shape(&mut self, shape: &[u32]) -> u32 {
        intern(&mut self.shapes, shape, Shape::from_slice, |s| s)
    }

    /// The shape of index `id` (one [`CommandList::shape`] gave).
    pub fn shape_at(&self, id: u32) -> &[u32] {
        &self.shapes[id as usize]
    }

    /// The index of direction `dir`, made by `make` when new (a recording
    /// kernel takes its PE's own, [`crate::hw::Machine::direction`]).
    pub fn dir(&mut self, dir: &str, make: impl FnOnce(&str) -> Dir) -> u32 {
        intern(
            &mut self.dirs,
            dir.as_bytes(),
            |_| make(dir),
            |d| d.as_bytes(),
        )
    }

    /// Distinct shapes and directions named.
    pub fn name_count(&self) -> usize {
        self.shapes.len() + self.dirs.len()
    }

    /// The directions and shapes the commands name by index.
    pub fn names(&self) -> (&[Dir], &[Shape]) {
        (&self.dirs, &self.shapes)
    }

    /// Host bytes the list holds (charged to the run's memory budget).
    pub fn bytes(&self) -> u64 {
        (self.encoded.capacity()
            + self.shapes.capacity() * std::mem::size_of::<Shape>()
            + self.dirs.iter().map(|d| d.len() + 16).sum::<usize>()) as u64
    }
}

/// The index of `key` in `table` (each entry seen as `view` gives it),
/// added as `make` makes it if new. Compared element by element: a
/// direction or a shape is a few elements, and `==` on slices of bytes or
/// integers is a call to `memcmp` (every recorded send and receive looks
/// up its direction and its shape).
fn intern<K: Copy + PartialEq, V>(
    table: &mut Vec<V>,
    key: &[K],
    make: impl FnOnce(&[K]) -> V,
    view: impl Fn(&V) -> &[K],
) -> u32 {
    let same = |v: &[K]| v.len() == key.len() && v.iter().zip(key).all(|(x, y)| x == y);
    match table.iter().position(|v| same(view(v))) {
        Some(i) => i as u32,
        None => {
            table.push(make(key));
            (table.len() - 1) as u32
        }
    }
}

/// Names of `tl` calls as errors show them.
pub mod call {
    use crate::hw::dtype::BinOp;

    /// A receive direction as users write it: `"W"`, or `any`.
    fn dir_name(dir: Option<&str>) -> String {
        dir.map_or_else(|| "any".to_string(), |d| format!("{d:?}"))
    }
    pub fn load(addr: u64, shape: &[u32]) -> String {
        format!("tl.load(addr={addr:#x}, shape={shape:?})")
    }
    pub fn store(addr: u64) -> String {
        format!("tl.store(addr={addr:#x})")
    }
    pub fn send(dir: &str) -> String {
        format!("tl.send(dir={dir:?})")
    }
    pub fn send_addr(dir: &str, addr: u64, shape: &[u32]) -> String {
        format!("tl.send(dir={dir:?}, src_addr={addr:#x}, shape={shape:?})")
    }
    pub fn recv(dir: Option<&str>, dst: Option<u64>) -> String {
        match dst {
            None => format!("tl.recv(dir={})", dir_name(dir)),
            Some(dst) => format!("tl.recv_into(dir={}, dst={dst:#x})", dir_name(dir)),
        }
    }
    pub fn recv_async(dir: Option<&str>) -> String {
        format!("tl.recv_async(dir={})", dir_name(dir))
    }
    /// `tl.wait` on a future of `dir`.
    pub fn wait(dir: Option<&str>) -> String {
        format!("tl.wait(recv_async(dir={}))", dir_name(dir))
    }
    /// `tl.program_id(axis)`, or `tl.num_programs(axis)` when `count`.
    pub fn program_axis(axis: u32, count: bool) -> String {
        let name = if count { "num_programs" } else { "program_id" };
        format!("tl.{name}(axis={axis})")
    }
    pub fn binary(op: BinOp) -> String {
        format!("tl.binary({})", op.name())
    }
    pub fn fill(shape: &[u32], dtype: crate::hw::dtype::Dtype, value: f64) -> String {
        format!("tl.fill(shape={shape:?}, {}, {value})", dtype.name())
    }
    pub fn scale(factor: f64) -> String {
        format!("tl.scale({factor})")
    }
    pub fn unary(op: crate::hw::math_ops::UnaryOp) -> String {
        format!("tl.unary({})", op.name())
    }
    pub fn cast(dtype: crate::hw::dtype::Dtype) -> String {
        format!("tl.cast({})", dtype.name())
    }
    pub fn reduce(op: crate::hw::math_ops::ReduceOp, axis: u32) -> String {
        format!("tl.reduce({}, axis={axis})", op.name())
    }
    pub fn gemm(dtype: crate::hw::dtype::Dtype) -> String {
        format!("tl.gemm(out_dtype={})", dtype.name())
    }
    /// `tl.composite` (`tl.gemm` for the plain GEMM).
    pub fn composite(
        op: crate::hw::gemm_ops::CompositeOp,
        dtype: crate::hw::dtype::Dtype,
    ) -> String {
        match op {
            crate::hw::gemm_ops::CompositeOp::Gemm => gemm(dtype),
            _ => format!("tl.composite({}, out_dtype={})", op.name(), dtype.name()),
        }
    }
}

/// A `recv_async` running as its own task.
type Task = crate::engine::JoinHandle<Result<TensorRef, HwError>>;

/// What the commands of one kernel have made and not yet dropped: its
/// live tensors and running receives, by id.
#[derive(Default)]
pub struct Frame {
    live: Table<TensorRef>,
    futures: Table<(Task, Option<Dir>)>,
}

impl Frame {
    /// A frame for `list`'s commands (room for every id they use).
    pub fn for_list(list: &CommandList) -> Self {
        Frame {
            live: Table::with_len(list.tensors),
            futures: Table::with_len(list.futures),
        }
    }

    /// Tensor `id` (the commands name live tensors only: the
    /// [`super::recorder::Recorder`] made them).
    #[inline]
    pub fn tensor(&self, id: TensorId) -> &TensorRef {
        self.live.get(id).expect("a command names a live tensor")
    }

    /// Tensor `id` is `t` from now on.
    #[inline]
    pub fn put(&mut self, id: TensorId, t: TensorRef) {
        self.live.put(id, t);
    }
}

/// Where commands run: the machine, the PE, the communicator whose IPCQ
/// its sends and receives use, the directions and shapes the commands
/// name by index, and what they have made.
pub struct Exec<'a> {
    pub machine: &'a Arc<Machine>,
    pub pe: PeCoord,
    pub comm: CommId,
    pub names: (&'a [Dir], &'a [Shape]),
    pub frame: &'a mut Frame,
}

/// Execute `commands` in order on `at.pe`, each waiting in simulated time
/// where its call would have waited; stops at the first the machine
/// refuses. The one definition of what each `tl` call does to the
/// machine: a kernel in step runs each call through it as the call is
/// made (a single command), a recorded one's list is replayed through it
/// ([`replay`]). One loop, not a function per command awaited in a loop:
/// a ring step runs five commands, and a nested future per command cost
/// ~300 instructions each (entering, moving and dropping it).
pub async fn execute(
    at: &mut Exec<'_>,
    commands: impl Iterator<Item = Command>,
) -> Result<(), TlCallError> {
    let pe = at.pe;
    let fail = |call: String, source: HwError| TlCallError {
        call,
        pe: pe.to_string(),
        source,
    };
    for command in commands {
        match command {
            Command::Load {
                addr,
                shape,
                dtype,
                out,
            } => {
                let shape = &at.names.1[shape as usize];
                at.machine.queue_room((pe, at.comm)).await;
                let t = at
                    .machine
                    .load((pe, at.comm), addr, shape, dtype)
                    .map_err(|e| fail(call::load(addr, shape), e))?;
                at.frame.put(out, t);
            }
            Command::Store { addr, value } => {
                at.machine.queue_room((pe, at.comm)).await;
                let v = at.frame.tensor(value);
                at.machine
                    .store((pe, at.comm), addr, v)
                    .map_err(|e| fail(call::store(addr), e))?;
            }
            Command::Send { dir, value } => {
                let dir = &at.names.0[dir as usize];
                // The send holds its value until the message has left.
                let v = at.frame.tensor(value).clone();
                at.machine
                    .send((pe, at.comm), dir, v)
                    .await
                    .map_err(|e| fail(call::send(dir), e))?;
            }
            Command::SendAddr {
                dir,
                addr,
                shape,
                dtype,
            } => {
                let (dir, shape) = (&at.names.0[dir as usize], &at.names.1[shape as usize]);
                at.machine
                    .send_addr((pe, at.comm), dir, addr, shape, dtype)
                    .await
                    .map_err(|e| fail(call::send_addr(dir, addr, shape), e))?;
            }
            // One arm, awaited here: a future of the machine's awaited in a
            // closure's future was two copies of it into this one's state
            // per receive, lines a ring step touched for nothing.
            Command::Recv {
                dir,
                shape,
                dtype,
                out,
            }
            | Command::RecvInto {
                dir,
                shape,
                dtype,
                out,
                ..
            } => {
                let dst = match command {
                    Command::RecvInto { dst, .. } => Some(dst),
                    _ => None,
                };
                let dir = dir.map(|d| &at.names.0[d as usize]);
                let shape = &at.names.1[shape as usize];
                if dst.is_some() {
                    at.machine.queue_room((pe, at.comm)).await;
                }
                let t = at
                    .machine
                    .recv((pe, at.comm), dir, shape, dtype, dst)
                    .await
                    .map_err(|e| fail(call::recv(dir.map(|d| &**d), dst), e))?;
                at.frame.put(out, t);
            }
            Command::Binary { op, a, b, out } => {
                at.machine.queue_room((pe, at.comm)).await;
                let (a, b) = (at.frame.tensor(a), at.frame.tensor(b));
                let t = at
                    .machine
                    .binary((pe, at.comm), op, a, b)
                    .map_err(|e| fail(call::binary(op), e))?;
                at.frame.put(out, t);
            }
            Command::Scale { a, factor, out } => {
                at.machine.queue_room((pe, at.comm)).await;
                let a = at.frame.tensor(a);
                let t = at
                    .machine
                    .scale((pe, at.comm), a, factor)
                    .map_err(|e| fail(call::scale(factor), e))?;
                at.frame.put(out, t);
            }
            Command::Fill {
                shape,
                dtype,
                value,
                out,
            } => {
                let shape = &at.names.1[shape as usize];
                at.machine.queue_room((pe, at.comm)).await;
                let t = at
                    .machine
                    .fill((pe, at.comm), shape, dtype, value)
                    .map_err(|e| fail(call::fill(shape, dtype, value), e))?;
                at.frame.put(out, t);
            }
            Command::Unary { op, a, out } => {
                at.machine.queue_room((pe, at.comm)).await;
                let a = at.frame.tensor(a);
                let t = at
                    .machine
                    .unary((pe, at.comm), op, a)
                    .map_err(|e| fail(call::unary(op), e))?;
                at.frame.put(out, t);
            }
            Command::Cast { a, dtype, out } => {
                at.machine.queue_room((pe, at.comm)).await;
                let a = at.frame.tensor(a);
                let t = at
                    .machine
                    .cast((pe, at.comm), a, dtype)
                    .map_err(|e| fail(call::cast(dtype), e))?;
                at.frame.put(out, t);
            }
            Command::Reduce { op, a, axis, out } => {
                at.machine.queue_room((pe, at.comm)).await;
                let a = at.frame.tensor(a);
                let t = at
                    .machine
                    .reduce((pe, at.comm), op, a, axis)
                    .map_err(|e| fail(call::reduce(op, axis), e))?;
                at.frame.put(out, t);
            }
            Command::Composite {
                op,
                a,
                b,
                c,
                dtype,
                out,
            } => {
                at.machine.queue_room((pe, at.comm)).await;
                let (a, b) = (at.frame.tensor(a), at.frame.tensor(b));
                let c = c.map(|c| at.frame.tensor(c));
                let t = at
                    .machine
                    .composite((pe, at.comm), op, (a, b, c), dtype)
                    .map_err(|e| fail(call::composite(op, dtype), e))?;
                at.frame.put(out, t);
            }
            Command::RecvAsync {
                dir,
                shape,
                dtype,
                fut,
            } => {
                let dir = dir.map(|d| at.names.0[d as usize].clone());
                let shape = at.names.1[shape as usize].clone();
                let task = at
                    .machine
                    .recv_async((pe, at.comm), dir.clone(), shape, dtype);
                at.frame.futures.put(fut, (task, dir));
            }
            Command::Wait { fut, out } => {
                let (task, dir) = at
                    .frame
                    .futures
                    .retire(fut)
                    .expect("a wait names a running receive once");
                let t = at
                    .machine
                    .wait_future((pe, at.comm), dir.clone(), task)
                    .await
                    .map_err(|e| fail(call::wait(dir.as_deref()), e))?;
                at.frame.put(out, t);
            }
            Command::Drop(id) => drop(at.frame.live.retire(id)),
        }
    }
    Ok(())
}

/// Issue `list`'s calls on `pe` (its IPCQ in `comm`) in simulated time,
/// each when the kernel would have made it; returns the first call the
/// machine refuses.
pub async fn replay(
    machine: &Arc<Machine>,
    (pe, comm): (PeCoord, CommId),
    list: &CommandList,
) -> Result<(), TlCallError> {
    let mut frame = Frame::for_list(list);
    // Held in this future, whose lines a step touches anyway: the list
    // itself is not read again after its first command.
    let mut at = Exec {
        machine,
        pe,
        comm,
        names: list.names(),
        frame: &mut frame,
    };
    execute(&mut at, list.iter()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The replay's future stays small: a ring step touches the lines of
    /// it that its awaits write (768 bytes when a receive was awaited
    /// through a closure and held its claim's looking, 360 since; 480 with
    /// the loop in [`execute`], whose future holds the [`Exec`]; 496 when
    /// each command was a future of its own awaited in the loop; 488 with
    /// the communicator a send holds, still eight lines).
    #[test]
    fn the_replay_s_future_stays_small() {
        let (m, pe) = crate::hw::machine::test_machine();
        let list = CommandList::default();
        let replay = replay(&m, (pe, CommId::WORLD), &list);
        assert!(
            std::mem::size_of_val(&replay) <= 488,
            "{}",
            std::mem::size_of_val(&replay)
        );
    }

    #[test]
    fn shapes_and_directions_are_interned() {
        let mut l = CommandList::default();
        assert_eq!(l.shape(&[8]), 0);
        assert_eq!(l.shape(&[8, 2]), 1);
        assert_eq!(l.shape(&[8]), 0);
        assert_eq!(l.dir("E", |d| Dir::from(d)), 0);
        assert_eq!(l.dir("W", |d| Dir::from(d)), 1);
        assert_eq!(l.dir("E", |d| Dir::from(d)), 0);
        // Compared element by element: same length, other values; a
        // prefix; the empty shape.
        assert_eq!(l.shape(&[2]), 2);
        assert_eq!(l.shape(&[8, 2, 1]), 3);
        assert_eq!(l.shape(&[]), 4);
        assert_eq!(l.shape(&[8, 2]), 1);
        assert_eq!(l.dir("EW", |d| Dir::from(d)), 2);
        assert_eq!(l.dir("", |d| Dir::from(d)), 3);
        assert_eq!(l.dir("W", |d| Dir::from(d)), 1);
        assert_eq!(
            (l.shape_at(0), l.shape_at(3), l.shape_at(4)),
            (&[8][..], &[8, 2, 1][..], &[][..])
        );
        assert!(std::mem::size_of::<Command>() <= 32);
    }

    /// Every kind of command comes back from the encoded list as it went
    /// in, extreme field values included, and a ring step takes few bytes.
    #[test]
    fn the_encoded_list_gives_back_every_command() {
        use crate::hw::gemm_ops::CompositeOp;
        use crate::hw::math_ops::{ReduceOp, UnaryOp};
        let all = vec![
            Command::Load {
                addr: u64::MAX,
                shape: 3,
                dtype: Dtype::Bf16,
                out: 0,
            },
            Command::Store {
                addr: 0x1234_5678_9abc,
                value: u32::MAX,
            },
            Command::Send { dir: 1, value: 2 },
            Command::SendAddr {
                dir: 0,
                addr: 1 << 40,
                shape: 0,
                dtype: Dtype::I32,
            },
            Command::Recv {
                dir: None,
                shape: 1,
                dtype: Dtype::F16,
                out: 7,
            },
            Command::RecvInto {
                dir: Some(5),
                shape: 2,
                dtype: Dtype::F32,
                dst: 99,
                out: 65_535,
            },
            Command::Binary {
                op: BinOp::Max,
                a: 1,
                b: 2,
                out: 3,
            },
            Command::Scale {
                a: 4,
                factor: -0.1,
                out: 5,
            },
            Command::Unary {
                op: UnaryOp::Exp,
                a: 6,
                out: 7,
            },
            Command::Fill {
                shape: 3,
                dtype: Dtype::U64,
                value: f64::NEG_INFINITY,
                out: 18,
            },
            Command::Cast {
                a: 8,
                dtype: Dtype::Bf16,
                out: 9,
            },
            Command::Reduce {
                op: ReduceOp::Sum,
                a: 10,
                axis: 1,
                out: 11,
            },
            Command::Composite {
                op: CompositeOp::Gemm,
                a: 12,
                b: 13,
                c: Some(14),
                dtype: Dtype::F32,
                out: 15,
            },
            Command::RecvAsync {
                dir: Some(0),
                shape: 0,
                dtype: Dtype::F16,
                fut: 3,
            },
            Command::Wait { fut: 3, out: 16 },
            Command::Drop(17),
            // The longest encoding: every field at its widest.
            Command::RecvInto {
                dir: Some(u32::MAX),
                shape: u32::MAX,
                dtype: Dtype::F32,
                dst: u64::MAX,
                out: u32::MAX,
            },
        ];
        let list = CommandList::from_commands(all.iter().copied());
        assert_eq!(list.len(), all.len());
        assert_eq!(list.iter().collect::<Vec<_>>(), all);
        assert!(CommandList::default().iter().next().is_none());
        let step = [
            Command::Send { dir: 0, value: 1 },
            Command::Recv {
                dir: Some(1),
                shape: 0,
                dtype: Dtype::F16,
                out: 2,
            },
            Command::Binary {
                op: BinOp::Add,
                a: 0,
                b: 2,
                out: 3,
            },
            Command::Drop(0),
            Command::Drop(1),
        ];
        let l = CommandList::from_commands(step);
        assert_eq!(l.encoded.len(), 17, "a byte per tag, id, index and enum");
    }

    /// The default machine (its spec too) and its first PE.
    fn default_machine() -> (crate::config::TopologySpec, Arc<Machine>, PeCoord) {
        let (machine, pe) = crate::hw::machine::test_machine();
        (machine.topo.spec.clone(), machine, pe)
    }

    /// Replay `list` on `pe` until the simulation ends.
    #[allow(clippy::result_large_err)]
    fn replay_to_end(
        machine: &Arc<Machine>,
        pe: PeCoord,
        list: CommandList,
    ) -> Result<(), TlCallError> {
        use crate::engine::{Executor, RunOutcome};
        let ex = Executor::new();
        let m = machine.clone();
        let done = ex.spawn(async move { replay(&m, (pe, CommId::WORLD), &list).await });
        assert_eq!(ex.run(), RunOutcome::Finished);
        done.try_take().unwrap()
    }

    #[test]
    fn replay_runs_the_calls_and_names_the_one_the_machine_refuses() {
        use crate::address::Space;
        let (spec, machine, pe) = default_machine();
        let hbm = Space::Hbm { sip: 0, cube: 0 }.addr(0);
        // Two loads and an add that fit, then a load larger than the TCM:
        // a refusal only the machine can make, at replay.
        let mut list = CommandList::default();
        let small = list.shape(&[8]);
        let elems = (spec.pe.tcm_kib * 1024 / 2 + 1) as u32;
        let huge = list.shape(&[elems]);
        list.tensors = 4;
        for c in [
            Command::Load {
                addr: hbm,
                shape: small,
                dtype: Dtype::F16,
                out: 0,
            },
            Command::Load {
                addr: hbm,
                shape: small,
                dtype: Dtype::F16,
                out: 1,
            },
            Command::Binary {
                op: BinOp::Add,
                a: 0,
                b: 1,
                out: 2,
            },
            Command::Drop(0),
            Command::Load {
                addr: hbm,
                shape: huge,
                dtype: Dtype::F16,
                out: 3,
            },
        ] {
            list.push(c);
        }
        let err = replay_to_end(&machine, pe, list).unwrap_err();
        assert_eq!(err.call, format!("tl.load(addr={hbm:#x}, shape=[{elems}])"));
        assert_eq!(err.pe, "sip0.cube0.pe0");
        assert!(matches!(err.source, HwError::OutOfMemory { .. }), "{err:?}");
        // Everything before it was issued (two DMAs, one MATH command).
        let s = machine.stats();
        assert_eq!((s.dma_commands, s.math_commands), (2, 1));
    }

    /// A GEMM through the machine: operands loaded from HBM, the product
    /// on the matrix unit, stored back; the values and the counters.
    #[test]
    fn a_gemm_replays_on_the_matrix_unit_with_its_time_and_values() {
        use crate::address::Space;
        let (_, machine, pe) = default_machine();
        let hbm = Space::Hbm { sip: 0, cube: 0 };
        // a = [[1, 2, 3], [4, 5, 6]] (2x3), b = [[1, 0], [0, 1], [1, 1]] (3x2)
        machine
            .host_write(
                hbm,
                0,
                &Dtype::F16.from_f64(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            )
            .unwrap();
        machine
            .host_write(
                hbm,
                64,
                &Dtype::F16.from_f64(&[1.0, 0.0, 0.0, 1.0, 1.0, 1.0]),
            )
            .unwrap();
        let mut list = CommandList::default();
        let (sa, sb) = (list.shape(&[2, 3]), list.shape(&[3, 2]));
        list.tensors = 3;
        for c in [
            Command::Load {
                addr: hbm.addr(0),
                shape: sa,
                dtype: Dtype::F16,
                out: 0,
            },
            Command::Load {
                addr: hbm.addr(64),
                shape: sb,
                dtype: Dtype::F16,
                out: 1,
            },
            Command::Composite {
                op: crate::hw::gemm_ops::CompositeOp::Gemm,
                a: 0,
                b: 1,
                c: None,
                dtype: Dtype::F32,
                out: 2,
            },
            Command::Store {
                addr: hbm.addr(128),
                value: 2,
            },
        ] {
            list.push(c);
        }
        replay_to_end(&machine, pe, list).unwrap();
        let out = Dtype::F32.to_f64(&machine.host_read(hbm, 128, 16));
        assert_eq!(out, [4.0, 5.0, 10.0, 11.0]);
        let s = machine.stats();
        assert_eq!(
            (s.dma_commands, s.math_commands, s.gemm_commands),
            (3, 0, 1)
        );
    }

    /// A fill replays as a MATH command with no inputs: its value, in
    /// the dtype as a cast converts it, in every element.
    #[test]
    fn a_fill_replays_its_value_into_every_element() {
        use crate::address::Space;
        let (_, machine, pe) = default_machine();
        let hbm = Space::Hbm { sip: 0, cube: 0 };
        let mut list = CommandList::default();
        let s = list.shape(&[3, 2]);
        list.tensors = 2;
        for (i, (dtype, value)) in [(Dtype::I8, 300.7), (Dtype::F16, -0.1)]
            .into_iter()
            .enumerate()
        {
            let out = i as TensorId;
            list.push(Command::Fill {
                shape: s,
                dtype,
                value,
                out,
            });
            list.push(Command::Store {
                addr: hbm.addr(64 * i as u64),
                value: out,
            });
        }
        replay_to_end(&machine, pe, list).unwrap();
        let i8s = Dtype::I8.to_f64(&machine.host_read(hbm, 0, 6));
        assert_eq!(i8s, [127.0; 6], "saturated");
        let f16s = machine.host_read(hbm, 64, 12);
        assert_eq!(f16s, Dtype::F16.from_f64(&[-0.1; 6]));
        let s = machine.stats();
        assert_eq!((s.dma_commands, s.math_commands), (2, 2));
    }

    #[test]
    fn call_names_read_as_the_user_wrote_them() {
        assert_eq!(call::load(0x40, &[8]), "tl.load(addr=0x40, shape=[8])");
        assert_eq!(call::recv(None, None), "tl.recv(dir=any)");
        assert_eq!(
            call::recv(Some("W"), Some(0x10)),
            "tl.recv_into(dir=\"W\", dst=0x10)"
        );
        assert_eq!(call::send("E"), "tl.send(dir=\"E\")");
        assert_eq!(
            call::fill(&[4, 2], Dtype::Bf16, 0.5),
            "tl.fill(shape=[4, 2], bf16, 0.5)"
        );
    }
}
