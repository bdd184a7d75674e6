//! `gpt3_qkv`: a GPT-3 attention block's projections with Megatron-LM's
//! tensor parallelism across the ranks (one rank per SIP), the seed bench
//! of the same name.
//!
//! Megatron splits the fused QKV projection **column-wise** (rank r holds
//! the weight columns, and bias, of its share of the heads: no
//! communication), and the output projection **row-wise** (rank r holds the
//! rows matching its heads, giving a partial sum of the output), followed
//! by the **all-reduce** of that output — the one collective of the block's
//! forward pass. Per rank, with `t` = world size:
//!
//! 1. `qkv_proj`: Q_r, K_r, V_r = X·W{q,k,v}_r + b{q,k,v}_r, each
//!    `[s, h/t]` (the fused `[h, 3h/t]` GEMM run as three GEMMs over the
//!    same X rows, each with its bias as a `gemm-bias` composite);
//! 2. the attention core (softmax(QKᵀ)V) is **not modelled**: the context
//!    is V_r itself, so the output projection gets a real `[s, h/t]` input;
//! 3. `out_proj`: Z_r = V_r·Wo_r, Wo_r `[h/t, h]` (a partial sum `[s, h]`);
//! 4. `all_reduce`: Z = Σ_r Z_r with `dist.all_reduce` (ccl.yaml's
//!    algorithm).
//!
//! Inside a SIP the work is split by sequence rows over `--cubes C` ×
//! `--pes P` PEs (X, Q/K/V placed row-wise, the weights replicated on
//! every PE); Z is one block on cube 0 / PE 0 (what the collective
//! takes), so the output projection's stores cross the NoC to it.
//!
//! **Checks.** Every rank checks its Q, K, V and Z_r, and the all-reduced
//! Z, against a reference computed here in f64 with the machine's
//! roundings (each GEMM is summed exactly and rounded once to f16). The
//! error of an element is `|got − ref|` over the sum of the absolute
//! values of its terms; the tolerance is the unit roundoff u = 2^-11 for
//! one rounding (the projections), and (t − 1)·u for the all-reduce,
//! whose t − 1 f16 additions round in an order the algorithm chooses.
//!
//! Arguments: `--seq S` (default 128), `--hidden H` (default 512; GPT-3
//! 175B has 12288, which fits only with a small `--seq` and much patience:
//! the reference runs in the guest), `--cubes C` (1), `--pes P` (4),
//! `--tile-m R` (rows per matrix-unit command, 32).

use kernbench_guest::bench::torch::{DpMode, DpPolicy, Tensor};
use kernbench_guest::bench::{ahbm, dist, mp, report, torch};
use kernbench_guest::kernels::{matmul_ref, test_value, Check, GemmArgs};
use kernbench_guest::{Bench, Dtype};

const DT: Dtype = Dtype::F16;

#[derive(Debug, Clone, Copy, PartialEq)]
struct Options {
    seq: u32,
    hidden: u32,
    cubes: u32,
    pes: u32,
    tile_m: u32,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        seq: 128,
        hidden: 512,
        cubes: 1,
        pes: 4,
        tile_m: 32,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let v = it
            .next()
            .ok_or_else(|| format!("gpt3_qkv: {a} needs a value"))?;
        let n = v
            .parse::<u32>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("gpt3_qkv: {a} {v:?} is not a positive integer"))?;
        match a.as_str() {
            "--seq" => o.seq = n,
            "--hidden" => o.hidden = n,
            "--cubes" => o.cubes = n,
            "--pes" => o.pes = n,
            "--tile-m" => o.tile_m = n,
            other => {
                return Err(format!(
                    "gpt3_qkv: unknown argument {other:?} \
                     (known: --seq, --hidden, --cubes, --pes, --tile-m)"
                ))
            }
        }
    }
    Ok(o)
}

/// The deterministic weights and inputs (every rank can make every
/// rank's), scaled so that sums stay well inside f16's range.
struct Model {
    o: Options,
    t: u32,
}

/// Seeds of the tensors: X, then per rank and projection (q, k, v, o)
/// the weight and the bias.
fn seed(rank: u32, what: u64) -> u64 {
    1 + u64::from(rank) * 16 + what
}

