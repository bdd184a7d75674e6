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
            "--cubes" => {
                sw.cubes = val(a)?
                    .parse()
                    .ok()
                    .filter(|&c| c > 0)
                    .ok_or_else(|| "--cubes must be a positive integer".to_string())?
            }
            other => {
                return Err(format!(
                    "ccl_allreduce: unknown argument {other:?} (known: -b, -e, -f, --cubes)"
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

/// At most this many ranks add a non-zero value to any one element.
const MAX_CONTRIBUTORS: u32 = 128;

/// Ranks `r` with `(r + i) % stride == 0` contribute to element `i`, so
/// that at most [`MAX_CONTRIBUTORS`] do at any world size (every rank
/// does up to 128 ranks).
fn stride(world_size: u32) -> u64 {
    world_size.div_ceil(MAX_CONTRIBUTORS).max(1) as u64
}

/// Rank `rank`'s value of element `i`: small integers (0..16) from at most
/// 128 ranks per element, so every partial sum in any reduction order is an
/// integer below 2048 and exact in f16: the reference check is exact at
/// every world size.
fn value(rank: u32, i: u64, world_size: u32) -> f64 {
    if !(rank as u64 + i).is_multiple_of(stride(world_size)) {
        return 0.0;
    }
    ((i * 7 + rank as u64 * 13) % 16) as f64
}

/// The exact all-reduce result of every element. It is periodic in the
/// element index (period 16 x stride), so it is tabulated once per world
/// size instead of summing every rank for every element.
struct Reference {
    sums: Vec<f64>,
}

impl Reference {
    fn new(world_size: u32) -> Self {
        let period = 16 * stride(world_size);
        let sums = (0..period)
            .map(|i| (0..world_size).map(|r| value(r, i, world_size)).sum())
            .collect();
        Reference { sums }
    }

    fn expected(&self, i: u64) -> f64 {
        self.sums[(i % self.sums.len() as u64) as usize]
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
        let reference = Reference::new(contributors);
        let mut size = sweep.min;
        while size <= sweep.max {
            // As nccl-tests: whole elements; the reported size is what moves.
            // With --cubes, one cube's tile (the buffer of one contributor).
            let count = size / Dtype::F16.itemsize() as u64;
            if count == 0 {
                size *= sweep.factor;
                continue;
            }
            let total = count * cubes;
            let t = if cubes == 1 {
                torch::zeros(&[count as u32], Dtype::F16, "allreduce_buf")?
            } else {
                use torch::DpMode::{Replicate, RowWise};
                let dp = torch::DpPolicy::new(RowWise, Replicate, sweep.cubes, 1);
                torch::zeros_dp(
                    &[sweep.cubes, count as u32],
                    Dtype::F16,
                    dp,
                    "allreduce_buf",
                )?
            };
            for (first, n) in pieces(total) {
                let data: Vec<f64> = (first..first + n)
                    .map(|j| {
                        value(
                            rank * sweep.cubes + (j / count) as u32,
                            j % count,
                            contributors,
                        )
                    })
                    .collect();
                t.copy_from_f64_at(first, &data)?;
            }
            dist::barrier()?;
            let t0 = ahbm::now_ps();
            dist::all_reduce(&t, "sum")?;
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
                    size_bytes: count * Dtype::F16.itemsize() as u64,
                    count,
                    dtype: Dtype::F16,
                    redop: "sum".into(),
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
    fn values_sum_exactly_in_f16_at_every_world_size() {
        for ws in [1, 2, 4, 64, 128, 129, 273, 499, 1000, 4096] {
            let reference = Reference::new(ws);
            for i in 0..reference.sums.len() as u64 * 2 {
                let contributors: Vec<f64> = (0..ws)
                    .map(|r| value(r, i, ws))
                    .filter(|&v| v != 0.0)
                    .collect();
                assert!(contributors.len() <= MAX_CONTRIBUTORS as usize, "ws {ws}");
                // Every partial sum, in any order, stays below f16's
                // exact-integer limit: the sum of all of them does.
                let total: f64 = contributors.iter().sum();
                assert!(total < 2048.0, "ws {ws} element {i}: {total}");
                assert_eq!(reference.expected(i), total, "ws {ws} element {i}");
            }
        }
        // Up to 128 ranks, every rank contributes to every element.
        assert_eq!(stride(128), 1);
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
