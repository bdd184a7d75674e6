//! `train_step`: one training iteration of a GPT-style transformer with
//! Megatron-LM tensor parallelism (TP) inside groups of `--tp` ranks and
//! PyTorch DDP data parallelism (DP) across `--dp` such groups, one rank
//! per SIP (world = tp × dp; rank r is TP rank r % tp of DP replica
//! r / tp, the mesh `(dp, tp)`), written as a Megatron/DDP script would be.
//!
//! Per micro-batch (`--seq S` tokens, hidden size `--hidden H`), per layer,
//! on every TP rank (the GEMMs are charged with `ahbm.gemm` by the
//! device's roofline, bf16; the collectives move real bf16 data):
//!
//! * **forward**: QKV `[S, H] x [H, 3H/tp]`; attention scores and context
//!   `[S, S] x [S, H/tp]` (two GEMMs); the output projection
//!   `[S, H/tp] x [H/tp, H]`, then the TP **all-reduce** of the `[S, H]`
//!   activations (blocking: the next GEMM needs it); MLP `[S, H] x [H, 4H/tp]`
//!   and `[S, 4H/tp] x [4H/tp, H]`, then the second TP all-reduce;
//! * **backward** (layers in reverse): each forward GEMM's data-gradient
//!   and weight-gradient GEMMs (the same sizes), and the two TP
//!   all-reduces of the input gradients; after the last micro-batch's
//!   backward of a layer, its weight gradients (12·H²/tp elements) are
//!   all-reduced over the DP group **asynchronously** in buckets of at
//!   most `--bucket-mb` MiB, overlapping the backward of the layers below
//!   (DDP's gradient buckets);
//! * **optimizer**: every DP bucket waited for, then one pass reading and
//!   writing the rank's parameters (a memory-bound roofline: a GEMM of
//!   P × 1 × 1).
//!
//! Every collective's result is checked (`#wrong`): the inputs are small
//! integers, so every sum is exact in bf16. Output: a header line per
//! rank with the iteration time and its phases (forward, backward, the
//! wait for the DP buckets the backward did not hide, optimizer); two
//! `all_reduce` rows (each rank's, merged), the TP one (activation size,
//! the mean time of one call, blocking) and the DP one (bucket bytes of
//! a rank, the time the optimizer waited for them); then the per-rank
//! breakdown (compute, communication, exposed, idle).
//!
//! Arguments: `--tp T` (2), `--dp D` (world / T), `--layers L` (2),
//! `--hidden H` (256), `--seq S` (128), `--micro-batches M` (1),
//! `--bucket-mb B` (25), `--algorithm NAME` (the ccl.yaml entry serving
//! the TP and DP groups, `pg_options`; `ring_rsag_allreduce_groups`,
//! whose 256 KiB slots leave the PEs' TCM room for both groups' rings
//! beside the default group's).

use kernbench_guest::bench::dist::{self, ProcessGroup, Work};
use kernbench_guest::bench::{ahbm, mp, report, torch};
use kernbench_guest::{Bench, Dtype};

const DT: Dtype = Dtype::Bf16;

#[derive(Debug, Clone, PartialEq)]
struct Options {
    algorithm: String,
    tp: u32,
    dp: Option<u32>,
    layers: u32,
    hidden: u32,
    seq: u32,
    micro_batches: u32,
    bucket_mb: u32,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        algorithm: "ring_rsag_allreduce_groups".to_string(),
        tp: 2,
        dp: None,
        layers: 2,
        hidden: 256,
        seq: 128,
        micro_batches: 1,
        bucket_mb: 25,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let v = it
            .next()
            .ok_or_else(|| format!("train_step: {a} needs a value"))?;
        if a == "--algorithm" {
            o.algorithm = v.clone();
            continue;
        }
        let n = v
            .parse::<u32>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("train_step: {a} {v:?} is not a positive integer"))?;
        match a.as_str() {
            "--tp" => o.tp = n,
            "--dp" => o.dp = Some(n),
            "--layers" => o.layers = n,
            "--hidden" => o.hidden = n,
            "--seq" => o.seq = n,
            "--micro-batches" => o.micro_batches = n,
            "--bucket-mb" => o.bucket_mb = n,
            other => {
                return Err(format!(
                    "train_step: unknown argument {other} (--tp, --dp, --layers, --hidden, --seq, \
                     --micro-batches, --bucket-mb, --algorithm)"
                ))
            }
        }
    }
    Ok(o)
}

