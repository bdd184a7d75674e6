//! `ccl_allreduce`: the nccl-tests `all_reduce_perf` of KernBench.
//!
//! The driver initialises the `ahbm` process group (which loads the
//! algorithm named in ccl.yaml), then spawns one rank per SIP. Each rank
//! binds its device, and for every size of the sweep fills its shard with
//! distinct values, all-reduces it, checks every element against the
//! reference sum and reports the simulated time. Fill and check go in
//! pieces of 64 Ki elements, so the guest's memory does not grow with the
//! size.
//!
//! Arguments (as nccl-tests): `-b/--minbytes N`, `-e/--maxbytes N`,
//! `-f/--stepfactor F`; sizes accept K/M/G suffixes. Default 8 B … 1 MiB ×2.
//! `--cubes N` makes every cube a contributor, as the seed's hierarchical
//! all-reduce (`lrab_hierarchical_allreduce`, ADR-0050) defines it: each
//! rank's tensor is N tiles of the swept size placed row-wise over N cubes
//! (`DPPolicy(cube=row_wise, num_cubes=N)`), and every tile of every rank
//! ends holding the sum of all world size × N tiles. Sizes, counts and
//! the bound then refer to one tile, as nccl-tests reports one GPU's
//! buffer. Default: one block in cube 0 per rank, summed over the ranks.

use kernbench_guest::bench::{ahbm, dist, mp, report, torch};
use kernbench_guest::{Bench, Dtype};

struct Sweep {
    min: u64,
    max: u64,
    factor: u64,
    /// Cubes the tensor is placed over row-wise (1: one block).
    cubes: u32,
    /// `-d`: the element type (nccl-tests' `-d half|bfloat16|float|int32`
    /// or ours: f16, bf16, f32, i32).
    dtype: Dtype,
    /// `-o`: the reduction (sum, prod, max, min, avg).
    op: Op,
}

/// The reductions of `-o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Sum,
    Prod,
    Max,
    Min,
    Avg,
}

impl Op {
    fn parse(s: &str) -> Result<Op, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "sum" => Op::Sum,
            "prod" | "product" => Op::Prod,
            "max" => Op::Max,
            "min" => Op::Min,
            "avg" => Op::Avg,
            _ => return Err(format!("-o: unknown op {s:?} (sum, prod, max, min, avg)")),
        })
    }

    fn name(self) -> &'static str {
        match self {
            Op::Sum => "sum",
            Op::Prod => "prod",
            Op::Max => "max",
            Op::Min => "min",
            Op::Avg => "avg",
        }
    }
}

/// `-d`'s dtype, in nccl-tests' spelling or ours.
fn parse_dtype(s: &str) -> Result<Dtype, String> {
    match s {
        "half" | "float16" => Ok(Dtype::F16),
        "bfloat16" => Ok(Dtype::Bf16),
        "float" | "float32" => Ok(Dtype::F32),
        "int32" | "int" => Ok(Dtype::I32),
        _ => Dtype::parse(s).map_err(|e| format!("-d: {e}")),
    }
}

fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>()
        .map(|n| n * mult)
        .map_err(|_| format!("not a size: {s:?}"))
}

fn parse_args(args: &[String]) -> Result<Sweep, String> {
    let mut sw = Sweep {
        min: 8,
        max: 1 << 20,
        factor: 2,
        cubes: 1,
        dtype: Dtype::F16,
        op: Op::Sum,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match a.as_str() {
            "-b" | "--minbytes" => sw.min = parse_size(&val(a)?)?,
            "-e" | "--maxbytes" => sw.max = parse_size(&val(a)?)?,
            "-f" | "--stepfactor" => {
                sw.factor = val(a)?
                    .parse()
                    .map_err(|_| "stepfactor must be an integer".to_string())?
            }
            "-d" | "--datatype" => sw.dtype = parse_dtype(&val(a)?)?,
            "-o" | "--op" => sw.op = Op::parse(&val(a)?)?,
            "--cubes" => {
                sw.cubes = val(a)?
                    .parse()
                    .ok()
                    .filter(|&c| c > 0)
                    .ok_or_else(|| "--cubes must be a positive integer".to_string())?
            }
            other => {
                return Err(format!(
                    "ccl_allreduce: unknown argument {other:?} (known: -b, -e, -f, -d, -o, --cubes)"
                ))
            }
        }
    }
    if sw.min < 1 || sw.max < sw.min || sw.factor < 2 {
        return Err(format!(
            "bad sweep: minbytes {} maxbytes {} stepfactor {}",
            sw.min, sw.max, sw.factor
        ));
    }
    Ok(sw)
}

