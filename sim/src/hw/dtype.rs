//! Tensor element types and element-wise math on raw little-endian bytes
//! (f16/bf16 via `half`'s slice conversions, computed in f32 and rounded
//! once, which is exact rounding for add/sub/mul/max/min; each op is one
//! tight loop over slices, which the compiler vectorises).

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

// Encoded tensors are little-endian; so is every host this builds for.
#[cfg(not(target_endian = "little"))]
compile_error!("the memory store holds little-endian bytes: build on a little-endian host");
use ndarray::{ArrayView1, ArrayViewMut1, Zip};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Dtype {
    F16,
    Bf16,
    F32,
    I32,
    I8,
    U8,
    U32,
    I64,
    U64,
    F64,
}

/// Element-wise binary operations of the MATH unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Max,
    Min,
    /// `a / b` (integers: truncating, and 0 where `b` is 0).
    Div,
}

impl BinOp {
    /// Every BinOp, in declaration order (an element's index is its
    /// discriminant: the recorded command list stores it as a byte).
    pub const ALL: [BinOp; 6] = [
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Max,
        BinOp::Min,
        BinOp::Div,
    ];

    /// The name as the WIT spells it.
    pub const fn name(self) -> &'static str {
        match self {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "mul",
            BinOp::Max => "max",
            BinOp::Min => "min",
            BinOp::Div => "div",
        }
    }
}

impl Dtype {
    /// Every dtype, in declaration order (an element's index is its
    /// discriminant: the recorded command list stores it as a byte).
    pub const ALL: [Dtype; 10] = [
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

    pub const fn itemsize(self) -> u64 {
        match self {
            Dtype::I8 | Dtype::U8 => 1,
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::F32 | Dtype::I32 | Dtype::U32 => 4,
            Dtype::I64 | Dtype::U64 | Dtype::F64 => 8,
        }
    }

    /// Whether the dtype holds integers (its math wraps, its division
    /// truncates, its encoding rounds and saturates).
    pub const fn is_integer(self) -> bool {
        !matches!(self, Dtype::F16 | Dtype::Bf16 | Dtype::F32 | Dtype::F64)
    }

    /// Bytes of a tensor of `shape` in this dtype (checked: a count that
    /// does not fit in 64 bits is an error, never a wrapped number).
    pub fn nbytes(self, shape: &[u32]) -> Result<u64, crate::units::SizeOverflow> {
        crate::units::tensor_size(shape, self.itemsize()).map(|(_, b)| b)
    }

    pub const fn name(self) -> &'static str {
        match self {
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
            Dtype::F32 => "f32",
            Dtype::I32 => "i32",
            Dtype::I8 => "i8",
            Dtype::U8 => "u8",
            Dtype::U32 => "u32",
            Dtype::I64 => "i64",
            Dtype::U64 => "u64",
            Dtype::F64 => "f64",
        }
    }