/// Rank r's element i of a tensor it all-reduces: a small integer, so
/// every sum is exact in bf16.
fn value(rank: u32, i: u64) -> f64 {
    ((rank as u64 + i) % 4 + 1) as f64
}

fn filled(rank: u32, n: u64, name: &str) -> Result<torch::Tensor, String> {
    let t = torch::zeros(&[n as u32], DT, name)?;
    if report::data_kept() {
        t.copy_from_f64(&(0..n).map(|i| value(rank, i)).collect::<Vec<_>>())?;
    }
    Ok(t)
}

/// Elements of `t` that are not the sum of `ranks`' values (none
/// checked in a `--timing-only` run).
fn wrong(t: &torch::Tensor, ranks: &[u32]) -> u64 {
    if !report::data_kept() {
        return 0;
    }
    t.to_f64()
        .iter()
        .enumerate()
        .filter(|(i, &g)| g != ranks.iter().map(|&r| value(r, *i as u64)).sum::<f64>())
        .count() as u64
}

/// One rank's step, its rows recorded.
struct Step<'a> {
    o: Options,
    rank: u32,
    tp: &'a ProcessGroup,
    dp: &'a ProcessGroup,
    /// TP all-reduces: count, total ps, wrong elements.
    tp_calls: (u64, u64, u64),
}

impl Step<'_> {
    fn gemm(&self, m: u32, n: u32, k: u32) -> Result<(), String> {
        ahbm::gemm(m, n, k, DT).map(|_| ())
    }

    /// The TP all-reduce of the `[S, H]` activations (or their gradients).
    fn tp_all_reduce(&mut self) -> Result<(), String> {
        let n = self.o.seq as u64 * self.o.hidden as u64;
        let x = filled(self.rank, n, "activations")?;
        let t0 = ahbm::now_ps();
        self.tp.all_reduce(&x, "sum")?;
        self.tp_calls.0 += 1;
        self.tp_calls.1 += ahbm::now_ps() - t0;
        self.tp_calls.2 += wrong(&x, self.tp.ranks());
        Ok(())
    }

    fn forward_layer(&mut self) -> Result<(), String> {
        let (s, h, t) = (self.o.seq, self.o.hidden, self.o.tp);
        self.gemm(s, 3 * h / t, h)?; // QKV
        self.gemm(s, s, h / t)?; // attention scores
        self.gemm(s, h / t, s)?; // attention context
        self.gemm(s, h, h / t)?; // output projection
        self.tp_all_reduce()?;
        self.gemm(s, 4 * h / t, h)?; // MLP up
        self.gemm(s, h, 4 * h / t)?; // MLP down
        self.tp_all_reduce()
    }

    fn backward_layer(&mut self) -> Result<(), String> {
        let (s, h, t) = (self.o.seq, self.o.hidden, self.o.tp);
        for _ in 0..2 {
            // Data and weight gradients of each GEMM, MLP first.
            self.gemm(s, h, 4 * h / t)?;
        }
        for _ in 0..2 {
            self.gemm(s, 4 * h / t, h)?;
        }
        self.tp_all_reduce()?;
        for _ in 0..2 {
            self.gemm(s, h, h / t)?;
            self.gemm(s, h / t, s)?;
            self.gemm(s, s, h / t)?;
            self.gemm(s, 3 * h / t, h)?;
        }
        self.tp_all_reduce()
    }

    /// The weight gradients of one layer, all-reduced over the DP group
    /// in buckets: the works and the buckets, to check after the wait.
    fn reduce_gradients(&self) -> Result<Vec<(Work, torch::Tensor)>, String> {
        let per_layer = 12 * self.o.hidden as u64 * self.o.hidden as u64 / self.o.tp as u64;
        let bucket = (self.o.bucket_mb as u64 * (1 << 20) / (DT.itemsize() as u64)).max(1);
        let mut out = Vec::new();
        let mut left = per_layer;
        while left > 0 {
            let n = left.min(bucket);
            let g = filled(self.rank, n, "gradients")?;
            out.push((self.dp.all_reduce_async(&g, "sum")?, g));
            left -= n;
        }
        Ok(out)
    }
}

fn row(name: &str, bytes: u64, time_ps: u64, wrong: u64) {
    report::record(
        name,
        &report::Row {
            size_bytes: bytes,
            count: bytes / (DT.itemsize() as u64),
            dtype: DT,
            redop: "sum".into(),
            time_ps,
            wrong,
        },
    );
}

struct TrainStep;