/// At most this many ranks add a non-zero value (0..16) to any one
/// element: every partial sum, in any order, stays an integer within the
/// dtype's exact range (f16 2048, bf16 256, f32 2^24).
fn max_contributors(dtype: Dtype) -> u32 {
    match dtype {
        Dtype::F16 => 128,
        Dtype::Bf16 => 16,
        Dtype::F32 | Dtype::I32 => 1 << 20,
    }
}

/// The rank values of one run: `world_size` contributors, `dtype`, `op`.
struct Values {
    world_size: u32,
    dtype: Dtype,
    op: Op,
    /// Ranks `r` with `(r + i) % stride == 0` contribute to element `i`.
    stride: u64,
}

impl Values {
    fn new(world_size: u32, dtype: Dtype, op: Op) -> Values {
        let stride = world_size.div_ceil(max_contributors(dtype)).max(1) as u64;
        Values {
            world_size,
            dtype,
            op,
            stride,
        }
    }

    /// Rank `rank`'s value of element `i`. `prod`: 1s, and 2s from ranks
    /// below 15 (products up to 2^5); the others: small integers (0..16)
    /// from at most [`max_contributors`] ranks per element. Every partial
    /// result is exact in the dtype, so the check is exact at every world
    /// size (`avg`: the exact sum divided once).
    fn value(&self, rank: u32, i: u64) -> f64 {
        if self.op == Op::Prod {
            return if rank < 15 && (rank as u64 + i).is_multiple_of(3) {
                2.0
            } else {
                1.0
            };
        }
        if !(rank as u64 + i).is_multiple_of(self.stride) {
            return 0.0;
        }
        ((i * 7 + rank as u64 * 13) % 16) as f64
    }

    /// The exact result of element `i`, rounded once to the dtype.
    fn reduce(&self, i: u64) -> f64 {
        let vals = (0..self.world_size).map(|r| self.value(r, i));
        let x = match self.op {
            Op::Sum => vals.sum(),
            Op::Avg => vals.sum::<f64>() * (1.0 / self.world_size as f64),
            Op::Prod => vals.product(),
            Op::Max => vals.fold(f64::MIN, f64::max),
            Op::Min => vals.fold(f64::MAX, f64::min),
        };
        self.dtype.decode(&self.dtype.encode(&[x]))[0]
    }
}

/// The exact all-reduce result of every element. It is periodic in the
/// element index (period 48 x stride), so it is tabulated once per run
/// instead of reducing every rank for every element.
struct Reference {
    results: Vec<f64>,
}

impl Reference {
    fn new(values: &Values) -> Self {
        let period = 48 * values.stride;
        let results = (0..period).map(|i| values.reduce(i)).collect();
        Reference { results }
    }

    fn expected(&self, i: u64) -> f64 {
        self.results[(i % self.results.len() as u64) as usize]
    }
}

/// Elements filled or checked per host call: the guest never holds the
/// whole tensor (a 256 MiB-per-rank size would be 1 GiB of f64).
const PIECE: u64 = 1 << 16;

/// `(first, count)` pieces of `0..count`.
fn pieces(count: u64) -> impl Iterator<Item = (u64, u64)> {
    (0..count)
        .step_by(PIECE as usize)
        .map(move |first| (first, PIECE.min(count - first)))
}

struct CclAllreduce;

impl Bench for CclAllreduce {
    fn run(args: Vec<String>) -> Result<(), String> {
        parse_args(&args)?;
        dist::init_process_group("ahbm")?;
        let world_size = dist::get_world_size()?;
        mp::spawn(world_size, &args)
    }

    fn worker(rank: u32, world_size: u32, args: Vec<String>) -> Result<(), String> {
        let sweep = parse_args(&args)?;
        ahbm::set_device(rank)?;
        // Contributors: every cube of every rank (`--cubes 1`: the ranks).
        let cubes = sweep.cubes as u64;
        let contributors = world_size * sweep.cubes;
        let (dtype, item) = (sweep.dtype, sweep.dtype.itemsize() as u64);
        let values = Values::new(contributors, dtype, sweep.op);
        let reference = Reference::new(&values);
        let mut size = sweep.min;
        while size <= sweep.max {
            // As nccl-tests: whole elements; the reported size is what moves.
            // With --cubes, one cube's tile (the buffer of one contributor).
            let count = size / item;
            if count == 0 {
                size *= sweep.factor;
                continue;
            }
            let total = count * cubes;
            let t = if cubes == 1 {
                torch::zeros(&[count as u32], dtype, "allreduce_buf")?
            } else {
                use torch::DpMode::{Replicate, RowWise};
                let dp = torch::DpPolicy::new(RowWise, Replicate, sweep.cubes, 1);
                torch::zeros_dp(&[sweep.cubes, count as u32], dtype, dp, "allreduce_buf")?
            };
            for (first, n) in pieces(total) {
                let data: Vec<f64> = (first..first + n)
                    .map(|j| values.value(rank * sweep.cubes + (j / count) as u32, j % count))
                    .collect();
                t.copy_from_f64_at(first, &data)?;
            }
            dist::barrier()?;
            let t0 = ahbm::now_ps();
            dist::all_reduce(&t, sweep.op.name())?;
            let t1 = ahbm::now_ps();
            let mut wrong = 0u64;
            for (first, n) in pieces(total) {
                let out = t.to_f64_range(first, n)?;
                wrong += (first..first + n)
                    .zip(out)
                    .filter(|&(j, v)| v != reference.expected(j % count))
                    .count() as u64;
            }
            report::record(
                "all_reduce",
                &report::Row {
                    size_bytes: count * item,
                    count,
                    dtype,
                    redop: sweep.op.name().into(),
                    time_ps: t1 - t0,
                    wrong,
                },
            );
            size *= sweep.factor;
        }
        Ok(())
    }
}

