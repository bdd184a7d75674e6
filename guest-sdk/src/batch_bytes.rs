//! The bytes of a batch of `tl` calls, as `tl.submit-encoded` (WIT 0.6.3)
//! reads them, written with the SDK's types: the form itself (the cases,
//! LEB128 fields, options, floats) is `kernbench_wire`'s, which the host
//! reads with. The Rust SDK's batches (`BatchTl`) are written with it;
//! it has no wasm in it, so the host's tests read what it writes.

use crate::{BinOp, CompositeOp, Dtype, ReduceOp, UnaryOp};
pub use kernbench_wire::case;
use kernbench_wire::Writer;

/// Appends one call's fields to a batch. The SDK's enums list their cases
/// in the WIT's order, so a case's index is its discriminant (the host's
/// tests read every case back).
pub struct Fields<'a>(pub &'a mut Vec<u8>);

impl Fields<'_> {
    #[inline]
    fn w(&mut self) -> Writer<'_> {
        Writer(self.0)
    }
    #[inline]
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.w().u64(v);
        self
    }
    #[inline]
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.w().u32(v);
        self
    }
    #[inline]
    pub fn byte(&mut self, b: u8) -> &mut Self {
        self.w().byte(b);
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
        self.w().f64(v);
        self
    }
    #[inline]
    pub fn opt_u32(&mut self, v: Option<u32>) -> &mut Self {
        self.w().opt_u32(v);
        self
    }
    #[inline]
    pub fn opt_u64(&mut self, v: Option<u64>) -> &mut Self {
        self.w().opt_u64(v);
        self
    }
}
