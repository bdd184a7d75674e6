//! The bytes of a recorded command list ([`super::commands::CommandList`]):
//! a tag byte, then the command's fields in order — integers as LEB128
//! varints (a ring step's ids and indices take a byte each), the
//! operation and dtype enums as their index byte, an optional index as 0
//! or 1 + the index, a scale factor as its 8 little-endian bytes.
//!
//! Every rank's list is alive at once (recorded before the first command
//! is simulated), so the form must be small; and the replay decodes every
//! command of every rank on the engine thread, so it must be cheap: this
//! is a `match` and a byte read per field where serde's visitors (postcard)
//! cost ~90 instructions a command.

use super::commands::Command;
use crate::hw::dtype::{BinOp, Dtype};
use crate::hw::gemm_ops::CompositeOp;
use crate::hw::math_ops::{ReduceOp, UnaryOp};

/// Append `c`'s encoding to `out`.
pub fn encode(c: &Command, out: &mut Vec<u8>) {
    let mut w = Writer(kernbench_wire::Writer(out));
    match *c {
        Command::Load {
            addr,
            shape,
            dtype,
            out,
        } => {
            w.tag(Tag::Load);
            w.u64(addr);
            w.u32(shape);
            w.byte(dtype as u8);
            w.u32(out);
        }
        Command::Store { addr, value } => {
            w.tag(Tag::Store);
            w.u64(addr);
            w.u32(value);
        }
        Command::Send { dir, value } => {
            w.tag(Tag::Send);
            w.u32(dir);
            w.u32(value);
        }
        Command::SendAddr {
            dir,
            addr,
            shape,
            dtype,
        } => {
            w.tag(Tag::SendAddr);
            w.u32(dir);
            w.u64(addr);
            w.u32(shape);
            w.byte(dtype as u8);
        }
        Command::Recv {
            dir,
            shape,
            dtype,
            out,
        } => {
            w.tag(Tag::Recv);
            w.opt(dir);
            w.u32(shape);
            w.byte(dtype as u8);
            w.u32(out);
        }
        Command::RecvInto {
            dir,
            shape,
            dtype,
            dst,
            out,
        } => {
            w.tag(Tag::RecvInto);
            w.opt(dir);
            w.u32(shape);
            w.byte(dtype as u8);
            w.u64(dst);
            w.u32(out);
        }
        Command::Binary { op, a, b, out } => {
            w.tag(Tag::Binary);
            w.byte(op as u8);
            w.u32(a);
            w.u32(b);
            w.u32(out);
        }
        Command::Scale { a, factor, out } => {
            w.tag(Tag::Scale);
            w.u32(a);
            w.f64(factor);
            w.u32(out);
        }
        Command::Fill {
            shape,
            dtype,
            value,
            out,
        } => {
            w.tag(Tag::Fill);
            w.u32(shape);
            w.byte(dtype as u8);
            w.f64(value);
            w.u32(out);
        }
        Command::Unary { op, a, out } => {
            w.tag(Tag::Unary);
            w.byte(op as u8);
            w.u32(a);
            w.u32(out);
        }
        Command::Cast { a, dtype, out } => {
            w.tag(Tag::Cast);
            w.u32(a);
            w.byte(dtype as u8);
            w.u32(out);
        }
        Command::Reduce { op, a, axis, out } => {
            w.tag(Tag::Reduce);
            w.byte(op as u8);
            w.u32(a);
            w.u32(axis);
            w.u32(out);
        }
        Command::Composite {
            op,
            a,
            b,
            c,
            dtype,
            out,
        } => {
            w.tag(Tag::Composite);
            w.byte(op as u8);
            w.u32(a);
            w.u32(b);
            w.opt(c);
            w.byte(dtype as u8);
            w.u32(out);
        }
        Command::RecvAsync {
            dir,
            shape,
            dtype,
            fut,
        } => {
            w.tag(Tag::RecvAsync);
            w.opt(dir);
            w.u32(shape);
            w.byte(dtype as u8);
            w.u32(fut);
        }
        Command::Wait { fut, out } => {
            w.tag(Tag::Wait);
            w.u32(fut);
            w.u32(out);
        }
        Command::Drop(id) => {
            w.tag(Tag::Drop);
            w.u32(id);
        }
    }
}

