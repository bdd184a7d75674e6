//! The byte form of a batch's calls (`tl.submit-encoded`, WIT 0.6.3),
//! read checked: a call is its case's index in `batch-call`, then its
//! fields in order — `u32` / `u64` as unsigned LEB128, `f64` as eight
//! little-endian bytes, an enum as its case's index byte, `option<T>` as
//! 0 or 1 followed by `T` (the layout `wit/kernbench.wit` documents).
//!
//! `tl.submit` hands the same calls over as a `list<batch-call>`, which
//! the kernel builds and the component model lowers in the guest and
//! lifts in the host element by element (~450 instructions a ring step on
//! each side). As bytes, the list crosses as one copy and the kernel
//! writes it as it goes; reading it here costs about what lifting did
//! (~100 instructions a call: the calls are built as `batch-call`s for
//! the one path both functions share). The bytes come from a guest, so
//! every read is checked: a call that cannot be read is refused by its
//! index and what is wrong, never a panic.
//!
//! The form (cases, LEB128, options, floats) is `kernbench_wire`'s, the
//! crate the Rust SDK writes with; this module owns the checked reading
//! of it and its errors. [`super::batch::batch_call_fn`] builds
//! each host's `tl::BatchCall` from it (each bindings module has its own
//! `BatchCall` type; the enums are the shared `types` interface's).

use super::bindings::algorithm::kernbench::sim::types::Dtype;
use kernbench_wire::{read_leb128, LebFault};

/// A call of a `tl.submit-encoded` batch that cannot be read. The index
/// is the call's place in the batch (what `batch-error.index` reports).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchBytesError {
    #[error(
        "tl.submit-encoded: case {case} names no call (the cases are 0 ..= {})",
        case::LAST
    )]
    UnknownCase { index: u32, case: u8 },
    #[error("tl.submit-encoded: the bytes end inside the call's {field}")]
    CutShort { index: u32, field: &'static str },
    #[error("tl.submit-encoded: the call's {field} is {value}, which is not {what}")]
    OutOfRange {
        index: u32,
        field: &'static str,
        value: u64,
        what: Expected,
    },
    #[error(
        "tl.submit-encoded: the call's {field} runs past {bits} bits (its LEB128 is too long)"
    )]
    TooLong {
        index: u32,
        field: &'static str,
        bits: u32,
    },
}

/// What a byte out of range should have been.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// A case of enum `kind`, which has `count` cases.
    Case { kind: &'static str, count: usize },
    /// An option's flag.
    Flag,
}

impl std::fmt::Display for Expected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expected::Case { kind, count } => write!(f, "a {kind} (0 ..= {})", count - 1),
            Expected::Flag => f.write_str("an option's 0 (none) or 1 (some)"),
        }
    }
}

impl BatchBytesError {
    /// The index of the call that cannot be read.
    pub fn index(&self) -> u32 {
        match *self {
            BatchBytesError::UnknownCase { index, .. }
            | BatchBytesError::CutShort { index, .. }
            | BatchBytesError::OutOfRange { index, .. }
            | BatchBytesError::TooLong { index, .. } => index,
        }
    }
}

/// The cases of `batch-call`, in the order of the WIT (a call's first
/// byte): the one definition, shared with the Rust SDK's writer.
pub use kernbench_wire::case;

/// `dtype`'s cases in declaration order: a byte is an index here, and
/// so is the host's [`crate::hw::dtype::Dtype::ALL`] (the conversions of
/// `runtime::kernel` index both).
pub(crate) const DTYPES: [Dtype; 10] = [
    Dtype::F16,
    Dtype::Bf16,
    Dtype::F32,
    Dtype::I32,
    Dtype::I8,
    Dtype::U8,
    Dtype::U32,
    Dtype::I64,
    Dtype::U64,
    Dtype::F64,
];

