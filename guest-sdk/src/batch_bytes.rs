//! The bytes of a batch of `tl` calls, as `tl.submit-encoded` (WIT 0.6.3)
//! reads them: a call is its case's index in `batch-call`, then its fields
//! in order — `u32` / `u64` as unsigned LEB128, `f64` as eight
//! little-endian bytes, an enum as its case's index, an option as 0, or 1
//! and the value. The Rust SDK's batches (`BatchTl`) are written with it;
//! it has no wasm in it, so the host's tests read what it writes.

use crate::{BinOp, CompositeOp, Dtype, ReduceOp, UnaryOp};

/// The case of each call in `batch-call` (its first byte).
pub mod case {
    pub const LOAD: u8 = 0;
    pub const STORE: u8 = 1;
    pub const SEND: u8 = 2;
    pub const SEND_ADDR: u8 = 3;
    pub const RECV: u8 = 4;
    pub const BINARY: u8 = 5;
    pub const SCALE: u8 = 6;
    pub const UNARY: u8 = 7;
    pub const CAST: u8 = 8;
    pub const REDUCE: u8 = 9;
    pub const COMPOSITE: u8 = 10;
    pub const RECV_ASYNC: u8 = 11;
    pub const WAIT: u8 = 12;
    pub const DROP_TENSOR: u8 = 13;
    pub const DROP_FUTURE: u8 = 14;
}

/// Appends one call's fields to a batch. The SDK's enums list their cases
/// in the WIT's order, so a case's index is its discriminant (the host's
/// tests read every case back).
pub struct Fields<'a>(pub &'a mut Vec<u8>);

impl Fields<'_> {
    #[inline]
    pub fn u64(&mut self, mut v: u64) -> &mut Self {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
        self
    }
    #[inline]
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.u64(v.into())
    }
    #[inline]
    pub fn byte(&mut self, b: u8) -> &mut Self {
        self.0.push(b);
        self
    }
    #[inline]
    pub fn dtype(&mut self, d: Dtype) -> &mut Self {
        self.byte(d as u8)
    }
    #[inline]
    pub fn binop(&mut self, op: BinOp) -> &mut Self {
        self.byte(op as u8)
    }
    #[inline]
    pub fn unary_op(&mut self, op: UnaryOp) -> &mut Self {
        self.byte(op as u8)
    }
    #[inline]
    pub fn reduce_op(&mut self, op: ReduceOp) -> &mut Self {
        self.byte(op as u8)
    }
    #[inline]
    pub fn composite_op(&mut self, op: CompositeOp) -> &mut Self {
        self.byte(op as u8)
    }
    #[inline]
    pub fn f64(&mut self, v: f64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    #[inline]
    pub fn opt_u32(&mut self, v: Option<u32>) -> &mut Self {
        match v {
            None => self.byte(0),
            Some(v) => self.byte(1).u32(v),
        }
    }
    #[inline]
    pub fn opt_u64(&mut self, v: Option<u64>) -> &mut Self {
        match v {
            None => self.byte(0),
            Some(v) => self.byte(1).u64(v),
        }
    }
}