    /// Decode to f64: exact for every dtype but i64 / u64, whose values
    /// past 2^53 round to the nearest f64.
    pub fn to_f64(self, bytes: &[u8]) -> Vec<f64> {
        let n = bytes.len() / self.itemsize() as usize;
        let mut out = vec![0f64; n];
        match self {
            Dtype::F16 => elements::<f16>(bytes).convert_to_f64_slice(&mut out),
            Dtype::Bf16 => elements::<bf16>(bytes).convert_to_f64_slice(&mut out),
            Dtype::F32 => {
                for (o, c) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                    *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64;
                }
            }
            Dtype::I32 => widen::<i32>(bytes, &mut out, |v| v as f64),
            Dtype::I8 => widen::<i8>(bytes, &mut out, |v| v as f64),
            Dtype::U8 => widen::<u8>(bytes, &mut out, |v| v as f64),
            Dtype::U32 => widen::<u32>(bytes, &mut out, |v| v as f64),
            Dtype::I64 => widen::<i64>(bytes, &mut out, |v| v as f64),
            Dtype::U64 => widen::<u64>(bytes, &mut out, |v| v as f64),
            Dtype::F64 => widen::<f64>(bytes, &mut out, |v| v),
        }
        out
    }

    /// Encode from f64, rounding to nearest-even once (integers: rounded
    /// half away from zero and saturated, NaN to 0). f16/bf16 go through f32 rounded *to odd*, then `half`'s
    /// vectorised f32 conversion: correctly rounded, unlike `half`'s own
    /// `from_f64`, which on x86 rounds to f32 to nearest first and then
    /// again to f16 (1 + 2⁻¹¹ + 2⁻⁴⁰ became 1.0 instead of 1 + 2⁻¹⁰).
    pub fn from_f64(self, values: &[f64]) -> Vec<u8> {
        let mut out = vec![0u8; values.len() * self.itemsize() as usize];
        match self {
            Dtype::F16 => encode_halves::<f16>(values, &mut out),
            Dtype::Bf16 => encode_halves::<bf16>(values, &mut out),
            Dtype::F32 => {
                for (c, &v) in out.chunks_exact_mut(4).zip(values) {
                    c.copy_from_slice(&(v as f32).to_le_bytes());
                }
            }
            // `as` from a float saturates and maps NaN to 0.
            Dtype::I32 => narrow(values, &mut out, |v| (v.round() as i32).to_le_bytes()),
            Dtype::I8 => narrow(values, &mut out, |v| (v.round() as i8).to_le_bytes()),
            Dtype::U8 => narrow(values, &mut out, |v| (v.round() as u8).to_le_bytes()),
            Dtype::U32 => narrow(values, &mut out, |v| (v.round() as u32).to_le_bytes()),
            Dtype::I64 => narrow(values, &mut out, |v| (v.round() as i64).to_le_bytes()),
            Dtype::U64 => narrow(values, &mut out, |v| (v.round() as u64).to_le_bytes()),
            Dtype::F64 => narrow(values, &mut out, f64::to_le_bytes),
        }
        out
    }
}

/// `out[i] = f(element i of bytes)` for a plain little-endian type `T`.
fn widen<T: bytemuck::Pod>(bytes: &[u8], out: &mut [f64], f: impl Fn(T) -> f64) {
    for (o, c) in out
        .iter_mut()
        .zip(bytes.chunks_exact(std::mem::size_of::<T>()))
    {
        *o = f(bytemuck::pod_read_unaligned(c));
    }
}

/// Element `i` of `out` = `f(values[i])`, `N` bytes each.
fn narrow<const N: usize>(values: &[f64], out: &mut [u8], f: impl Fn(f64) -> [u8; N]) {
    for (c, &v) in out.chunks_exact_mut(N).zip(values) {
        c.copy_from_slice(&f(v));
    }
}

/// `v` rounded to f32 *to odd*: exact values stay; any other is cut
/// toward zero and gets its last mantissa bit set. Rounding that result
/// to nearest-even in a format at least two bits narrower and with no
/// wider exponent range below f32's (f16, bf16) gives `v` correctly
/// rounded: the set bit stands for the bits f32 could not hold.
fn f32_round_to_odd(v: f64) -> f32 {
    let f = v as f32;
    if f as f64 == v || v.is_nan() {
        return f;
    }
    let mut bits = f.to_bits();
    if (f as f64).abs() > v.abs() {
        bits -= 1; // one step toward zero (sign-magnitude)
    }
    f32::from_bits(bits | 1)
}

/// See [`Dtype::from_f64`].
fn encode_halves<H: bytemuck::Pod>(values: &[f64], out: &mut [u8])
where
    [H]: HalfFloatSliceExt,
{
    const CHUNK: usize = 256;
    let mut wide = [0f32; CHUNK];
    let mut narrow = [H::zeroed(); CHUNK];
    for (vals, bytes) in values.chunks(CHUNK).zip(out.chunks_mut(CHUNK * 2)) {
        let (wide, narrow) = (&mut wide[..vals.len()], &mut narrow[..vals.len()]);
        for (w, &v) in wide.iter_mut().zip(vals) {
            *w = f32_round_to_odd(v);
        }
        narrow.convert_from_f32_slice(wide);
        bytes.copy_from_slice(bytemuck::cast_slice(narrow));
    }
}