/// The `tl` enums' cases in declaration order, for one bindings module's
/// `tl` (each module has its own enum types): a byte is an index here.
macro_rules! tl_enum_cases {
    ($($tl:tt)*) => {
        use $($tl)* as tl;
        pub const BINOPS: [tl::Binop; 6] = [
            tl::Binop::Add,
            tl::Binop::Sub,
            tl::Binop::Mul,
            tl::Binop::Max,
            tl::Binop::Min,
            tl::Binop::Div,
        ];
        pub const UNARY_OPS: [tl::UnaryOp; 7] = [
            tl::UnaryOp::Neg,
            tl::UnaryOp::Abs,
            tl::UnaryOp::Exp,
            tl::UnaryOp::Log,
            tl::UnaryOp::Sqrt,
            tl::UnaryOp::Relu,
            tl::UnaryOp::Recip,
        ];
        pub const REDUCE_OPS: [tl::ReduceOp; 3] =
            [tl::ReduceOp::Sum, tl::ReduceOp::Max, tl::ReduceOp::Min];
        pub const COMPOSITE_OPS: [tl::CompositeOp; 5] = [
            tl::CompositeOp::Gemm,
            tl::CompositeOp::GemmAcc,
            tl::CompositeOp::GemmBias,
            tl::CompositeOp::GemmRelu,
            tl::CompositeOp::GemmBiasRelu,
        ];

        #[cfg(test)]
        mod tests {
            /// Each enum's byte is its case's place in the WIT (bindgen's
            /// enums are `repr(u8)` in declaration order), and the WIT
            /// lists as many cases as the tables.
            #[test]
            fn an_enum_s_byte_is_its_place_in_the_wit() {
                fn check<T: Copy + Into<usize>>(name: &str, cases: &[T]) {
                    for (i, c) in cases.iter().enumerate() {
                        assert_eq!((*c).into(), i, "{name}");
                    }
                    super::super::tests::wit_enum_has(name, cases.len());
                }
                check("binop", &super::BINOPS.map(|c| c as usize));
                check("unary-op", &super::UNARY_OPS.map(|c| c as usize));
                check("reduce-op", &super::REDUCE_OPS.map(|c| c as usize));
                check("composite-op", &super::COMPOSITE_OPS.map(|c| c as usize));
            }
        }
    };
}

/// The `tl` enums of the in-step kernel host's bindings.
pub mod live_cases {
    tl_enum_cases!(crate::runtime::bindings::algorithm::kernbench::sim::tl);
}

/// The `tl` enums of the recording kernel host's bindings.
pub mod eager_cases {
    tl_enum_cases!(crate::runtime::bindings::algorithm_eager::kernbench::sim::tl);
}

/// Keep `e` in `bad` unless a failure is there already. Apart from the
/// reader (see [`BatchReader::fail`]).
#[cold]
#[inline(never)]
fn keep_first(bad: &mut Option<BatchBytesError>, e: BatchBytesError) {
    bad.get_or_insert(e);
}

/// Reads the calls of a batch, one at a time: [`BatchReader::next_case`]
/// starts a call, the typed reads take its fields (each named, for the
/// error), [`BatchReader::finish`] says whether the call was read whole.
///
/// A read that fails keeps the first failure of the call and gives 0 (the
/// reads after it give 0 too, the rest of the bytes dropped): the fields
/// are read without a branch on an error each, and the call is checked
/// once.
pub struct BatchReader<'a> {
    rest: &'a [u8],
    /// The calls started so far (the one being read is the last).
    calls: u32,
    /// The first failure of the call being read.
    bad: Option<BatchBytesError>,
}

