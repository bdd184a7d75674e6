//! The byte forms KernBench's host and its Rust guest SDK share, defined
//! once: the calls of a `tl.submit-encoded` batch (WIT 0.6.3), which the
//! SDK writes and the host reads, and the primitives the host's recorded
//! command lists are written with too.
//!
//! A batch call is its case's index in `batch-call` ([`case`]), then its
//! fields in order: `u32` / `u64` as unsigned LEB128, `f64` as eight
//! little-endian bytes, an enum as its case's index byte, `option<T>` as
//! 0, or 1 and `T` (the layout `wit/kernbench.wit` documents).
//!
//! No dependencies and no wasm: the guest SDK builds it for
//! `wasm32-wasip2`, the host natively, and the host's tests read back
//! what the SDK writes.

/// The case of each call in `batch-call`, in the WIT's order (a call's
/// first byte), then the calls only the bytes carry.
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
    /// `fill(shape, dtype, value, out)` (WIT 0.8.1): a case of the bytes
    /// only, past `batch-call`'s last (a new `batch-call` case would
    /// change `tl.submit`'s type for every guest).
    pub const FILL: u8 = 15;
    /// The last case.
    pub const LAST: u8 = FILL;
}

/// Appends fields to a byte list.
pub struct Writer<'a>(pub &'a mut Vec<u8>);

impl Writer<'_> {
    /// `v` as unsigned LEB128.
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

    /// One byte: a case or an enum's index.
    #[inline]
    pub fn byte(&mut self, b: u8) -> &mut Self {
        self.0.push(b);
        self
    }

    /// `v` as its eight little-endian bytes.
    #[inline]
    pub fn f64(&mut self, v: f64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// `option<u32>`: 0, or 1 and the value.
    #[inline]
    pub fn opt_u32(&mut self, v: Option<u32>) -> &mut Self {
        match v {
            None => self.byte(0),
            Some(v) => self.byte(1).u32(v),
        }
    }

    /// `option<u64>`: 0, or 1 and the value.
    #[inline]
    pub fn opt_u64(&mut self, v: Option<u64>) -> &mut Self {
        match v {
            None => self.byte(0),
            Some(v) => self.byte(1).u64(v),
        }
    }
}

/// Why a LEB128 cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LebFault {
    /// The bytes end inside it.
    CutShort,
    /// It runs past the bits its field has.
    TooLong,
}

/// The unsigned LEB128 of at most `bits` bits (1 ..= 64) at the start of
/// `bytes`, and how many bytes it takes; checked, for bytes from a guest.
#[inline(never)]
pub fn read_leb128(bytes: &[u8], bits: u32) -> Result<(u64, usize), LebFault> {
    let (mut v, mut shift) = (0u64, 0);
    for (i, &b) in bytes.iter().enumerate() {
        let part = u64::from(b & 0x7f);
        // The bits this byte brings past `bits` must be zero.
        if shift >= bits || (shift + 7 > bits && part >> (bits - shift) != 0) {
            return Err(LebFault::TooLong);
        }
        v |= part << shift;
        if b < 0x80 {
            return Ok((v, i + 1));
        }
        shift += 7;
    }
    Err(LebFault::CutShort)
}

/// The unsigned LEB128 at the start of `bytes` and the bytes after it,
/// unchecked beyond what a slice checks: for bytes this process wrote
/// with [`Writer`] (a recorded command list). `None` when the bytes end
/// inside it.
#[inline]
pub fn read_leb128_trusted(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let (&b, mut rest) = bytes.split_first()?;
    if b < 0x80 {
        return Some((b.into(), rest));
    }
    let (mut v, mut shift) = (u64::from(b & 0x7f), 7);
    loop {
        let (&b, tail) = rest.split_first()?;
        rest = tail;
        v |= u64::from(b & 0x7f) << (shift & 63);
        if b < 0x80 {
            return Some((v, rest));
        }
        shift += 7;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EDGES: [u64; 8] = [0, 1, 0x7f, 0x80, 0x3fff, 0x4000, u32::MAX as u64, u64::MAX];

    #[test]
    fn leb128_round_trips_at_its_edges_both_ways() {
        for v in EDGES {
            let mut out = Vec::new();
            Writer(&mut out).u64(v);
            assert_eq!(read_leb128(&out, 64), Ok((v, out.len())));
            assert_eq!(read_leb128_trusted(&out), Some((v, &[][..])));
            assert_eq!(
                out.len(),
                (64 - v.leading_zeros()).max(1).div_ceil(7) as usize
            );
        }
    }

    #[test]
    fn a_leb128_past_its_bits_or_cut_short_is_named() {
        let mut out = Vec::new();
        Writer(&mut out).u64(u32::MAX as u64 + 1);
        assert_eq!(read_leb128(&out, 32), Err(LebFault::TooLong));
        assert_eq!(
            read_leb128(&out[..out.len() - 1], 64),
            Err(LebFault::CutShort)
        );
        assert_eq!(read_leb128_trusted(&out[..out.len() - 1]), None);
        // Eleven bytes can never be a u64, whatever they hold.
        assert_eq!(read_leb128(&[0x80; 11], 64), Err(LebFault::TooLong));
        assert_eq!(read_leb128(&[], 64), Err(LebFault::CutShort));
    }

    #[test]
    fn options_and_floats_are_written_as_the_wit_documents() {
        let mut out = Vec::new();
        Writer(&mut out)
            .opt_u32(None)
            .opt_u32(Some(300))
            .opt_u64(Some(1))
            .f64(1.5)
            .byte(case::LAST);
        let mut want = vec![0, 1, 0xac, 0x02, 1, 1];
        want.extend_from_slice(&1.5f64.to_le_bytes());
        want.push(15); // `fill`, the last case since 0.8.1
        assert_eq!(out, want);
    }
}
