//! Element types and their byte encodings (little-endian), shared by the
//! wasm bindings and the native mock.

/// Element type of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

impl Dtype {
    /// Bytes per element.
    pub const fn itemsize(self) -> usize {
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

    /// The name the WIT gives it (`f16`, `i8`, ...; the reports print
    /// nccl-tests' names).
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

    /// Every dtype, in the WIT's order (its index is [`Dtype::code`]).
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

    /// The dtype's index in the WIT enum (how kernel arguments carry it).
    pub const fn code(self) -> i64 {
        self as i64
    }

    /// The dtype of a [`Dtype::code`].
    pub fn from_code(code: i64) -> Option<Dtype> {
        Dtype::ALL.get(usize::try_from(code).ok()?).copied()
    }

    /// The dtype called `name` (its [`Dtype::name`]).
    pub fn parse(name: &str) -> Result<Dtype, String> {
        Dtype::ALL
            .into_iter()
            .find(|d| d.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Dtype::ALL.iter().map(|d| d.name()).collect();
                format!("unknown dtype {name:?} (one of {})", names.join(", "))
            })
    }

    /// The largest relative error of rounding a value once to this dtype
    /// (half an ulp: 2^-11 for f16, 2^-8 for bf16, 2^-24 for f32, 2^-53
    /// for f64; 0 for integers, whose values here are exact).
    pub const fn unit_roundoff(self) -> f64 {
        match self {
            Dtype::F16 => 1.0 / 2048.0,
            Dtype::Bf16 => 1.0 / 256.0,
            Dtype::F32 => 1.0 / 16_777_216.0,
            Dtype::F64 => f64::EPSILON / 2.0,
            _ => 0.0,
        }
    }

    /// Decode little-endian element bytes to f64 values.
    pub fn decode(self, bytes: &[u8]) -> Vec<f64> {
        let n = self.itemsize();
        bytes
            .chunks_exact(n)
            .map(|c| match self {
                Dtype::F16 => half::f16::from_le_bytes([c[0], c[1]]).to_f64(),
                Dtype::Bf16 => half::bf16::from_le_bytes([c[0], c[1]]).to_f64(),
                Dtype::F32 => f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
                Dtype::I32 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
                Dtype::I8 => c[0] as i8 as f64,
                Dtype::U8 => c[0] as f64,
                Dtype::U32 => u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
                Dtype::I64 => i64::from_le_bytes(c.try_into().expect("8 bytes")) as f64,
                Dtype::U64 => u64::from_le_bytes(c.try_into().expect("8 bytes")) as f64,
                Dtype::F64 => f64::from_le_bytes(c.try_into().expect("8 bytes")),
            })
            .collect()
    }

    /// An integer dtype's value of the integer `v` (already whole) as a
    /// C cast to the type gives it on two's complement: wrapped modulo
    /// 2^bits (past ±2^63 the f64 saturates first). Floats: `v` as is.
    pub fn wrap(self, v: f64) -> f64 {
        let i = v as i128;
        match self {
            Dtype::I8 => i as i8 as f64,
            Dtype::U8 => i as u8 as f64,
            Dtype::I32 => i as i32 as f64,
            Dtype::U32 => i as u32 as f64,
            Dtype::I64 => i as i64 as f64,
            Dtype::U64 => i as u64 as f64,
            _ => v,
        }
    }

    /// Encode f64 values as little-endian element bytes, rounded to
    /// nearest-even once, exactly as the host encodes them (f16/bf16
    /// through f32 rounded to odd; integers rounded, saturating, NaN 0).
    pub fn encode(self, values: &[f64]) -> Vec<u8> {
        let mut out = Vec::with_capacity(values.len() * self.itemsize());
        for &v in values {
            match self {
                Dtype::F16 => {
                    out.extend_from_slice(&half::f16::from_f32(f32_round_to_odd(v)).to_le_bytes())
                }
                Dtype::Bf16 => {
                    out.extend_from_slice(&half::bf16::from_f32(f32_round_to_odd(v)).to_le_bytes())
                }
                Dtype::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
                Dtype::I32 => out.extend_from_slice(&(v.round() as i32).to_le_bytes()),
                Dtype::I8 => out.extend_from_slice(&(v.round() as i8).to_le_bytes()),
                Dtype::U8 => out.push(v.round() as u8),
                Dtype::U32 => out.extend_from_slice(&(v.round() as u32).to_le_bytes()),
                Dtype::I64 => out.extend_from_slice(&(v.round() as i64).to_le_bytes()),
                Dtype::U64 => out.extend_from_slice(&(v.round() as u64).to_le_bytes()),
                Dtype::F64 => out.extend_from_slice(&v.to_le_bytes()),
            }
        }
        out
    }
}

/// `v` in f32 rounded to odd, so that rounding it again to f16 / bf16 is
/// the correct single rounding of `v` (`half`'s own `from_f64` is not).
fn f32_round_to_odd(v: f64) -> f32 {
    let f = v as f32;
    if f as f64 == v || v.is_nan() {
        return f;
    }
    let mut bits = f.to_bits();
    if (f as f64).abs() > v.abs() {
        bits -= 1;
    }
    f32::from_bits(bits | 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_rounds_once() {
        // 1 + 2^-11 + 2^-40 is nearer 1 + 2^-10 than 1.
        let v = 1.00048828125 + 2f64.powi(-40);
        assert_eq!(Dtype::F16.encode(&[v]), 0x3c01u16.to_le_bytes());
        assert_eq!(
            Dtype::I32.encode(&[2.5, -1.6]),
            [3i32.to_le_bytes(), (-2i32).to_le_bytes()].concat()
        );
    }
}
