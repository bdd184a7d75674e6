//! `gemm_single_pe`: the matrix unit of one PE, measured (seed bench of
//! the same name). For each dtype and shape of the sweep, the bench places
//! A `[m, k]`, B `[k, n]` and C `[m, n]` on cube 0 / PE 0 of device 0,
//! fills A and B with deterministic values, launches the `gemm` kernel
//! (`torch::launch`) and reads back C. It checks every element against a
//! reference computed here in f64 — the error of each element relative to
//! the sum of the absolute values of its terms must not exceed the output
//! dtype's unit roundoff (the unit sums exactly and rounds once) — and
//! reports the simulated time, the achieved TFLOP/s and the efficiency
//! against the PE's peak (`pe.gemm` in topology.yaml).
//!
//! Arguments: `--sizes 64,128,256,512` (square m = n = k) or
//! `-m M -n N -k K` (one shape), `--dtype f16,bf16,f32` (also `i32`),
//! `--out-dtype D` (default: the input dtype), `--tile-m R` (rows per
//! matrix-unit command, default 128).

use kernbench_guest::bench::{ahbm, report, torch};
use kernbench_guest::kernels::{matmul_ref, test_value, Check, GemmArgs};
use kernbench_guest::{Bench, Dtype};

#[derive(Debug)]
struct Options {
    shapes: Vec<(u32, u32, u32)>,
    dtypes: Vec<Dtype>,
    out_dtype: Option<Dtype>,
    tile_m: u32,
}

fn positive(s: &str, what: &str) -> Result<u32, String> {
    s.trim()
        .parse::<u32>()
        .ok()
        .filter(|&v| v > 0)
        .ok_or_else(|| format!("{what}: {s:?} is not a positive integer"))
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        shapes: Vec::new(),
        dtypes: vec![Dtype::F16, Dtype::Bf16, Dtype::F32],
        out_dtype: None,
        tile_m: 128,
    };
    let (mut m, mut n, mut k) = (None, None, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let v = it
            .next()
            .ok_or_else(|| format!("gemm_single_pe: {a} needs a value"))?;
        match a.as_str() {
            "--sizes" => {
                for s in v.split(',') {
                    let d = positive(s, "--sizes")?;
                    o.shapes.push((d, d, d));
                }
            }
            "-m" => m = Some(positive(v, "-m")?),
            "-n" => n = Some(positive(v, "-n")?),
            "-k" => k = Some(positive(v, "-k")?),
            "--dtype" => o.dtypes = v.split(',').map(Dtype::parse).collect::<Result<_, _>>()?,
            "--out-dtype" => o.out_dtype = Some(Dtype::parse(v)?),
            "--tile-m" => o.tile_m = positive(v, "--tile-m")?,
            other => {
                return Err(format!(
                    "gemm_single_pe: unknown argument {other:?} \
                     (known: --sizes, -m, -n, -k, --dtype, --out-dtype, --tile-m)"
                ))
            }
        }
    }
    match (m, n, k) {
        (None, None, None) => {}
        (Some(m), Some(n), Some(k)) => o.shapes.push((m, n, k)),
        _ => return Err("gemm_single_pe: give all of -m, -n and -k".into()),
    }
    if o.shapes.is_empty() {
        o.shapes = [64, 128, 256, 512].map(|d| (d, d, d)).to_vec();
    }
    Ok(o)
}

/// Test values for a tensor of `dtype`: exact in it (integers in -64..64
/// for the integer dtypes, 0..=64 for the unsigned ones).
fn values(seed: u64, count: u64, dtype: Dtype) -> Vec<f64> {
    let scale = if dtype.is_integer() { 64.0 } else { 1.0 };
    let unsigned = matches!(dtype, Dtype::U8 | Dtype::U32 | Dtype::U64);
    (0..count)
        .map(|i| test_value(seed, i) * scale)
        .map(|v| if unsigned { v.abs() } else { v })
        .collect()
}

/// One GEMM of the sweep on cube 0 / PE 0 of device 0.
fn measure(
    (m, n, k): (u32, u32, u32),
    dtype: Dtype,
    out: Dtype,
    tile_m: u32,
) -> Result<report::KernelRow, String> {
    let a = torch::zeros(&[m, k], dtype, "A")?;
    let b = torch::zeros(&[k, n], dtype, "B")?;
    let c = torch::zeros(&[m, n], out, "C")?;
    let (av, bv) = (
        values(1, u64::from(m * k), dtype),
        values(2, u64::from(k * n), dtype),
    );
    a.copy_from_f64(&av)?;
    b.copy_from_f64(&bv)?;
    let g = GemmArgs {
        m,
        n,
        k,
        a_ptr: a.data_ptr(),
        b_ptr: b.data_ptr(),
        b_stride: 0,
        bias: None,
        c_ptr: c.data_ptr(),
        dtype,
        out_dtype: out,
        num_pes: 1,
        tile_m,
    };
    let time_ps = torch::launch("gemm", &c, &g.to_args())?;
    let (want, scale) = matmul_ref(&av, &bv, None, (m as usize, n as usize, k as usize));
    let tolerance = out.unit_roundoff();
    let check = Check::of(&c.to_f64(), &want, &scale, tolerance);
    Ok(report::KernelRow {
        name: "gemm".into(),
        shape: format!("m={m} n={n} k={k}"),
        dtype,
        pes: 1,
        flops: g.flops(1),
        time_ps,
        checked: check.checked,
        wrong: check.wrong,
        max_rel_err: check.max_rel_err,
        tolerance,
    })
}

struct GemmSinglePe;

impl Bench for GemmSinglePe {
    fn run(args: Vec<String>) -> Result<(), String> {
        let o = parse_args(&args)?;
        ahbm::set_device(0)?;
        for &dtype in &o.dtypes {
            for &shape in &o.shapes {
                // i8 / u8 products accumulate in i32, as int8 GEMMs do.
                let out = o.out_dtype.unwrap_or(match dtype {
                    Dtype::I8 | Dtype::U8 => Dtype::I32,
                    d => d,
                });
                report::record_kernel(&measure(shape, dtype, out, o.tile_m)?);
            }
        }
        Ok(())
    }

    fn worker(_rank: u32, _world_size: u32, _args: Vec<String>) -> Result<(), String> {
        Err("gemm_single_pe runs on one PE and spawns no workers".into())
    }
}

kernbench_guest::export_bench!(GemmSinglePe);

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn arguments_parse_and_refuse_clearly() {
        let o = parse_args(&[]).unwrap();
        assert_eq!(o.shapes.len(), 4);
        let o = parse_args(&args("-m 8 -n 16 -k 32 --dtype bf16 --tile-m 4")).unwrap();
        assert_eq!(
            (o.shapes, o.dtypes, o.tile_m),
            (vec![(8, 16, 32)], vec![Dtype::Bf16], 4)
        );
        assert!(parse_args(&args("-m 8"))
            .unwrap_err()
            .contains("all of -m, -n and -k"));
        assert!(parse_args(&args("--dtype f8"))
            .unwrap_err()
            .contains("unknown dtype"));
        assert!(parse_args(&args("--sizes 0"))
            .unwrap_err()
            .contains("positive"));
    }
}
