//! `tl.submit` (WIT 0.6.2) and `tl.submit-encoded` (0.6.3, the same list
//! as bytes, read by [`super::batch_bytes`]): a kernel's `tl` calls handed
//! over as a list, in one host call instead of one host call each.
//!
//! A call through the component model costs ~1.5 K instructions of glue
//! (the transition, lifting, the resource table, the call hook that
//! charges the host-call budget): more than recording the call itself. A
//! ring step makes seven. The Rust SDK therefore keeps a kernel's calls
//! in guest memory and submits them when the kernel needs an answer only
//! the host has (an address, the time) or ends.
//!
//! This module owns what a batch adds to a kernel's host: the ids the
//! kernel chooses for the tensors and futures it makes (mapped to the
//! handles of the kernel's resource table), and the line between a call's
//! own refusal — told to the kernel as a `batch-error`, so the SDK can
//! name the line of the kernel that made the call — and everything else,
//! which ends the instance as it would have. Each listed call is made by
//! the same host function as the call made by itself ([`batch_call_fn`]),
//! so checks, errors, recorded commands and simulated times are the same.

use super::slots::Table;
use crate::error::TlCallError;

/// Ids a batch may use for tensors, and for futures (a kernel reuses the
/// ids of dropped ones, so it needs as many as it holds at once).
pub const MAX_BATCH_IDS: u32 = 1 << 16;

/// A batch named an id wrongly (the SDK never does; a hand-written guest
/// may).
#[derive(Debug, thiserror::Error)]
pub enum BatchIdError {
    #[error("tl.submit: {kind} id {id} is not below {MAX_BATCH_IDS}")]
    OutOfRange { kind: &'static str, id: u32 },
    #[error(
        "tl.submit: {kind} id {id} is still live (drop it before naming a new {kind} with it)"
    )]
    Live { kind: &'static str, id: u32 },
    #[error("tl.submit: {kind} id {id} names no live {kind}")]
    NotLive { kind: &'static str, id: u32 },
    #[error("tl.submit: {kind} {index} is not one of the {len} the batch lists")]
    NoSuch {
        kind: &'static str,
        index: u32,
        len: usize,
    },
}

/// The directions and shapes one `submit` names by index.
pub struct Named<'a> {
    pub dirs: &'a [String],
    pub shapes: &'a [Vec<u32>],
}

impl Named<'_> {
    /// Direction `index` as the batch lists it, for the calls that take it
    /// by reference (a `String` and a `Vec` made per call were three
    /// allocations a ring step while recording).
    pub fn dir_str(&self, index: u32) -> Result<&str, BatchIdError> {
        self.dirs
            .get(index as usize)
            .map(String::as_str)
            .ok_or(BatchIdError::NoSuch {
                kind: "direction",
                index,
                len: self.dirs.len(),
            })
    }

    pub fn any_dir_str(&self, index: Option<u32>) -> Result<Option<&str>, BatchIdError> {
        index.map(|i| self.dir_str(i)).transpose()
    }

    /// Shape `index` as the batch lists it.
    pub fn shape_slice(&self, index: u32) -> Result<&[u32], BatchIdError> {
        self.shapes
            .get(index as usize)
            .map(Vec::as_slice)
            .ok_or(BatchIdError::NoSuch {
                kind: "shape",
                index,
                len: self.shapes.len(),
            })
    }

    pub fn dir(&self, index: u32) -> Result<String, BatchIdError> {
        self.dir_str(index).map(str::to_string)
    }

    pub fn any_dir(&self, index: Option<u32>) -> Result<Option<String>, BatchIdError> {
        index.map(|i| self.dir(i)).transpose()
    }

    pub fn shape(&self, index: u32) -> Result<Vec<u32>, BatchIdError> {
        self.shape_slice(index).map(<[u32]>::to_vec)
    }
}

/// One kind of id (tensors, or futures): id -> resource-table handle.
#[derive(Debug)]
pub struct IdTable {
    kind: &'static str,
    reps: Table<u32>,
}

impl IdTable {
    fn new(kind: &'static str) -> Self {
        IdTable {
            kind,
            reps: Table::default(),
        }
    }

    /// `id` may name a new handle: in range and not live.
    pub fn vacant(&self, id: u32) -> Result<(), BatchIdError> {
        let kind = self.kind;
        if id >= MAX_BATCH_IDS {
            return Err(BatchIdError::OutOfRange { kind, id });
        }
        match self.reps.contains(id) {
            true => Err(BatchIdError::Live { kind, id }),
            false => Ok(()),
        }
    }

    /// `id` names `rep` from now on (checked by [`IdTable::vacant`]).
    pub fn bind(&mut self, id: u32, rep: u32) -> Result<(), BatchIdError> {
        self.vacant(id)?;
        self.reps.put(id, rep);
        Ok(())
    }