/// A floating MATH op in IEEE arithmetic (`max` / `min` ignore a NaN).
macro_rules! apply_float {
    ($name:ident, $t:ty) => {
        fn $name(op: BinOp, a: $t, b: $t) -> $t {
            match op {
                BinOp::Add => a + b,
                BinOp::Sub => a - b,
                BinOp::Mul => a * b,
                BinOp::Max => a.max(b),
                BinOp::Min => a.min(b),
                BinOp::Div => a / b,
            }
        }
    };
}
apply_float!(apply_f32, f32);
apply_float!(apply_f64, f64);

/// An integer MATH op: add, sub and mul wrap (two's complement, as
/// NCCL's integer reductions do), div truncates toward zero and gives 0
/// for a zero divisor (and wraps `MIN / -1`).
macro_rules! apply_int {
    ($name:ident, $t:ty) => {
        fn $name(op: BinOp, p: $t, q: $t) -> $t {
            match op {
                BinOp::Add => p.wrapping_add(q),
                BinOp::Sub => p.wrapping_sub(q),
                BinOp::Mul => p.wrapping_mul(q),
                BinOp::Max => p.max(q),
                BinOp::Min => p.min(q),
                BinOp::Div => {
                    if q == 0 {
                        0
                    } else {
                        p.wrapping_div(q)
                    }
                }
            }
        }
    };
}
apply_int!(apply_i8, i8);
apply_int!(apply_u8, u8);
apply_int!(apply_i32, i32);
apply_int!(apply_u32, u32);
apply_int!(apply_i64, i64);
apply_int!(apply_u64, u64);

/// `out[i] = a[i] op b[i]`, one tight loop per op so that it vectorises.
fn apply_slices<T: Copy>(op: BinOp, a: &[T], b: &[T], out: &mut [T], f: impl Fn(BinOp, T, T) -> T) {
    macro_rules! each {
        ($op:expr) => {
            Zip::from(ArrayViewMut1::from(&mut *out))
                .and(ArrayView1::from(a))
                .and(ArrayView1::from(b))
                .for_each(|o, &x, &y| *o = f($op, x, y))
        };
    }
    match op {
        BinOp::Add => each!(BinOp::Add),
        BinOp::Sub => each!(BinOp::Sub),
        BinOp::Mul => each!(BinOp::Mul),
        BinOp::Max => each!(BinOp::Max),
        BinOp::Min => each!(BinOp::Min),
        BinOp::Div => each!(BinOp::Div),
    }
}

/// Elements of `bytes` as `T`: borrowed when the bytes are aligned for
/// `T` (as the memory store's buffers are), else copied.
fn elements<T: bytemuck::Pod>(bytes: &[u8]) -> std::borrow::Cow<'_, [T]> {
    match bytemuck::try_cast_slice(bytes) {
        Ok(v) => std::borrow::Cow::Borrowed(v),
        Err(_) => std::borrow::Cow::Owned(
            bytes
                .chunks_exact(std::mem::size_of::<T>())
                .map(bytemuck::pod_read_unaligned)
                .collect(),
        ),
    }
}

/// Elements per step of the f16 / bf16 loop: its f32 buffers stay on the
/// stack and in L1, instead of three tensor-sized temporaries (whose fresh
/// pages cost more than the math).
const HALF_CHUNK: usize = 2048;
/// Chunk of operands of at most this many elements.
const SMALL_HALF_CHUNK: usize = 64;