/// The command at the start of `bytes` (made by [`encode`]) and the bytes
/// after it.
#[inline]
pub fn decode(bytes: &[u8]) -> (Command, &[u8]) {
    let mut r = Reader(bytes);
    let c = match r.byte() {
        t if t == Tag::Send as u8 => Command::Send {
            dir: r.u32(),
            value: r.u32(),
        },
        t if t == Tag::Recv as u8 => Command::Recv {
            dir: r.opt(),
            shape: r.u32(),
            dtype: r.dtype(),
            out: r.u32(),
        },
        t if t == Tag::Binary as u8 => Command::Binary {
            op: BinOp::ALL[r.byte() as usize],
            a: r.u32(),
            b: r.u32(),
            out: r.u32(),
        },
        t if t == Tag::Drop as u8 => Command::Drop(r.u32()),
        t if t == Tag::Load as u8 => Command::Load {
            addr: r.u64(),
            shape: r.u32(),
            dtype: r.dtype(),
            out: r.u32(),
        },
        t if t == Tag::Store as u8 => Command::Store {
            addr: r.u64(),
            value: r.u32(),
        },
        t if t == Tag::SendAddr as u8 => Command::SendAddr {
            dir: r.u32(),
            addr: r.u64(),
            shape: r.u32(),
            dtype: r.dtype(),
        },
        t if t == Tag::RecvInto as u8 => Command::RecvInto {
            dir: r.opt(),
            shape: r.u32(),
            dtype: r.dtype(),
            dst: r.u64(),
            out: r.u32(),
        },
        t if t == Tag::Scale as u8 => Command::Scale {
            a: r.u32(),
            factor: f64::from_le_bytes(r.take::<8>()),
            out: r.u32(),
        },
        t if t == Tag::Fill as u8 => Command::Fill {
            shape: r.u32(),
            dtype: r.dtype(),
            value: f64::from_le_bytes(r.take::<8>()),
            out: r.u32(),
        },
        t if t == Tag::Unary as u8 => Command::Unary {
            op: UnaryOp::ALL[r.byte() as usize],
            a: r.u32(),
            out: r.u32(),
        },
        t if t == Tag::Cast as u8 => Command::Cast {
            a: r.u32(),
            dtype: r.dtype(),
            out: r.u32(),
        },
        t if t == Tag::Reduce as u8 => Command::Reduce {
            op: ReduceOp::ALL[r.byte() as usize],
            a: r.u32(),
            axis: r.u32(),
            out: r.u32(),
        },
        t if t == Tag::Composite as u8 => Command::Composite {
            op: CompositeOp::ALL[r.byte() as usize],
            a: r.u32(),
            b: r.u32(),
            c: r.opt(),
            dtype: r.dtype(),
            out: r.u32(),
        },
        t if t == Tag::RecvAsync as u8 => Command::RecvAsync {
            dir: r.opt(),
            shape: r.u32(),
            dtype: r.dtype(),
            fut: r.u32(),
        },
        t if t == Tag::Wait as u8 => Command::Wait {
            fut: r.u32(),
            out: r.u32(),
        },
        t => unreachable!("command tag {t}: the list decodes only what it encoded"),
    };
    (c, r.0)
}

#[derive(Clone, Copy)]
enum Tag {
    Load,
    Store,
    Send,
    SendAddr,
    Recv,
    RecvInto,
    Binary,
    Scale,
    Unary,
    Fill,
    Cast,
    Reduce,
    Composite,
    RecvAsync,
    Wait,
    Drop,
}

/// The list's writer: `kernbench_wire`'s LEB128 and floats, with a tag
/// and a compact option of its own.
struct Writer<'a>(kernbench_wire::Writer<'a>);

impl Writer<'_> {
    fn tag(&mut self, t: Tag) {
        self.0.byte(t as u8);
    }

    fn byte(&mut self, b: u8) {
        self.0.byte(b);
    }

    fn f64(&mut self, v: f64) {
        self.0.f64(v);
    }

    fn u64(&mut self, v: u64) {
        self.0.u64(v);
    }

    fn u32(&mut self, v: u32) {
        self.0.u32(v);
    }

    /// An optional index in one varint: 0 for none, else the index + 1.
    fn opt(&mut self, v: Option<u32>) {
        self.u64(v.map_or(0, |v| u64::from(v) + 1));
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    #[inline]
    fn byte(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().expect("a whole command");
        self.0 = rest;
        b
    }

    #[inline]
    fn u64(&mut self) -> u64 {
        let (v, rest) = kernbench_wire::read_leb128_trusted(self.0).expect("a whole command");
        self.0 = rest;
        v
    }

    #[inline]
    fn u32(&mut self) -> u32 {
        self.u64() as u32
    }

    #[inline]
    fn opt(&mut self) -> Option<u32> {
        self.u64().checked_sub(1).map(|v| v as u32)
    }

    #[inline]
    fn dtype(&mut self) -> Dtype {
        Dtype::ALL[self.byte() as usize]
    }

    fn take<const N: usize>(&mut self) -> [u8; N] {
        let (head, rest) = self.0.split_first_chunk::<N>().expect("a whole command");
        self.0 = rest;
        *head
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each enum's byte is its index in its `ALL` (what `decode` reads).
    #[test]
    fn an_enum_s_byte_is_its_place_in_all() {
        for (i, d) in Dtype::ALL.iter().enumerate() {
            assert_eq!(*d as usize, i);
        }
        for (i, o) in BinOp::ALL.iter().enumerate() {
            assert_eq!(*o as usize, i);
        }
        for (i, o) in UnaryOp::ALL.iter().enumerate() {
            assert_eq!(*o as usize, i);
        }
        for (i, o) in ReduceOp::ALL.iter().enumerate() {
            assert_eq!(*o as usize, i);
        }
        for (i, o) in CompositeOp::ALL.iter().enumerate() {
            assert_eq!(*o as usize, i);
        }
    }

    /// Varints at their edges come back.
    #[test]
    fn varints_round_trip_at_their_edges() {
        for v in [0, 1, 0x7f, 0x80, 0x3fff, 0x4000, u32::MAX as u64, u64::MAX] {
            let mut out = Vec::new();
            Writer(kernbench_wire::Writer(&mut out)).u64(v);
            let mut r = Reader(&out);
            assert_eq!(r.u64(), v);
            assert!(r.0.is_empty());
        }
    }
}