kernbench_guest::export_bench!(CclAllreduce);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_arguments_parse_like_nccl_tests() {
        let a: Vec<String> = ["-b", "1K", "-e", "1M", "-f", "4"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let s = parse_args(&a).unwrap();
        assert_eq!((s.min, s.max, s.factor, s.cubes), (1024, 1 << 20, 4, 1));
        let a = ["--cubes".to_string(), "16".to_string()];
        assert_eq!(parse_args(&a).unwrap().cubes, 16);
        assert!(parse_args(&["--cubes".to_string(), "0".to_string()]).is_err());
        assert!(parse_args(&["-x".to_string()]).is_err());
    }

    #[test]
    fn every_partial_result_is_exact_at_every_world_size() {
        let limit = |d: Dtype| match d {
            Dtype::F16 => 2048.0,
            Dtype::Bf16 => 256.0,
            _ => 16777216.0,
        };
        for dtype in [Dtype::F16, Dtype::Bf16, Dtype::F32, Dtype::I32] {
            for op in [Op::Sum, Op::Prod, Op::Max, Op::Avg] {
                for ws in [1, 2, 4, 16, 17, 128, 129, 273, 1000, 4096] {
                    let v = Values::new(ws, dtype, op);
                    let reference = Reference::new(&v);
                    for i in 0..reference.results.len() as u64 * 2 {
                        let vals: Vec<f64> = (0..ws).map(|r| v.value(r, i)).collect();
                        // Sums and products of all of them bound every
                        // partial result, in any order.
                        if op == Op::Prod {
                            let prod: f64 = vals.iter().product();
                            assert!(prod <= 32.0, "ws {ws} element {i}: {prod}");
                        } else {
                            let sum: f64 = vals.iter().sum();
                            assert!(sum < limit(dtype), "{dtype:?} ws {ws} element {i}: {sum}");
                        }
                        assert_eq!(reference.expected(i), v.reduce(i));
                    }
                }
            }
        }
        // f16 up to 128 ranks: every rank contributes to every element.
        assert_eq!(Values::new(128, Dtype::F16, Op::Sum).stride, 1);
        // avg: the exact sum (0 + 13 + 10 at element 0 of 3 ranks),
        // divided and rounded once.
        let avg = Values::new(3, Dtype::F16, Op::Avg);
        let once = Dtype::F16.decode(&Dtype::F16.encode(&[23.0 * (1.0 / 3.0)]))[0];
        assert_eq!(avg.reduce(0), once);
        assert_ne!(once, 23.0 / 3.0, "f16 rounds it");
    }

    #[test]
    fn dtype_and_op_flags_take_nccl_tests_spellings() {
        let a: Vec<String> = ["-d", "bfloat16", "-o", "max"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let s = parse_args(&a).unwrap();
        assert_eq!((s.dtype, s.op), (Dtype::Bf16, Op::Max));
        let a: Vec<String> = ["-d", "i32", "-o", "PRODUCT"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(parse_args(&a).unwrap().dtype, Dtype::I32);
        assert!(parse_args(&["-o".to_string(), "band".to_string()]).is_err());
        assert!(parse_args(&["-d".to_string(), "f64".to_string()]).is_err());
    }

    #[test]
    fn pieces_cover_every_element_once() {
        for count in [0, 1, PIECE - 1, PIECE, PIECE + 1, 5 * PIECE + 7] {
            let p: Vec<_> = pieces(count).collect();
            assert_eq!(p.iter().map(|&(_, n)| n).sum::<u64>(), count);
            assert!(p.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0));
            assert!(p.iter().all(|&(_, n)| n > 0 && n <= PIECE));
        }
    }
}