/// `a op b` for a 16-bit float type `H` (f16 / bf16): each chunk is
/// widened to f32 with `half`'s slice conversions (F16C on x86 when the
/// CPU has it), combined, and rounded back once.
fn binary_half<H>(op: BinOp, a: &[u8], b: &[u8], out: &mut [u8])
where
    H: bytemuck::Pod,
    [H]: HalfFloatSliceExt,
{
    let (x, y) = (elements::<H>(a), elements::<H>(b));
    // The f32 buffers are zeroed on every call: small operands (a 16 B
    // message) get small ones.
    let fill = |dst: &mut [u16]| {
        if x.len() <= SMALL_HALF_CHUNK {
            binary_half_chunks::<H, SMALL_HALF_CHUNK>(op, &x, &y, dst)
        } else {
            binary_half_chunks::<H, HALF_CHUNK>(op, &x, &y, dst)
        }
    };
    match bytemuck::try_cast_slice_mut::<u8, u16>(out) {
        Ok(dst) => fill(dst),
        Err(_) => {
            let mut bits = vec![0u16; x.len()];
            fill(&mut bits);
            out.copy_from_slice(bytemuck::cast_slice(&bits));
        }
    }
}

/// Chunks of [`binary_half`] (`N` elements at a time).
fn binary_half_chunks<H, const N: usize>(op: BinOp, x: &[H], y: &[H], dst: &mut [u16])
where
    H: bytemuck::Pod,
    [H]: HalfFloatSliceExt,
{
    let mut fx = [0f32; N];
    let mut fy = [0f32; N];
    let mut fr = [0f32; N];
    for start in (0..x.len()).step_by(N) {
        let end = (start + N).min(x.len());
        let m = end - start;
        x[start..end].convert_to_f32_slice(&mut fx[..m]);
        y[start..end].convert_to_f32_slice(&mut fy[..m]);
        apply_slices(op, &fx[..m], &fy[..m], &mut fr[..m], apply_f32);
        bytemuck::cast_slice_mut::<u16, H>(&mut dst[start..end]).convert_from_f32_slice(&fr[..m]);
    }
}

/// `out = op(a, b)` for a type other than f16 / bf16, through an aligned buffer when
/// `out` is not aligned for it.
fn binary_wide<T: bytemuck::Pod>(
    op: BinOp,
    a: &[u8],
    b: &[u8],
    out: &mut [u8],
    f: impl Fn(BinOp, T, T) -> T,
) {
    let (x, y) = (elements::<T>(a), elements::<T>(b));
    match bytemuck::try_cast_slice_mut::<u8, T>(out) {
        Ok(dst) => apply_slices(op, &x, &y, dst, f),
        Err(_) => {
            let mut r = vec![T::zeroed(); x.len()];
            apply_slices(op, &x, &y, &mut r, f);
            out.copy_from_slice(bytemuck::cast_slice(&r));
        }
    }
}

/// f16 add / sub / mul / div eight lanes at a time with x86's F16C and AVX.
/// `half` dispatches on the CPU feature for every 8 elements it converts,
/// which costs more than the conversion; here the check is made once per
/// command and the whole loop is compiled for the feature. The lanes use
/// the same instructions as `half`'s F16C path and as a scalar `f32` op,
/// so the bits are identical (the every-pattern test below checks).
#[cfg(target_arch = "x86_64")]
mod f16c {
    use super::BinOp;
    use std::arch::x86_64::*;

    /// Whether this CPU has what [`binary`] needs (checked once, cached).
    pub fn available() -> bool {
        std::arch::is_x86_feature_detected!("f16c") && std::arch::is_x86_feature_detected!("avx")
    }

    /// `out[i] = x[i] op y[i]` for the first `len / 8 * 8` elements of
    /// f16 bit patterns; returns how many were done. `op` is add, sub, div or
    /// mul (max / min differ from `f32::max` on NaN and stay scalar).
    ///
    /// # Safety
    /// The CPU must have F16C and AVX ([`available`]).
    #[target_feature(enable = "avx,f16c")]
    pub unsafe fn binary(op: BinOp, x: &[u16], y: &[u16], out: &mut [u16]) -> usize {
        let n = x.len().min(y.len()).min(out.len()) / 8 * 8;
        macro_rules! each {
            ($f:ident) => {
                for i in (0..n).step_by(8) {
                    // SAFETY: i + 8 <= n <= every slice's length; the loads
                    // and the store are unaligned.
                    unsafe {
                        let a = _mm256_cvtph_ps(_mm_loadu_si128(x.as_ptr().add(i).cast()));
                        let b = _mm256_cvtph_ps(_mm_loadu_si128(y.as_ptr().add(i).cast()));
                        let r = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>($f(a, b));
                        _mm_storeu_si128(out.as_mut_ptr().add(i).cast(), r);
                    }
                }
            };
        }
        match op {
            BinOp::Add => each!(_mm256_add_ps),
            BinOp::Sub => each!(_mm256_sub_ps),
            BinOp::Mul => each!(_mm256_mul_ps),
            BinOp::Div => each!(_mm256_div_ps),
            BinOp::Max | BinOp::Min => return 0,
        }
        n
    }
}