impl Model {
    fn shard(&self) -> u32 {
        self.o.hidden / self.t
    }
    fn values(&self, seed: u64, count: u32, scale: f64) -> Vec<f64> {
        (0..u64::from(count))
            .map(|i| test_value(seed, i) * scale)
            .collect()
    }
    fn x(&self) -> Vec<f64> {
        self.values(0, self.o.seq * self.o.hidden, 1.0)
    }
    /// Weight `which` (0 q, 1 k, 2 v: `[h, h/t]`; 3 o: `[h/t, h]`) of `rank`.
    fn weight(&self, rank: u32, which: u64) -> Vec<f64> {
        self.values(seed(rank, which), self.o.hidden * self.shard(), 1.0 / 16.0)
    }
    fn bias(&self, rank: u32, which: u64) -> Vec<f64> {
        self.values(seed(rank, 8 + which), self.shard(), 1.0)
    }
    /// Q, K or V of `rank` as the machine computes it (rounded to f16).
    fn projection(&self, rank: u32, which: u64) -> (Vec<f64>, Vec<f64>) {
        let (s, h, c) = (
            self.o.seq as usize,
            self.o.hidden as usize,
            self.shard() as usize,
        );
        let b = self.bias(rank, which);
        matmul_ref(&self.x(), &self.weight(rank, which), Some(&b), (s, c, h))
    }
    /// Z_r as the machine computes it, and its scale.
    fn partial(&self, rank: u32) -> (Vec<f64>, Vec<f64>) {
        let (s, h, c) = (
            self.o.seq as usize,
            self.o.hidden as usize,
            self.shard() as usize,
        );
        let v = round(&self.projection(rank, 2).0);
        matmul_ref(&v, &self.weight(rank, 3), None, (s, h, c))
    }
}

/// Values rounded to f16, as stored.
fn round(v: &[f64]) -> Vec<f64> {
    DT.decode(&DT.encode(v))
}

/// A device tensor of `shape` with `values`.
fn tensor(shape: &[u32], dp: DpPolicy, name: &str, values: &[f64]) -> Result<Tensor, String> {
    let t = torch::zeros_dp(shape, DT, dp, name)?;
    t.copy_from_f64(values)?;
    Ok(t)
}

/// The bytes of one shard: the distance between consecutive shards in
/// the tensor's virtual range (its shards are equal here).
fn shard_bytes(t: &Tensor) -> u64 {
    t.shards().first().map_or(0, |s| s.nbytes)
}

