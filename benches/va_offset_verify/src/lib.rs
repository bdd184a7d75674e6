//! `va_offset_verify`: the virtual-address map of placed tensors, checked
//! end to end (the seed bench of the same name, seed ADR-0026 / ADR-0050
//! D3). For every pair of cube and PE modes (`replicate`, `row_wise`,
//! `column_wise`, `tiled`), the bench places a `[rows, cols]` tensor over
//! `--cubes` × `--pes` PEs of device 0, fills element (r, c) with its
//! index `r · cols + c`, and launches `va_probe` on the PEs holding its
//! shards. Each PE reads its shard through the tensor's virtual range at
//! `t_ptr + j · shard_bytes`, copies it to a gather tensor and doubles it
//! in place, and signs the gather with its (cube, PE). The bench then
//! checks:
//!
//! * every shard's `offset_bytes` is `j · shard_bytes` (the layout kernels
//!   rely on);
//! * the gathered shard `j` holds exactly the elements its `ShardSpec`
//!   names (rows `row_start..`, columns `col_start..`, row-major): the
//!   virtual address reached the right bytes;
//! * shard `j` was reached by the PE it is placed on (its `ShardSpec`'s
//!   cube and PE signed it);
//! * every element of the tensor, read back by the host, is doubled once:
//!   the kernels' writes landed in the shards the host reads (for a
//!   replicated level, every replica was doubled once).
//!
//! Values are exact in the dtype (integers below 2048), so the tolerance is
//! 0. Arguments: `--rows R` (8), `--cols C` (16), `--cubes N` (2),
//! `--pes P` (2), `--dtype D` (f16), `--kernel K` (another probe with
//! `va_probe`'s arguments, e.g. your own, to check it the same way).

use kernbench_guest::bench::torch::{DpMode, DpPolicy};
use kernbench_guest::bench::{ahbm, report, torch};
use kernbench_guest::{Bench, Dtype};

const MODES: [DpMode; 4] = [
    DpMode::Replicate,
    DpMode::RowWise,
    DpMode::ColumnWise,
    DpMode::Tiled,
];

fn mode_name(m: DpMode) -> &'static str {
    match m {
        DpMode::Replicate => "replicate",
        DpMode::RowWise => "row_wise",
        DpMode::ColumnWise => "column_wise",
        DpMode::Tiled => "tiled",
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Options {
    rows: u32,
    cols: u32,
    cubes: u32,
    pes: u32,
    dtype: Dtype,
    kernel: String,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        rows: 8,
        cols: 16,
        cubes: 2,
        pes: 2,
        dtype: Dtype::F16,
        kernel: "va_probe".into(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let v = it
            .next()
            .ok_or_else(|| format!("va_offset_verify: {a} needs a value"))?;
        match a.as_str() {
            "--dtype" => {
                o.dtype = Dtype::parse(v)?;
                continue;
            }
            "--kernel" => {
                o.kernel = v.clone();
                continue;
            }
            _ => {}
        }
        let n = v
            .parse::<u32>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("va_offset_verify: {a} {v:?} is not a positive integer"))?;
        match a.as_str() {
            "--rows" => o.rows = n,
            "--cols" => o.cols = n,
            "--cubes" => o.cubes = n,
            "--pes" => o.pes = n,
            other => {
                return Err(format!(
                    "va_offset_verify: unknown argument {other:?} \
                     (known: --rows, --cols, --cubes, --pes, --dtype, --kernel)"
                ))
            }
        }
    }
    if u64::from(o.rows) * u64::from(o.cols) > 2048 {
        return Err("va_offset_verify: rows x cols must be at most 2048 (exact values)".into());
    }
    Ok(o)
}

/// Place, probe and check one (cube mode, PE mode) pair.
fn verify(o: &Options, cube: DpMode, pe: DpMode) -> Result<report::KernelRow, String> {
    let dp = DpPolicy::new(cube, pe, o.cubes, o.pes);
    let t = torch::zeros_dp(&[o.rows, o.cols], o.dtype, dp, "T")?;
    let index: Vec<f64> = (0..o.rows * o.cols).map(f64::from).collect();
    t.copy_from_f64(&index)?;
    let shards = t.shards();
    let (srows, scols) = (shards[0].rows, shards[0].cols);
    let shard_bytes = shards[0].nbytes;
    let gather = torch::zeros(&[shards.len() as u32, srows * scols], o.dtype, "gather")?;
    let who = torch::zeros(&[shards.len() as u32, 2], o.dtype, "who")?;
    let args = [
        i64::from(srows),
        i64::from(scols),
        o.dtype.code(),
        i64::from(o.pes),
        gather.data_ptr() as i64,
        who.data_ptr() as i64,
    ];
    let time_ps = torch::launch(&o.kernel, &t, &args)?;
    let (mut checked, mut wrong) = (0u64, 0u64);
    let (got, signed) = (gather.to_f64(), who.to_f64());
    for (j, s) in shards.iter().enumerate() {
        checked += 2;
        wrong += u64::from(s.offset_bytes != j as u64 * shard_bytes);
        wrong += u64::from(signed[2 * j..2 * j + 2] != [f64::from(s.cube), f64::from(s.pe)]);
        for r in 0..s.rows {
            for c in 0..s.cols {
                let want = f64::from((s.row_start + r) * o.cols + s.col_start + c);
                let at = j * (srows * scols) as usize + (r * s.cols + c) as usize;
                checked += 1;
                wrong += u64::from(got[at] != want);
            }
        }
    }
    for (i, v) in t.to_f64().iter().enumerate() {
        checked += 1;
        wrong += u64::from(*v != 2.0 * i as f64);
    }
    Ok(report::KernelRow {
        name: "va_offset".into(),
        shape: format!("{}/{}", mode_name(cube), mode_name(pe)),
        dtype: o.dtype,
        pes: shards.len() as u32,
        flops: 0,
        time_ps,
        checked,
        wrong,
        max_rel_err: if wrong == 0 { 0.0 } else { f64::INFINITY },
        tolerance: 0.0,
    })
}

struct VaOffsetVerify;

impl Bench for VaOffsetVerify {
    fn run(args: Vec<String>) -> Result<(), String> {
        let o = parse_args(&args)?;
        ahbm::set_device(0)?;
        for cube in MODES {
            for pe in MODES {
                report::record_kernel(&verify(&o, cube, pe)?);
            }
        }
        Ok(())
    }

    fn worker(_rank: u32, _world_size: u32, _args: Vec<String>) -> Result<(), String> {
        Err("va_offset_verify runs on device 0 and spawns no workers".into())
    }
}

kernbench_guest::export_bench!(VaOffsetVerify);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse_and_refuse_clearly() {
        let o = parse_args(&["--dtype".into(), "f32".into(), "--rows".into(), "4".into()]).unwrap();
        assert_eq!((o.dtype, o.rows, o.cols), (Dtype::F32, 4, 16));
        let big = ["--rows".into(), "64".into(), "--cols".into(), "64".into()];
        assert!(parse_args(&big).unwrap_err().contains("at most 2048"));
    }
}