/// The f16 fast path: how many leading bytes of `out` it computed (the
/// rest is left to [`binary_half`]).
fn binary_f16_simd(op: BinOp, a: &[u8], b: &[u8], out: &mut [u8]) -> usize {
    #[cfg(target_arch = "x86_64")]
    if f16c::available() {
        if let (Ok(x), Ok(y), Ok(o)) = (
            bytemuck::try_cast_slice::<u8, u16>(a),
            bytemuck::try_cast_slice::<u8, u16>(b),
            bytemuck::try_cast_slice_mut::<u8, u16>(out),
        ) {
            // SAFETY: the CPU has the features (checked just above).
            return 2 * unsafe { f16c::binary(op, x, y, o) };
        }
    }
    let _ = (op, a, b, out);
    0
}

/// `out = a op b` element-wise on encoded bytes of equal length. f16 /
/// bf16 are computed in f32 and rounded once, which is exact rounding for
/// add/sub/mul/max/min.
pub fn binary_into(op: BinOp, dtype: Dtype, a: &[u8], b: &[u8], out: &mut [u8]) {
    debug_assert!(a.len() == b.len() && a.len() == out.len());
    match dtype {
        Dtype::F16 => {
            let done = binary_f16_simd(op, a, b, out);
            if done < out.len() {
                binary_half::<f16>(op, &a[done..], &b[done..], &mut out[done..]);
            }
        }
        Dtype::Bf16 => binary_half::<bf16>(op, a, b, out),
        Dtype::F32 => binary_wide::<f32>(op, a, b, out, apply_f32),
        Dtype::F64 => binary_wide::<f64>(op, a, b, out, apply_f64),
        Dtype::I32 => binary_wide::<i32>(op, a, b, out, apply_i32),
        Dtype::I8 => binary_wide::<i8>(op, a, b, out, apply_i8),
        Dtype::U8 => binary_wide::<u8>(op, a, b, out, apply_u8),
        Dtype::U32 => binary_wide::<u32>(op, a, b, out, apply_u32),
        Dtype::I64 => binary_wide::<i64>(op, a, b, out, apply_i64),
        Dtype::U64 => binary_wide::<u64>(op, a, b, out, apply_u64),
    }
}

/// [`binary_into`] a new buffer.
pub fn binary(op: BinOp, dtype: Dtype, a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; a.len()];
    binary_into(op, dtype, a, b, &mut out);
    out
}

/// Every element of `out` is `value`, encoded as [`Dtype::from_f64`]
/// encodes it (rounded once; integers saturated, NaN to 0).
pub fn fill_into(dtype: Dtype, value: f64, out: &mut [u8]) {
    let one = dtype.from_f64(&[value]);
    for e in out.chunks_exact_mut(one.len()) {
        e.copy_from_slice(&one);
    }
}