/// One rank's block: returns its rows for the table.
fn rank_block(rank: u32, t: u32, o: Options) -> Result<Vec<report::KernelRow>, String> {
    let model = Model { o, t };
    let (s, h, c) = (o.seq, o.hidden, model.shard());
    let pes = o.cubes * o.pes;
    let rows_each = s / pes;
    let split = DpPolicy::new(DpMode::RowWise, DpMode::RowWise, o.cubes, o.pes);
    let everywhere = DpPolicy::new(DpMode::Replicate, DpMode::Replicate, o.cubes, o.pes);
    let x = tensor(&[s, h], split, "X", &model.x())?;
    let gemm =
        |a: &Tensor, (k, n): (u32, u32), b: &Tensor, bias: Option<&Tensor>, c_ptr| GemmArgs {
            m: rows_each,
            n,
            k,
            a_ptr: a.data_ptr(),
            b_ptr: b.data_ptr(),
            b_stride: shard_bytes(b),
            bias: bias.map(|t| (t.data_ptr(), shard_bytes(t))),
            c_ptr,
            dtype: DT,
            out_dtype: DT,
            num_pes: o.pes,
            tile_m: o.tile_m,
        };
    let u = DT.unit_roundoff();
    let shape = format!("s={s} h={h} tp={t}");
    let row = |name: &str, flops, time_ps, check: Check, tolerance| report::KernelRow {
        name: name.into(),
        shape: shape.clone(),
        dtype: DT,
        pes,
        flops,
        time_ps,
        checked: check.checked,
        wrong: check.wrong,
        max_rel_err: check.max_rel_err,
        tolerance,
    };

    // 1. Q, K, V (column-parallel: no communication).
    let (mut qkv_time, mut qkv_check, mut v_out) = (0, Check::default(), None);
    for which in 0..3u64 {
        let w = tensor(&[h, c], everywhere, "Wqkv", &model.weight(rank, which))?;
        let b = tensor(&[c], everywhere, "bqkv", &model.bias(rank, which))?;
        let out = torch::zeros_dp(&[s, c], DT, split, "QKV")?;
        let g = gemm(&x, (h, c), &w, Some(&b), out.data_ptr());
        qkv_time += torch::launch("gemm", &out, &g.to_args())?;
        let (want, scale) = model.projection(rank, which);
        qkv_check = qkv_check.merge(Check::of(&out.to_f64(), &want, &scale, u));
        v_out = Some(out);
    }
    let v = v_out.expect("three projections ran");
    let qkv_flops = 3 * 2 * u64::from(s) * u64::from(h) * u64::from(c);

    // 3. The output projection's partial sum into Z (one block).
    let wo = tensor(&[c, h], everywhere, "Wo", &model.weight(rank, 3))?;
    let z = torch::zeros(&[s, h], DT, "Z")?;
    let g = gemm(&v, (c, h), &wo, None, z.data_ptr());
    let out_time = torch::launch("gemm", &v, &g.to_args())?;
    let (zr, zr_scale) = model.partial(rank);
    let out_check = Check::of(&z.to_f64(), &zr, &zr_scale, u);

    // 4. The all-reduce of Z.
    let t0 = ahbm::now_ps();
    dist::all_reduce(&z, "sum").map_err(String::from)?;
    let ar_time = ahbm::now_ps() - t0;
    let (mut want, mut scale) = (vec![0f64; zr.len()], vec![0f64; zr.len()]);
    for r in 0..t {
        let p = round(&model.partial(r).0);
        for (i, v) in p.iter().enumerate() {
            want[i] += v;
            scale[i] += v.abs();
        }
    }
    let ar_tol = f64::from(t - 1) * u;
    let ar_check = Check::of(&z.to_f64(), &want, &scale, ar_tol);

    let out_flops = 2 * u64::from(s) * u64::from(c) * u64::from(h);
    Ok(vec![
        row("qkv_proj", qkv_flops, qkv_time, qkv_check, u),
        row("out_proj", out_flops, out_time, out_check, u),
        row("all_reduce", 0, ar_time, ar_check, ar_tol),
        row(
            "attn_block",
            qkv_flops + out_flops,
            qkv_time + out_time + ar_time,
            qkv_check.merge(out_check).merge(ar_check),
            ar_tol.max(u),
        ),
    ])
}

struct Gpt3Qkv;

impl Bench for Gpt3Qkv {
    fn run(args: Vec<String>) -> Result<(), String> {
        let o = parse_args(&args)?;
        dist::init_process_group("ahbm")?;
        let t = dist::get_world_size()?;
        let pes = o.cubes * o.pes;
        if o.hidden % t != 0 || o.seq % pes != 0 {
            return Err(format!(
                "gpt3_qkv: --hidden {} must divide by the {t} ranks and --seq {} by the \
                 {pes} PEs per rank (--cubes x --pes)",
                o.hidden, o.seq
            ));
        }
        mp::spawn(t, &args)
    }

    fn worker(rank: u32, world_size: u32, args: Vec<String>) -> Result<(), String> {
        let o = parse_args(&args)?;
        ahbm::set_device(rank)?;
        for row in rank_block(rank, world_size, o)? {
            report::record_kernel(&row);
        }
        Ok(())
    }
}

kernbench_guest::export_bench!(Gpt3Qkv);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse_and_refuse_clearly() {
        let o = parse_args(&["--seq".into(), "64".into(), "--pes".into(), "2".into()]).unwrap();
        assert_eq!((o.seq, o.pes, o.hidden), (64, 2, 512));
        let e = parse_args(&["--seq".into(), "x".into()]).unwrap_err();
        assert!(e.contains("--seq \"x\" is not a positive integer"), "{e}");
        assert!(parse_args(&["--heads".into(), "2".into()])
            .unwrap_err()
            .contains("unknown"));
    }

    #[test]
    fn the_partial_sums_use_the_rounded_projection() {
        let m = Model {
            o: parse_args(&["--seq".into(), "4".into(), "--hidden".into(), "8".into()]).unwrap(),
            t: 2,
        };
        let (z, scale) = m.partial(1);
        assert_eq!((z.len(), scale.len()), (32, 32));
        assert!(z.iter().zip(&scale).all(|(z, s)| z.abs() <= *s + 1e-12));
    }
}