impl<'a> BatchReader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        BatchReader {
            rest: bytes,
            calls: 0,
            bad: None,
        }
    }

    /// The index of the call being read (0 before the first).
    fn index(&self) -> u32 {
        self.calls.saturating_sub(1)
    }

    /// The case byte of the next call; `None` when the bytes are all read
    /// (or a call could not be).
    #[inline]
    pub fn next_case(&mut self) -> Option<u8> {
        let (&case, rest) = self.rest.split_first()?;
        self.calls += 1;
        self.rest = rest;
        Some(case)
    }

    /// The call just read, or why it cannot be.
    #[inline]
    pub fn finish<T>(&mut self, call: T) -> Result<T, BatchBytesError> {
        match self.bad.take() {
            None => Ok(call),
            Some(e) => Err(e),
        }
    }

    /// Mark the call unreadable with `e` (the first failure is kept) and
    /// drop the rest of the bytes. The error is made apart, from the
    /// `bad` field alone: a reader whose address escaped into a call would
    /// be kept in memory, its position stored after every byte (~100
    /// instructions a call where the fields are read in registers).
    #[inline(always)]
    fn fail(&mut self, e: impl FnOnce(u32) -> BatchBytesError) {
        let e = e(self.index());
        keep_first(&mut self.bad, e);
        self.rest = &[];
    }

    /// A case byte that names no case.
    #[cold]
    pub fn unknown_case(&mut self, case: u8) {
        self.fail(|index| BatchBytesError::UnknownCase { index, case });
    }

    #[cold]
    fn cut_short(&mut self, field: &'static str) {
        self.fail(|index| BatchBytesError::CutShort { index, field });
    }

    #[inline(always)]
    fn byte(&mut self, field: &'static str) -> u8 {
        match self.rest.split_first() {
            Some((&b, rest)) => {
                self.rest = rest;
                b
            }
            None => {
                self.cut_short(field);
                0
            }
        }
    }

    /// An unsigned LEB128 of at most `bits` bits: one byte inline, longer
    /// ones read apart (by value, see [`BatchReader::fail`]).
    #[inline(always)]
    fn leb128(&mut self, field: &'static str, bits: u32) -> u64 {
        if let Some((&b, rest)) = self.rest.split_first() {
            if b < 0x80 {
                self.rest = rest;
                return b.into();
            }
        }
        match read_leb128(self.rest, bits) {
            Ok((v, n)) => {
                self.rest = &self.rest[n..];
                v
            }
            Err(LebFault::CutShort) => {
                self.cut_short(field);
                0
            }
            Err(LebFault::TooLong) => {
                self.fail(|index| BatchBytesError::TooLong { index, field, bits });
                0
            }
        }
    }

    #[inline(always)]
    pub fn u32(&mut self, field: &'static str) -> u32 {
        self.leb128(field, 32) as u32
    }

    #[inline(always)]
    pub fn u64(&mut self, field: &'static str) -> u64 {
        self.leb128(field, 64)
    }

    pub fn f64(&mut self, field: &'static str) -> f64 {
        match self.rest.split_first_chunk::<8>() {
            Some((head, rest)) => {
                self.rest = rest;
                f64::from_le_bytes(*head)
            }
            None => {
                self.cut_short(field);
                0.0
            }
        }
    }

    /// `option<u32>`: 0, or 1 and the value.
    #[inline(always)]
    pub fn opt_u32(&mut self, field: &'static str) -> Option<u32> {
        self.flag(field).then(|| self.u32(field))
    }

    /// `option<u64>`: 0, or 1 and the value.
    #[inline(always)]
    pub fn opt_u64(&mut self, field: &'static str) -> Option<u64> {
        self.flag(field).then(|| self.u64(field))
    }

    #[inline(always)]
    fn flag(&mut self, field: &'static str) -> bool {
        match self.byte(field) {
            0 => false,
            1 => true,
            b => {
                self.out_of_range(field, b, Expected::Flag);
                false
            }
        }
    }

    #[cold]
    fn out_of_range(&mut self, field: &'static str, value: u8, what: Expected) {
        self.fail(|index| BatchBytesError::OutOfRange {
            index,
            field,
            value: value.into(),
            what,
        });
    }

    /// An enum's case by its index byte (`cases` in declaration order,
    /// not empty; `kind` names the enum for the error).
    #[inline(always)]
    pub fn case_of<T: Copy>(&mut self, field: &'static str, cases: &[T], kind: &'static str) -> T {
        let b = self.byte(field);
        match cases.get(usize::from(b)) {
            Some(&c) => c,
            None => {
                let count = cases.len();
                self.out_of_range(field, b, Expected::Case { kind, count });
                cases[0]
            }
        }
    }

    #[inline(always)]
    pub fn dtype(&mut self, field: &'static str) -> Dtype {
        self.case_of(field, &DTYPES, "dtype")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `enum <name>` in the WIT lists `n` cases.
    pub(super) fn wit_enum_has(name: &str, n: usize) {
        let wit = include_str!("../../../wit/kernbench.wit");
        let line = wit
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("enum {name} {{")))
            .unwrap_or_else(|| panic!("enum {name} in the WIT"));
        assert_eq!(line.matches(',').count() + 1, n, "{line}");
    }

    #[test]
    fn a_dtype_s_byte_is_its_place_in_the_wit() {
        for (i, d) in DTYPES.iter().enumerate() {
            assert_eq!(*d as usize, i);
            // The host's dtype of the same index is the same case.
            let hw = crate::hw::dtype::Dtype::ALL[i];
            let wit = format!("{d:?}");
            assert_eq!(wit.trim_start_matches("Dtype::"), format!("{hw:?}"));
        }
        assert_eq!(DTYPES.len(), crate::hw::dtype::Dtype::ALL.len());
        wit_enum_has("dtype", DTYPES.len());
    }

    fn leb(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
        out
    }

    /// Read one field with `read`, as a call of its own: the value, or
    /// why it cannot be read.
    fn field<T>(
        bytes: &[u8],
        read: impl FnOnce(&mut BatchReader<'_>) -> T,
    ) -> Result<T, BatchBytesError> {
        let mut r = BatchReader::new(bytes);
        let v = read(&mut r);
        r.finish(v)
    }

    #[test]
    fn varints_are_read_at_their_edges_and_refused_past_them() {
        for v in [0, 1, 0x7f, 0x80, 0x3fff, 0x4000, u64::from(u32::MAX)] {
            let bytes = leb(v);
            let mut r = BatchReader::new(&bytes);
            assert_eq!(r.u32("id"), v as u32);
            assert!(r.rest.is_empty() && r.finish(()).is_ok());
        }
        for v in [u64::from(u32::MAX) + 1, u64::MAX] {
            let bytes = leb(v);
            let e = field(&bytes, |r| r.u32("id")).unwrap_err();
            assert_eq!(
                e.to_string(),
                "tl.submit-encoded: the call's id runs past 32 bits (its LEB128 is too long)"
            );
            assert_eq!(field(&bytes, |r| r.u64("addr")), Ok(v));
        }
        // Eleven bytes of continuation is past 64 bits.
        let long = [0xffu8; 10].iter().copied().chain([1]).collect::<Vec<_>>();
        let e = field(&long, |r| r.u64("addr")).unwrap_err();
        assert!(e.to_string().contains("runs past 64 bits"), "{e}");
        // A varint cut short names its field.
        assert_eq!(
            field(&[0x80], |r| r.u32("out")),
            Err(BatchBytesError::CutShort {
                index: 0,
                field: "out"
            })
        );
    }

    #[test]
    fn calls_are_counted_and_the_first_failure_of_a_call_is_named() {
        let bytes = [case::DROP_TENSOR, 3, case::SEND, 0, 9, 77];
        let mut r = BatchReader::new(&bytes);
        assert_eq!(r.next_case(), Some(case::DROP_TENSOR));
        assert_eq!((r.index(), r.u32("id")), (0, 3));
        assert!(r.finish(()).is_ok());
        assert_eq!(r.next_case(), Some(case::SEND));
        assert_eq!((r.u32("dir"), r.u32("value")), (0, 9));
        assert!(r.finish(()).is_ok());
        assert_eq!(r.next_case(), Some(77));
        r.unknown_case(77);
        let e = r.finish(()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "tl.submit-encoded: case 77 names no call (the cases are 0 ..= 15)"
        );
        assert_eq!(e.index(), 2);
        assert_eq!(r.next_case(), None);

        assert_eq!(
            field(&[10], |r| r.dtype("dtype")).unwrap_err().to_string(),
            "tl.submit-encoded: the call's dtype is 10, which is not a dtype (0 ..= 9)"
        );
        let e = field(&[2], |r| r.opt_u32("dir")).unwrap_err();
        assert!(e.to_string().contains("an option's 0 (none) or 1 (some)"));
        assert_eq!(
            field(&[1, 5, 0], |r| (r.opt_u32("dir"), r.opt_u64("into"))),
            Ok((Some(5), None))
        );
        assert!(matches!(
            field(&[1, 2, 3], |r| r.f64("factor")),
            Err(BatchBytesError::CutShort { .. })
        ));
        assert_eq!(field(&1.5f64.to_le_bytes(), |r| r.f64("factor")), Ok(1.5));
        // The first failure is the one named; the rest of the bytes are
        // dropped (no call after it is read).
        let mut r = BatchReader::new(&[12, 0x80]);
        assert_eq!((r.dtype("dtype"), r.u32("out")), (Dtype::F16, 0));
        assert!(r
            .finish(())
            .unwrap_err()
            .to_string()
            .contains("dtype is 12"));
        assert_eq!(r.next_case(), None);
    }
}