impl Bench for TrainStep {
    fn run(args: Vec<String>) -> Result<(), String> {
        let o = parse_args(&args)?;
        dist::init_process_group("ahbm")?;
        let world = dist::get_world_size()?;
        let dp = o.dp.unwrap_or((world / o.tp).max(1));
        if o.tp * dp != world {
            return Err(format!(
                "train_step: --tp {} x --dp {dp} = {} ranks, but the machine has {world} SIPs \
                 (set system.sips.count, or choose --tp and --dp whose product is {world})",
                o.tp,
                o.tp * dp
            ));
        }
        if o.hidden % o.tp != 0 {
            return Err(format!(
                "train_step: --hidden {} must divide by --tp {}",
                o.hidden, o.tp
            ));
        }
        let per_rank = 12 * o.hidden as u64 * o.hidden as u64 / o.tp as u64 * o.layers as u64;
        report::note(&format!(
            "train_step: tp {} x dp {dp}, {} layers, hidden {}, seq {}, {} micro-batch(es), \
             bf16; {per_rank} parameters per rank",
            o.tp, o.layers, o.hidden, o.seq, o.micro_batches
        ));
        mp::spawn(world, &args)
    }

    fn worker(rank: u32, world: u32, args: Vec<String>) -> Result<(), String> {
        let o = parse_args(&args)?;
        ahbm::set_device(rank)?;
        let dp_size = world / o.tp;
        // The mesh (dp, tp): TP groups are consecutive ranks, DP groups
        // the ranks of one TP index.
        let tp_lists: Vec<Vec<u32>> = (0..dp_size)
            .map(|d| (d * o.tp..(d + 1) * o.tp).collect())
            .collect();
        let dp_lists: Vec<Vec<u32>> = (0..o.tp)
            .map(|t| (0..dp_size).map(|d| d * o.tp + t).collect())
            .collect();
        // Every rank makes every group, in the same order (PyTorch's
        // rule), each served by the groups' algorithm (`pg_options`).
        let mine = |lists: &[Vec<u32>]| -> Result<ProcessGroup, String> {
            let mut found = None;
            for l in lists {
                let g = dist::new_group_with_algorithm(l, &o.algorithm)?;
                if l.contains(&rank) {
                    found = Some(g);
                }
            }
            found.ok_or_else(|| format!("rank {rank} is in no group of {lists:?}"))
        };
        let tp = mine(&tp_lists)?;
        let dp = mine(&dp_lists)?;
        let mut step = Step {
            o: o.clone(),
            rank,
            tp: &tp,
            dp: &dp,
            tp_calls: (0, 0, 0),
        };
        let start = ahbm::now_ps();
        let mut forward = 0;
        let mut backward = 0;
        let mut buckets = Vec::new();
        for mb in 0..o.micro_batches {
            let t0 = ahbm::now_ps();
            for _ in 0..o.layers {
                step.forward_layer()?;
            }
            let t1 = ahbm::now_ps();
            for _ in 0..o.layers {
                step.backward_layer()?;
                if mb + 1 == o.micro_batches {
                    // DDP: this layer's gradients are ready; reduce them
                    // while the layers below run their backward.
                    buckets.extend(step.reduce_gradients()?);
                }
            }
            forward += t1 - t0;
            backward += ahbm::now_ps() - t1;
        }
        let t0 = ahbm::now_ps();
        let mut dp_wrong = 0;
        let mut dp_bytes = 0;
        for (w, g) in &buckets {
            w.wait()?;
            dp_wrong += wrong(g, dp.ranks());
            dp_bytes += g.nbytes();
        }
        let dp_wait = ahbm::now_ps() - t0;
        let params = 12 * o.hidden * o.hidden / o.tp * o.layers;
        let t1 = ahbm::now_ps();
        ahbm::gemm(params, 1, 1, DT)?;
        let optimizer = ahbm::now_ps() - t1;
        let total = ahbm::now_ps() - start;
        let act = o.seq as u64 * o.hidden as u64 * (DT.itemsize() as u64);
        let (calls, tp_ps, tp_wrong) = step.tp_calls;
        let us = |ps: u64| ps as f64 / 1e6;
        report::note(&format!(
            "rank {rank}: step {:.3} us = forward {:.3} + backward {:.3} + DP wait {:.3} + \
             optimizer {:.3}; TP group {:?}, DP group {:?}",
            us(total),
            us(forward),
            us(backward),
            us(dp_wait),
            us(optimizer),
            tp.ranks(),
            dp.ranks()
        ));
        row("all_reduce", act, tp_ps / calls.max(1), tp_wrong);
        row("all_reduce", dp_bytes, dp_wait, dp_wrong);
        Ok(())
    }
}

kernbench_guest::export_bench!(TrainStep);