    /// The handle `id` names.
    pub fn get(&self, id: u32) -> Result<u32, BatchIdError> {
        self.reps.get(id).copied().ok_or(BatchIdError::NotLive {
            kind: self.kind,
            id,
        })
    }

    /// The handle `id` names; `id` is free again.
    pub fn take(&mut self, id: u32) -> Result<u32, BatchIdError> {
        let rep = self.get(id)?;
        self.reps.retire(id);
        Ok(rep)
    }
}

/// The ids of one kernel instance's batches.
#[derive(Debug)]
pub struct BatchIds {
    pub tensors: IdTable,
    pub futures: IdTable,
}

impl Default for BatchIds {
    fn default() -> Self {
        BatchIds {
            tensors: IdTable::new("tensor"),
            futures: IdTable::new("future"),
        }
    }
}

/// What became of call `index` of a batch that failed with `e`: the
/// refusal the kernel is told (`Ok((index, message))`) when it is the
/// call's own, otherwise the error that ends the instance.
pub fn refusal(index: usize, e: wasmtime::Error) -> wasmtime::Result<(u32, String)> {
    if e.is::<TlCallError>() || e.is::<BatchIdError>() {
        Ok((index as u32, e.to_string()))
    } else {
        Err(e)
    }
}

/// Defines `fn $name(host, dirs, shapes, calls)`, the body of a host's
/// `tl.submit`, and `fn $encoded(host, dirs, shapes, bytes)`, the body of
/// its `tl.submit-encoded` (the calls read from bytes with the enum tables
/// of `batch_bytes::$cases`, then `$name`). `$name` makes the calls in
/// order through the host's own `tl` functions (`$aw` is `.await` for a host whose calls wait in simulated
/// time, nothing for a recording one) and gives the refused call's index
/// and message. The host has `batch: BatchIds` and `guard` fields; `tl`
/// is its bindings' interface module. The calls a ring step makes that
/// name a direction or a shape (`load`, `send`, `recv`, `recv-into`) go
/// through the host's `load_named` / `send_named` / `recv_named`, the
/// bodies of its `tl` functions taking them by reference.
macro_rules! batch_call_fn {
    ($name:ident, $encoded:ident, $host:ty, $cases:ident, [$($aw:tt)*], $($async:ident)?) => {
        /// `tl.submit-encoded`: the calls read from their bytes
        /// ([`$crate::runtime::batch_bytes`]), then made as `tl.submit`
        /// makes them. A call that cannot be read is refused by its index
        /// after the calls before it have been made.
        $($async)? fn $encoded(
            host: &mut $host,
            dirs: Vec<String>,
            shapes: Vec<Vec<u32>>,
            bytes: Vec<u8>,
        ) -> Result<(), $crate::runtime::fail::Fail<tl::BatchError>> {
            // A call takes two bytes or more: room for all at once.
            let mut calls = Vec::with_capacity(bytes.len() / 2);
            let mut reader = $crate::runtime::batch_bytes::BatchReader::new(&bytes);
            let unread = loop {
                match read_call(&mut reader) {
                    Some(Ok(call)) => calls.push(call),
                    Some(Err(e)) => break Some(e),
                    None => break None,
                }
            };
            make_calls(host, dirs, shapes, calls.into_iter()) $($aw)* ?;
            match unread {
                None => Ok(()),
                Some(e) => Err($crate::runtime::fail::Fail::Raised(tl::BatchError {
                    index: e.index(),
                    message: e.to_string(),
                })),
            }
        }

        /// The next call of a `tl.submit-encoded` batch (`None`: no more).
        /// Inlined into the loop of its caller: passed to a call, the
        /// reader would live in memory, its position stored after every
        /// byte read.
        #[inline(always)]
        fn read_call(
            r: &mut $crate::runtime::batch_bytes::BatchReader<'_>,
        ) -> Option<Result<Call, $crate::runtime::batch_bytes::BatchBytesError>> {
            use $crate::runtime::batch_bytes::{case, $cases as cases};
            use tl::BatchCall as C;
            let c = r.next_case()?;
            if c == case::FILL {
                let fill = (r.u32("shape"), r.dtype("dtype"), r.f64("value"), r.u32("out"));
                return Some(r.finish(Call::Fill(fill)));
            }
            // Fields are read in the order they are written (Rust
            // evaluates a tuple's or a record's fields left to right).
            let call = match c {
                case::LOAD => C::Load((r.u64("addr"), r.u32("shape"), r.dtype("dtype"), r.u32("out"))),
                case::STORE => C::Store((r.u64("addr"), r.u32("value"))),
                case::SEND => C::Send((r.u32("dir"), r.u32("value"))),
                case::SEND_ADDR => C::SendAddr((
                    r.u32("dir"),
                    r.u64("addr"),
                    r.u32("shape"),
                    r.dtype("dtype"),
                )),
                case::RECV => C::Recv(tl::BatchRecv {
                    dir: r.opt_u32("dir"),
                    shape: r.u32("shape"),
                    dtype: r.dtype("dtype"),
                    into: r.opt_u64("into"),
                    out: r.u32("out"),
                }),
                case::BINARY => C::Binary((r.case_of("op", &cases::BINOPS, "binop"), r.u32("a"), r.u32("b"), r.u32("out"))),
                case::SCALE => C::Scale((r.u32("a"), r.f64("factor"), r.u32("out"))),
                case::UNARY => C::Unary((r.case_of("op", &cases::UNARY_OPS, "unary-op"), r.u32("a"), r.u32("out"))),
                case::CAST => C::Cast((r.u32("a"), r.dtype("dtype"), r.u32("out"))),
                case::REDUCE => C::Reduce((
                    r.case_of("op", &cases::REDUCE_OPS, "reduce-op"),
                    r.u32("a"),
                    r.u32("axis"),
                    r.u32("out"),
                )),
                case::COMPOSITE => C::Composite(tl::BatchComposite {
                    op: r.case_of("op", &cases::COMPOSITE_OPS, "composite-op"),
                    a: r.u32("a"),
                    b: r.u32("b"),
                    c: r.opt_u32("c"),
                    out_dtype: r.dtype("out-dtype"),
                    out: r.u32("out"),
                }),
                case::RECV_ASYNC => C::RecvAsync((
                    r.opt_u32("dir"),
                    r.u32("shape"),
                    r.dtype("dtype"),
                    r.u32("future"),
                )),
                case::WAIT => C::Wait((r.u32("future"), r.u32("out"))),
                case::DROP_TENSOR => C::DropTensor(r.u32("id")),
                case::DROP_FUTURE => C::DropFuture(r.u32("id")),
                other => {
                    r.unknown_case(other);
                    C::DropTensor(0)
                }
            };
            Some(r.finish(Call::Typed(call)))
        }

        /// A call of a batch: one of `batch-call`'s, or one only the bytes
        /// carry (a new `batch-call` case would change `tl.submit`'s type).
        #[derive(Debug)]
        enum Call {
            Typed(tl::BatchCall),
            /// `fill(shape, dtype, value, out)` (WIT 0.8.1).
            Fill((u32, $crate::runtime::bindings::algorithm::kernbench::sim::types::Dtype, f64, u32)),
        }

        /// `tl.submit`: the calls made in order.
        $($async)? fn $name(
            host: &mut $host,
            dirs: Vec<String>,
            shapes: Vec<Vec<u32>>,
            calls: Vec<tl::BatchCall>,
        ) -> Result<(), $crate::runtime::fail::Fail<tl::BatchError>> {
            make_calls(host, dirs, shapes, calls.into_iter().map(Call::Typed)) $($aw)*
        }

        $($async)? fn make_calls(
            host: &mut $host,
            dirs: Vec<String>,
            shapes: Vec<Vec<u32>>,
            calls: impl ExactSizeIterator<Item = Call>,
        ) -> Result<(), $crate::runtime::fail::Fail<tl::BatchError>> {
            host.guard
                .batched_calls(calls.len())
                .map_err(wasmtime::Error::from)?;
            let named = $crate::runtime::batch::Named {
                dirs: &dirs,
                shapes: &shapes,
            };
            for (index, call) in calls.enumerate() {
                let made = match call {
                    Call::Typed(call) => one_call(host, &named, call) $($aw)*,
                    Call::Fill(fill) => fill_call(host, &named, fill) $($aw)*,
                };
                if let Err(e) = made {
                    let (index, message) = $crate::runtime::batch::refusal(index, e)?;
                    let refused = tl::BatchError { index, message };
                    return Err($crate::runtime::fail::Fail::Raised(refused));
                }
            }
            Ok(())
        }

        $($async)? fn fill_call(
            host: &mut $host,
            named: &$crate::runtime::batch::Named<'_>,
            (shape, dtype, value, out): (u32, $crate::runtime::bindings::algorithm::kernbench::sim::types::Dtype, f64, u32),
        ) -> wasmtime::Result<()> {
            host.batch.tensors.vacant(out)?;
            let shape = named.shape_slice(shape)?;
            let r = host.fill_named(shape, dtype, value) $($aw)* ?;
            host.batch.tensors.bind(out, r.rep())?;
            Ok(())
        }

        $($async)? fn one_call(
            host: &mut $host,
            named: &$crate::runtime::batch::Named<'_>,
            call: tl::BatchCall,
        ) -> wasmtime::Result<()> {
            use tl::{BatchCall as C, Host as _};
            use wasmtime::component::Resource;
            let t = |h: &$host, id: u32| h.batch.tensors.get(id).map(Resource::new_borrow);
            // The id of the tensor the call makes, checked free before
            // the call is made and bound to its handle after.
            let out = match &call {
                C::Load((.., out))
                | C::Binary((.., out))
                | C::Scale((.., out))
                | C::Unary((.., out))
                | C::Cast((.., out))
                | C::Reduce((.., out))
                | C::Wait((_, out)) => Some(*out),
                C::Recv(r) => Some(r.out),
                C::Composite(c) => Some(c.out),
                _ => None,
            };
            if let Some(out) = out {
                host.batch.tensors.vacant(out)?;
            }
            let made = match call {
                C::Load((addr, shape, dtype, _)) => {
                    let shape = named.shape_slice(shape)?;
                    Some(host.load_named(addr, shape, dtype) $($aw)* ?)
                }
                C::Store((addr, value)) => {
                    let v = t(host, value)?;
                    host.store(addr, v) $($aw)* ?;
                    None
                }
                C::Send((dir, value)) => {
                    let v = t(host, value)?;
                    host.send_named(named.dir_str(dir)?, v) $($aw)* ?;
                    None
                }
                C::SendAddr((dir, addr, shape, dtype)) => {
                    let (dir, shape) = (named.dir(dir)?, named.shape(shape)?);
                    host.send_addr(dir, addr, shape, dtype) $($aw)* ?;
                    None
                }
                C::Recv(tl::BatchRecv { dir, shape, dtype, into, .. }) => {
                    let (dir, shape) = (named.any_dir_str(dir)?, named.shape_slice(shape)?);
                    Some(host.recv_named(dir, shape, dtype, into) $($aw)* ?)
                }
                C::Binary((op, a, b, _)) => {
                    let (a, b) = (t(host, a)?, t(host, b)?);
                    Some(host.binary(op, a, b) $($aw)* ?)
                }
                C::Scale((a, factor, _)) => {
                    let a = t(host, a)?;
                    Some(host.scale(a, factor) $($aw)* ?)
                }
                C::Unary((op, a, _)) => {
                    let a = t(host, a)?;
                    Some(host.unary(op, a) $($aw)* ?)
                }
                C::Cast((a, dtype, _)) => {
                    let a = t(host, a)?;
                    Some(host.cast(a, dtype) $($aw)* ?)
                }
                C::Reduce((op, a, axis, _)) => {
                    let a = t(host, a)?;
                    Some(host.reduce(op, a, axis) $($aw)* ?)
                }
                C::Composite(tl::BatchComposite { op, a, b, c, out_dtype, .. }) => {
                    let (a, b) = (t(host, a)?, t(host, b)?);
                    let c = c.map(|c| t(host, c)).transpose()?;
                    Some(host.composite(op, a, b, c, out_dtype) $($aw)* ?)
                }
                C::RecvAsync((dir, shape, dtype, fut)) => {
                    host.batch.futures.vacant(fut)?;
                    let (dir, shape) = (named.any_dir(dir)?, named.shape(shape)?);
                    let f = host.recv_async(dir, shape, dtype)?;
                    host.batch.futures.bind(fut, f.rep())?;
                    None
                }
                C::Wait((fut, _)) => {
                    let f = Resource::new_own(host.batch.futures.take(fut)?);
                    Some(host.wait(f) $($aw)* ?)
                }
                C::DropTensor(id) => {
                    let r = Resource::new_own(host.batch.tensors.take(id)?);
                    tl::HostTensor::drop(host, r)?;
                    None
                }
                C::DropFuture(id) => {
                    let f = Resource::new_own(host.batch.futures.take(id)?);
                    tl::HostRecvFuture::drop(host, f)?;
                    None
                }
            };
            if let (Some(out), Some(r)) = (out, made) {
                host.batch.tensors.bind(out, r.rep())?;
            }
            Ok(())
        }
    };
}
pub(crate) use batch_call_fn;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_bound_used_and_freed() {
        let mut ids = BatchIds::default();
        assert!(matches!(
            ids.tensors.get(3),
            Err(BatchIdError::NotLive { id: 3, .. })
        ));
        ids.tensors.bind(3, 41).unwrap();
        assert_eq!(ids.tensors.get(3).unwrap(), 41);
        let again = ids.tensors.bind(3, 42).unwrap_err();
        assert_eq!(
            again.to_string(),
            "tl.submit: tensor id 3 is still live (drop it before naming a new tensor with it)"
        );
        assert_eq!(ids.tensors.take(3).unwrap(), 41);
        assert!(ids.tensors.take(3).is_err());
        ids.tensors.bind(3, 43).unwrap();
        let far = ids.futures.vacant(MAX_BATCH_IDS).unwrap_err();
        assert_eq!(
            far.to_string(),
            "tl.submit: future id 65536 is not below 65536"
        );
    }
}