/// `out = a * factor` (computed in f64, rounded once).
pub fn scale_into(dtype: Dtype, a: &[u8], factor: f64, out: &mut [u8]) {
    let v: Vec<f64> = dtype.to_f64(a).into_iter().map(|x| x * factor).collect();
    out.copy_from_slice(&dtype.from_f64(&v));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Half an f16 ulp above 1, plus a little: f64 -> f16 rounds up, but
    /// f64 -> f32 drops the little and f32 -> f16 then ties to even (down).
    const DOUBLE_ROUNDS: f64 = 1.00048828125 + 1e-12;

    /// `v` correctly rounded (nearest, ties to even) to the 16-bit format
    /// whose finite positive values are `decode(0..=max)` in increasing
    /// order and whose next power of two past `max` is `top` (the value
    /// overflow rounds towards): found by search between midpoints, which
    /// f64 holds exactly.
    fn reference(v: f64, decode: impl Fn(u16) -> f64, max: u16, top: f64) -> u16 {
        let sign = if v.is_sign_negative() { 0x8000 } else { 0 };
        let a = v.abs();
        // The largest k with decode(k) <= a.
        let (mut lo, mut hi) = (0u16, max);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if decode(mid) <= a {
                lo = mid
            } else {
                hi = mid - 1
            }
        }
        let k = lo;
        let next = if k == max { top } else { decode(k + 1) };
        let mid = (decode(k) + next) / 2.0;
        let up = a > mid || (a == mid && k % 2 == 1);
        sign | if up { k + 1 } else { k }
    }

    #[test]
    fn encoding_rounds_once_and_correctly() {
        assert_eq!(
            f16::from_f32(DOUBLE_ROUNDS as f32).to_bits(),
            0x3c00,
            "through f32 to nearest, the case rounds down (wrongly)"
        );
        assert_eq!(
            Dtype::F16.from_f64(&[DOUBLE_ROUNDS]),
            (f16::from_bits(0x3c01)).to_le_bytes(),
            "1 + 2^-10"
        );
        // Exact values, values f32 would round, halfway cases, overflow,
        // subnormals, underflow, infinities; over 256 so that chunks fill.
        let mut v: Vec<f64> = (0..600).map(|i| i as f64 * 0.5 - 100.0).collect();
        for k in 0..2000u64 {
            // Pseudo-random bit patterns over many magnitudes.
            let bits = k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 2;
            let x = f64::from_bits((bits & 0x000F_FFFF_FFFF_FFFF) | ((1000 + k % 60) << 52));
            v.extend([x, -x]);
        }
        v.extend([
            1.0 + f64::EPSILON,
            2049.0000001,
            DOUBLE_ROUNDS,
            1.00048828125,
            65504.0,
            65519.999,
            65520.0,
            1e300,
            -1e-310,
            2f64.powi(-25),
            2f64.powi(-25) * 1.0000001,
            f64::INFINITY,
            f64::NEG_INFINITY,
            3.0000000001,
        ]);
        let f16_of = |b: u16| f16::from_bits(b).to_f64();
        let bf16_of = |b: u16| bf16::from_bits(b).to_f64();
        // The values catch a conversion that rounds twice.
        let twice = v
            .iter()
            .filter(|&&x| f16::from_f64(x).to_bits() != reference(x, f16_of, 0x7bff, 65536.0))
            .count();
        assert!(twice > 0, "no value tells single from double rounding");
        for (dt, want) in [
            (
                Dtype::F16,
                Box::new(|x| reference(x, f16_of, 0x7bff, 65536.0)) as Box<dyn Fn(f64) -> u16>,
            ),
            (
                Dtype::Bf16,
                Box::new(|x| reference(x, bf16_of, 0x7f7f, 2f64.powi(128))),
            ),
        ] {
            let got = dt.from_f64(&v);
            for (x, c) in v.iter().zip(got.chunks_exact(2)) {
                let got = u16::from_le_bytes([c[0], c[1]]);
                assert_eq!(got, want(*x), "{} of {x:e}", dt.name());
            }
            let nan = dt.from_f64(&[f64::NAN]);
            assert!(dt.to_f64(&nan)[0].is_nan());
        }
    }

    #[test]
    fn decoding_is_exact_from_any_alignment() {
        let bytes: Vec<u8> = (0..=255u8).chain(0..=255).collect();
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&bytes);
        for b in [&bytes[..], &shifted[1..]] {
            let f = Dtype::F16.to_f64(b);
            let g = Dtype::Bf16.to_f64(b);
            for (i, c) in b.chunks_exact(2).enumerate() {
                let (x, y) = (
                    f16::from_le_bytes([c[0], c[1]]),
                    bf16::from_le_bytes([c[0], c[1]]),
                );
                assert!(f[i] == x.to_f64() || f[i].is_nan() && x.is_nan());
                assert!(g[i] == y.to_f64() || g[i].is_nan() && y.is_nan());
            }
        }
    }

    #[test]
    fn f16_add_rounds_once() {
        let a = Dtype::F16.from_f64(&[1.0, 2048.0, -3.5]);
        let b = Dtype::F16.from_f64(&[2.0, 1.0, 0.25]);
        let r = Dtype::F16.to_f64(&binary(BinOp::Add, Dtype::F16, &a, &b));
        assert_eq!(r, vec![3.0, 2048.0, -3.25]); // 2049 rounds to even
    }

    #[test]
    fn slice_math_matches_element_by_element_rounding() {
        // Every f16 bit pattern against a neighbour, every op: the slice
        // path gives the bits of one f32 op rounded once per element.
        let a: Vec<u8> = (0..=u16::MAX).flat_map(|w| w.to_le_bytes()).collect();
        let b: Vec<u8> = (0..=u16::MAX)
            .map(|w| w.rotate_left(3) ^ 0x1234)
            .flat_map(|w| w.to_le_bytes())
            .collect();
        for dtype in [Dtype::F16, Dtype::Bf16] {
            for op in [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Max, BinOp::Min] {
                let fast = binary(op, dtype, &a, &b);
                for i in 0..=u16::MAX as usize {
                    let (x, y) = (
                        u16::from_le_bytes([a[2 * i], a[2 * i + 1]]),
                        u16::from_le_bytes([b[2 * i], b[2 * i + 1]]),
                    );
                    let want = match dtype {
                        Dtype::F16 => f16::from_f32(apply_f32(
                            op,
                            f16::from_bits(x).to_f32(),
                            f16::from_bits(y).to_f32(),
                        ))
                        .to_bits(),
                        _ => bf16::from_f32(apply_f32(
                            op,
                            bf16::from_bits(x).to_f32(),
                            bf16::from_bits(y).to_f32(),
                        ))
                        .to_bits(),
                    };
                    let got = u16::from_le_bytes([fast[2 * i], fast[2 * i + 1]]);
                    let nan = |w: u16| match dtype {
                        Dtype::F16 => f16::from_bits(w).is_nan(),
                        _ => bf16::from_bits(w).is_nan(),
                    };
                    assert!(
                        got == want || (nan(got) && nan(want)),
                        "{} {op:?} {x:#06x} {y:#06x}: {got:#06x} != {want:#06x}",
                        dtype.name()
                    );
                }
            }
        }
    }

    #[test]
    fn small_operands_give_the_bits_of_large_ones() {
        // Operands up to SMALL_HALF_CHUNK elements take smaller buffers:
        // every length around it, at an odd byte offset too (scalar path).
        let a: Vec<u8> = (0..200u16)
            .flat_map(|w| w.wrapping_mul(331).to_le_bytes())
            .collect();
        let b: Vec<u8> = (0..200u16)
            .flat_map(|w| w.wrapping_mul(97).wrapping_add(5).to_le_bytes())
            .collect();
        for dtype in [Dtype::F16, Dtype::Bf16] {
            for op in [BinOp::Add, BinOp::Mul, BinOp::Max] {
                let whole = binary(op, dtype, &a, &b);
                for n in [1, 7, 8, 9, 63, 64, 65, 70, 199] {
                    assert_eq!(binary(op, dtype, &a[..2 * n], &b[..2 * n]), whole[..2 * n]);
                    let (mut x, mut y) = (vec![0u8], vec![0u8]);
                    x.extend_from_slice(&a[..2 * n]);
                    y.extend_from_slice(&b[..2 * n]);
                    let mut out = vec![0u8; 2 * n + 1];
                    binary_into(op, dtype, &x[1..], &y[1..], &mut out[1..]);
                    assert_eq!(out[1..], whole[..2 * n], "{n} at an odd offset");
                }
            }
        }
    }

    #[test]
    fn integers_wrap_truncate_and_saturate_and_f64_is_exact() {
        let ints = [
            Dtype::I8,
            Dtype::U8,
            Dtype::I32,
            Dtype::U32,
            Dtype::I64,
            Dtype::U64,
        ];
        for dt in ints {
            assert!(dt.is_integer());
            let v = [0.0, 1.0, 7.0, 100.0, 2.5, -2.5];
            let got = dt.to_f64(&dt.from_f64(&v));
            let signed = matches!(dt, Dtype::I8 | Dtype::I32 | Dtype::I64);
            // Half away from zero; unsigned saturate at 0.
            let want = if signed {
                [0.0, 1.0, 7.0, 100.0, 3.0, -3.0]
            } else {
                [0.0, 1.0, 7.0, 100.0, 3.0, 0.0]
            };
            assert_eq!(got, want, "{}", dt.name());
            let (a, b) = (dt.from_f64(&[7.0, 100.0]), dt.from_f64(&[2.0, 0.0]));
            let q = dt.to_f64(&binary(BinOp::Div, dt, &a, &b));
            assert_eq!(
                q,
                [3.0, 0.0],
                "{}: truncating, 0 for a zero divisor",
                dt.name()
            );
            assert_eq!(dt.from_f64(&[f64::NAN]), vec![0u8; dt.itemsize() as usize]);
        }
        // Wrapping as two's complement, as NCCL's integer sums do.
        let w = |dt: Dtype, x: f64, y: f64| {
            let r = binary(BinOp::Add, dt, &dt.from_f64(&[x]), &dt.from_f64(&[y]));
            dt.to_f64(&r)[0]
        };
        assert_eq!(w(Dtype::I8, 100.0, 100.0), -56.0);
        assert_eq!(w(Dtype::U8, 200.0, 100.0), 44.0);
        assert_eq!(w(Dtype::U32, 4294967295.0, 2.0), 1.0);
        assert_eq!(Dtype::I8.from_f64(&[1000.0, -1000.0]), [127u8, 128]);
        // i64 holds what f64 cannot, and its math is exact.
        let big = (1i64 << 60) + 1;
        let a = big.to_le_bytes();
        let r = binary(BinOp::Sub, Dtype::I64, &a, &1i64.to_le_bytes());
        assert_eq!(i64::from_le_bytes(r.try_into().unwrap()), 1 << 60);
        let m = binary(
            BinOp::Max,
            Dtype::U64,
            &u64::MAX.to_le_bytes(),
            &1u64.to_le_bytes(),
        );
        assert_eq!(m, u64::MAX.to_le_bytes());
        // f64 keeps what f32 rounds.
        let x = 1.0 + f64::EPSILON;
        let sum = binary(
            BinOp::Add,
            Dtype::F64,
            &Dtype::F64.from_f64(&[x]),
            &Dtype::F64.from_f64(&[x]),
        );
        assert_eq!(Dtype::F64.to_f64(&sum), [2.0 * x]);
        assert!(!Dtype::F64.is_integer());
        // Every dtype sits at its discriminant and its size is its bytes.
        for (i, dt) in Dtype::ALL.into_iter().enumerate() {
            assert_eq!(dt as usize, i);
            assert_eq!(dt.from_f64(&[1.0, 2.0]).len() as u64, 2 * dt.itemsize());
        }
    }

    #[test]
    fn i32_and_f32_ops() {
        let a = Dtype::I32.from_f64(&[5.0, -2.0]);
        let b = Dtype::I32.from_f64(&[3.0, 7.0]);
        assert_eq!(
            Dtype::I32.to_f64(&binary(BinOp::Max, Dtype::I32, &a, &b)),
            vec![5.0, 7.0]
        );
        let a = Dtype::F32.from_f64(&[1.5]);
        assert_eq!(
            Dtype::F32.to_f64(&binary(BinOp::Mul, Dtype::F32, &a, &a)),
            vec![2.25]
        );
    }
}
