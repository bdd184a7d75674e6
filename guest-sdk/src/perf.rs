//! The nccl-tests driver of KernBench's collective benches
//! (`ccl_allreduce`, `ccl_allgather`, `ccl_reducescatter`,
//! `ccl_broadcast`, `ccl_reduce`, `ccl_alltoall`, `ccl_sendrecv`): the
//! driver initialises the `ahbm` process group and spawns one rank per
//! SIP; each rank sweeps the sizes, fills its input with the exact values
//! of [`crate::reference`], runs the collective, checks every element of
//! its output against the reference and reports the simulated time.
//! Fill and check go in pieces of 64 Ki elements, so the guest's memory
//! does not grow with the size.
//!
//! Flags (as nccl-tests): `-b/--minbytes`, `-e/--maxbytes` (K/M/G
//! suffixes), `-f/--stepfactor`, `-n/--iters` (timed iterations; the time
//! reported is their mean — the simulation is deterministic, so one is
//! enough and the default), `-w/--warmup_iters` (untimed, default 0),
//! `-c/--check N` (check iterations, default 1; 0: none), `-d/--datatype`
//! (nccl-tests' names — all but f8e4m3 and f8e5m2 are modelled — or
//! ours, i8, u8, i32, u32, i64, u64, f16, f32, f64, bf16; `all`: every
//! modelled one), `-o/--op` (sum,
//! prod, max, min, avg; `all`), `-r/--root` (broadcast and reduce; `all`
//! or `-1`: every rank in turn), `-a/--average` (how the host combines
//! the ranks' times: 0 rank 0, 1 mean, 2 min, 3 max — the default here,
//! the collective's completion; nccl-tests' default is 1). `--cubes N`
//! (all-reduce only): every cube is a contributor (see `ccl_allreduce`);
//! without it, the driver asks the algorithm's placement
//! (`distributed.shards-wanted`) and places the tensor over that many
//! cubes, saying so in the report's header.
//!
//! Each rank reports its rows with `report.record-perf` in nccl-tests'
//! layout: the root of broadcast and reduce, and the variant measured —
//! in place for all-reduce, broadcast and reduce (PyTorch's calls work
//! in place), out of place for the others; the other block is not run
//! (`N/A`). `#wrong` is none with `-c 0`.
//!
//! The loops nest as nccl-tests': dtype, then op, then root, then size
//! (all-reduce and reduce-scatter: dtype, op; broadcast: dtype, root;
//! reduce: dtype, op, root; the others: dtype). `avg` of an integer
//! dtype is the sum divided, truncating toward zero, as NCCL's.
//!
//! `-c N`: the first check reads the output of the last timed iteration;
//! each further one refills the inputs, runs the collective again and
//! checks it. A rank reports the count of its first check that finds a
//! wrong element, as nccl-tests stops at the first; every rank runs all
//! `N` (a rank that stopped alone would leave its peers waiting). The
//! inputs are the same each time: the simulation is deterministic.
//!
//! Sizes are nccl-tests': the larger of a rank's buffers (all-gather's
//! output, reduce-scatter's input, all-to-all's whole buffer), rounded
//! down to whole elements, and for those three to a multiple of the world
//! size. `ccl_sendrecv` pairs ranks 2i → 2i + 1 (blocking `send` /
//! `recv`; an odd last rank idles): its time is one transfer.

use crate::bench::{ahbm, dist, mp, report, torch};
use crate::reference::{expected, expected_output, Expected, Values};
use crate::{Call, Collective, Dtype, RedOp};

/// What a bench measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    Collective(Collective),
    /// Blocking `send` / `recv` between ranks 2i and 2i + 1.
    SendRecv,
}

impl Measure {
    /// The report's collective column.
    pub fn name(self) -> &'static str {
        match self {
            Measure::Collective(c) => c.name(),
            Measure::SendRecv => "sendrecv",
        }
    }

    /// Whether the collective has a root (broadcast, reduce).
    fn rooted(self) -> bool {
        matches!(
            self,
            Measure::Collective(Collective::Broadcast | Collective::Reduce)
        )
    }

    fn reduces(self) -> bool {
        matches!(
            self,
            Measure::Collective(
                Collective::AllReduce | Collective::Reduce | Collective::ReduceScatter
            )
        )
    }

    /// Elements of the call's per-rank parameter (nccl-tests' count) for
    /// `count` reported elements on `ws` ranks: one rank's block where the
    /// size is split into blocks, the whole size otherwise.
    fn block(self, count: u64, ws: u32) -> u64 {
        if self.per_rank_blocks() {
            count / ws as u64
        } else {
            count
        }
    }

    /// Whether the reported size is split into one block per rank.
    fn per_rank_blocks(self) -> bool {
        matches!(
            self,
            Measure::Collective(
                Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll
            )
        )
    }
}

/// `-r`: one root, or every rank in turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Roots {
    One(u32),
    All,
}

/// The sweep and options of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Sweep {
    pub min: u64,
    pub max: u64,
    pub factor: u64,
    pub iters: u32,
    pub warmup: u32,
    /// Check iterations (`-c`; 0: no check).
    pub check: u32,
    /// Fill the inputs with the reference values (false in a
    /// `--timing-only` run: the host keeps no bytes).
    pub fill: bool,
    pub dtypes: Vec<Dtype>,
    pub ops: Vec<RedOp>,
    pub roots: Roots,
    /// Cubes the all-reduce tensor is placed over row-wise (1: one block).
    pub cubes: u32,
    /// `--cubes` was given: the bench does not place by the algorithm.
    pub cubes_given: bool,
    /// How the host combines the ranks' times (`-a`).
    pub aggregation: report::Aggregation,
}

/// One case of the loops: what one stretch of sizes runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Case {
    pub dtype: Dtype,
    pub op: RedOp,
    pub root: u32,
}

/// nccl-tests' dtypes in its order, with the modelled ones' [`Dtype`].
pub const NCCL_DTYPES: [(&str, Option<Dtype>); 12] = [
    ("int8", Some(Dtype::I8)),
    ("uint8", Some(Dtype::U8)),
    ("int32", Some(Dtype::I32)),
    ("uint32", Some(Dtype::U32)),
    ("int64", Some(Dtype::I64)),
    ("uint64", Some(Dtype::U64)),
    ("half", Some(Dtype::F16)),
    ("float", Some(Dtype::F32)),
    ("double", Some(Dtype::F64)),
    ("bfloat16", Some(Dtype::Bf16)),
    ("f8e4m3", None),
    ("f8e5m2", None),
];

/// `-d`'s dtypes: one, in nccl-tests' spelling or ours, or `all` (every
/// modelled one, in nccl-tests' order).
pub fn parse_dtypes(s: &str) -> Result<Vec<Dtype>, String> {
    let modelled = || NCCL_DTYPES.iter().filter_map(|&(_, d)| d);
    if s == "all" {
        return Ok(modelled().collect());
    }
    let alias = match s {
        "float16" => Some(Dtype::F16),
        "float32" => Some(Dtype::F32),
        "int" => Some(Dtype::I32),
        "char" => Some(Dtype::I8),
        "uint" => Some(Dtype::U32),
        "float64" => Some(Dtype::F64),
        _ => None,
    };
    match NCCL_DTYPES.iter().find(|&&(n, _)| n == s) {
        Some(&(_, Some(d))) => Ok(vec![d]),
        Some((name, None)) => Err(format!(
            "-d {name}: fp8 is not modelled (the MATH unit has no fp8 arithmetic); the \
             modelled dtypes are {} (or {})",
            NCCL_DTYPES
                .iter()
                .filter(|(_, d)| d.is_some())
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", "),
            modelled().map(Dtype::name).collect::<Vec<_>>().join(", ")
        )),
        None => match alias {
            Some(d) => Ok(vec![d]),
            None => Dtype::parse(s)
                .map(|d| vec![d])
                .map_err(|e| format!("-d: {e}, or all")),
        },
    }
}

/// `-d`'s dtype (one): see [`parse_dtypes`].
pub fn parse_dtype(s: &str) -> Result<Dtype, String> {
    match parse_dtypes(s)?.as_slice() {
        [d] => Ok(*d),
        _ => Err(format!("-d {s}: one dtype is wanted here")),
    }
}

/// `-o`'s ops: one (nccl-tests' names or PyTorch's, any case) or `all`.
/// `mulsum` (premul_sum) multiplies each rank's input by nccl-tests'
/// factor for it ([`crate::reference::premul_factor`]: 1 on even ranks,
/// 2 on odd ones).
fn parse_ops(bench: &str, s: &str) -> Result<Vec<RedOp>, String> {
    if s == "all" {
        return Ok(RedOp::ALL.to_vec());
    }
    RedOp::from_name(s).map(|o| vec![o]).ok_or_else(|| {
        format!("{bench}: -o: unknown op {s:?} (sum, prod, max, min, avg, mulsum, all)")
    })
}

/// `case.op` as `rank` passes it to `torch.distributed`: with nccl-tests'
/// factor for the rank, for premul_sum.
fn op_of(case: Case, rank: u32) -> String {
    case.op.spelled(crate::reference::premul_factor(rank))
}

/// `-r`: a rank, or `all` / `-1` for every rank in turn (nccl-tests
/// loops the roots for `-1`; it reads `-r all` as 0, against its own
/// usage text, which says `all`).
fn parse_roots(flag: &str, s: &str) -> Result<Roots, String> {
    match s {
        "all" | "-1" => Ok(Roots::All),
        _ => parse_count(flag, s, 0)
            .map(Roots::One)
            .map_err(|e| format!("{e} (or all)")),
    }
}

/// A byte count with an optional K/M/G suffix.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("not a size: {s:?}"))
}

fn parse_count(flag: &str, v: &str, min: u32) -> Result<u32, String> {
    v.parse::<u32>()
        .ok()
        .filter(|&n| n >= min)
        .ok_or_else(|| format!("{flag} must be an integer >= {min}, got {v:?}"))
}

/// Parse the flags of bench `bench` measuring `m`.
pub fn parse_args(bench: &str, m: Measure, args: &[String]) -> Result<Sweep, String> {
    let mut sw = Sweep {
        min: 8,
        max: 1 << 20,
        factor: 2,
        iters: 1,
        warmup: 0,
        check: 1,
        fill: true,
        dtypes: vec![Dtype::F16],
        ops: vec![RedOp::Sum],
        roots: Roots::One(0),
        cubes: 1,
        cubes_given: false,
        aggregation: report::Aggregation::Max,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{bench}: {name} needs a value"))
        };
        match a.as_str() {
            "-b" | "--minbytes" => sw.min = parse_size(&val(a)?)?,
            "-e" | "--maxbytes" => sw.max = parse_size(&val(a)?)?,
            "-f" | "--stepfactor" => sw.factor = parse_count(a, &val(a)?, 2)? as u64,
            "-n" | "--iters" => sw.iters = parse_count(a, &val(a)?, 1)?,
            "-w" | "--warmup_iters" => sw.warmup = parse_count(a, &val(a)?, 0)?,
            "-c" | "--check" => sw.check = parse_count(a, &val(a)?, 0)?,
            "-d" | "--datatype" => {
                let v = val(a)?;
                sw.dtypes = parse_dtypes(&v).map_err(|e| format!("{bench}: {e}"))?;
            }
            "-o" | "--op" => {
                let v = val(a)?;
                sw.ops = parse_ops(bench, &v)?;
                if !m.reduces() {
                    return Err(format!("{bench}: -o: {} does not reduce", m.name()));
                }
            }
            "-r" | "--root" => sw.roots = parse_roots(a, &val(a)?)?,
            "-a" | "--average" => {
                sw.aggregation = match parse_count(a, &val(a)?, 0)? {
                    0 => report::Aggregation::Rank0,
                    1 => report::Aggregation::Mean,
                    2 => report::Aggregation::Min,
                    3 => report::Aggregation::Max,
                    n => {
                        return Err(format!(
                            "{bench}: -a {n}: 0 (rank 0), 1 (mean), 2 (min) or 3 (max)"
                        ))
                    }
                }
            }
            "--cubes" if m == Measure::Collective(Collective::AllReduce) => {
                sw.cubes = parse_count(a, &val(a)?, 1)?;
                sw.cubes_given = true;
            }
            other => {
                return Err(format!(
                "{bench}: unknown argument {other:?} (known: -b, -e, -f, -n, -w, -c, -d, -o, -r, -a{})",
                if m == Measure::Collective(Collective::AllReduce) {
                    ", --cubes"
                } else {
                    ""
                }
            ))
            }
        }
    }
    if sw.min < 1 || sw.max < sw.min {
        return Err(format!(
            "{bench}: bad sweep: minbytes {} maxbytes {}",
            sw.min, sw.max
        ));
    }
    Ok(sw)
}

/// The cases of the sweep on `world_size` ranks, in nccl-tests' order:
/// dtype, then op (collectives that reduce), then root (rooted ones).
pub fn cases(m: Measure, sw: &Sweep, world_size: u32) -> Vec<Case> {
    let ops = if m.reduces() {
        sw.ops.clone()
    } else {
        vec![RedOp::Sum]
    };
    let roots: Vec<u32> = match (m.rooted(), sw.roots) {
        (false, _) => vec![0],
        (true, Roots::One(r)) => vec![r],
        (true, Roots::All) => (0..world_size).collect(),
    };
    let mut out = Vec::new();
    for &dtype in &sw.dtypes {
        for &op in &ops {
            out.extend(roots.iter().map(|&root| Case { dtype, op, root }));
        }
    }
    out
}

/// The sizes of the sweep.
pub fn sizes(sw: &Sweep) -> Vec<u64> {
    let mut v = Vec::new();
    let mut s = sw.min;
    while s <= sw.max {
        v.push(s);
        match s.checked_mul(sw.factor) {
            Some(n) => s = n,
            None => break,
        }
    }
    v
}

/// Elements filled or checked per host call: the guest never holds a
/// whole large tensor.
pub const PIECE: u64 = 1 << 16;

/// `(first, count)` pieces of `0..count`.
pub fn pieces(count: u64) -> impl Iterator<Item = (u64, u64)> {
    (0..count)
        .step_by(PIECE as usize)
        .map(move |first| (first, PIECE.min(count - first)))
}

/// The driver of a collective bench: check the flags, initialise the
/// process group, spawn a worker per rank.
pub fn driver(bench: &str, m: Measure, args: Vec<String>) -> Result<(), String> {
    let sw = parse_args(bench, m, &args)?;
    dist::init_process_group("ahbm")?;
    let world_size = dist::get_world_size()?;
    let mut args = args;
    if m == Measure::Collective(Collective::AllReduce) && !sw.cubes_given {
        // The algorithm's validator may want the tensor over the cubes
        // (lrab_hierarchical_allreduce: one shard per cube): place it so.
        if let Some(n) = dist::shards_wanted(m.name())?.filter(|&n| n > 1) {
            report::note(&format!(
                "placement: each rank's tensor is {n} tiles over {n} cubes of its SIP, one shard \
                 per cube, as the all_reduce algorithm's validator wants (--cubes {n}); sizes \
                 are one tile's"
            ));
            args.extend(["--cubes".to_string(), n.to_string()]);
        }
    }
    mp::spawn(world_size, &args)
}

/// One rank of a collective bench.
pub fn worker(
    bench: &str,
    m: Measure,
    rank: u32,
    world_size: u32,
    args: Vec<String>,
) -> Result<(), String> {
    let mut sw = parse_args(bench, m, &args)?;
    if !report::data_kept() {
        // --timing-only: nothing to fill or check, the times are the same.
        (sw.fill, sw.check) = (false, 0);
    }
    ahbm::set_device(rank)?;
    if let (true, Roots::One(root)) = (m.rooted(), sw.roots) {
        if root >= world_size {
            return Err(format!(
                "{bench}: -r {root} is not a rank (world size {world_size})"
            ));
        }
    }
    for case in cases(m, &sw, world_size) {
        for size in sizes(&sw) {
            let item = case.dtype.itemsize() as u64;
            let mut count = size / item;
            if m.per_rank_blocks() {
                count -= count % world_size as u64;
            }
            if count == 0 {
                continue;
            }
            let (out_of_place, in_place) = match m {
                Measure::Collective(Collective::AllReduce) if sw.cubes > 1 => {
                    all_reduce_cubes(&sw, case, rank, world_size, count)?
                }
                Measure::Collective(c) => collective(c, &sw, case, rank, world_size, count)?,
                // Send / recv have no in-place form (nccl-tests' sendrecv
                // runs one in place between a rank and itself; pairs here
                // are two ranks).
                Measure::SendRecv => match send_recv(&sw, case, rank, world_size, count)? {
                    Some(block) => (Some(block), None),
                    None => continue,
                },
            };
            let row = report::PerfRow {
                size_bytes: count * case.dtype.itemsize() as u64,
                // nccl-tests' count: the elements of the call's per-rank
                // parameter (all-gather's send, reduce-scatter's receive,
                // all-to-all's block), the size's for the others.
                count: m.block(count, world_size),
                dtype: case.dtype,
                redop: redop(case, m),
                root: m.rooted().then_some(case.root),
                out_of_place,
                in_place,
                aggregation: sw.aggregation,
            };
            report::record_perf(m.name(), &row);
        }
    }
    Ok(())
}

fn redop(case: Case, m: Measure) -> String {
    if m.reduces() {
        case.op.nccl_name().into()
    } else {
        "none".into()
    }
}

fn zeros(n: u64, dtype: Dtype, name: &str) -> Result<torch::Tensor, String> {
    let n = u32::try_from(n).map_err(|_| format!("{n} elements are too many for one tensor"))?;
    torch::zeros(&[n], dtype, name)
}

/// Fill `t` from element `at` with rank `rank`'s `n` inputs: pieces
/// copied out of their period's table where they have one (see
/// [`Periodic`]).
fn fill(t: &torch::Tensor, at: u64, values: &Values, rank: u32, n: u64) -> Result<(), String> {
    let periodic = values.inputs(rank);
    let mut data = Vec::with_capacity(PIECE.min(n) as usize);
    for (first, k) in pieces(n) {
        data.clear();
        match &periodic {
            Some(p) => p.extend_piece(first, k, &mut data),
            None => data.extend((first..first + k).map(|i| values.value(rank, i))),
        }
        t.copy_from_f64_at(at + first, &data)?;
    }
    Ok(())
}

/// Elements of `t` from element `at` (`n` of them) that differ from
/// `want(j)` (None: not checked).
fn wrong_in(
    t: &torch::Tensor,
    at: u64,
    n: u64,
    want: impl Fn(u64) -> Option<f64>,
) -> Result<u64, String> {
    let mut wrong = 0;
    for (first, k) in pieces(n) {
        let got = t.to_f64_range(at + first, k)?;
        wrong += (first..first + k)
            .zip(got)
            .filter(|&(j, v)| want(j).is_some_and(|w| w != v))
            .count() as u64;
    }
    Ok(wrong)
}

/// Elements of `t` from element `at` (`n` of them) that differ from the
/// tabulated `want`.
fn wrong_in_table(t: &torch::Tensor, at: u64, n: u64, want: &Expected) -> Result<u64, String> {
    let mut wrong = 0;
    for (first, k) in pieces(n) {
        let got = t.to_f64_range(at + first, k)?;
        wrong += want
            .mismatches(first, &got)
            .ok_or("the expected output is not tabulated")?;
    }
    Ok(wrong)
}

/// What the timed runs of a variant found.
enum Timed {
    /// The mean time of the timed runs.
    Took(u64),
    /// The first call was refused: the algorithm does not run the
    /// variant (its message).
    Refused(String),
}

/// Run `once` `warmup + iters` times (refilling the input before each
/// with `refill`), return the mean time of the timed ones. The first
/// call tells whether the algorithm runs the variant at all: every rank
/// meets the same refusal, before any rank waits.
fn timed(
    sw: &Sweep,
    mut refill: impl FnMut() -> Result<(), String>,
    mut once: impl FnMut() -> Result<(), dist::DistError>,
) -> Result<Timed, String> {
    let mut total = 0u64;
    for i in 0..sw.warmup + sw.iters {
        if sw.fill {
            refill()?;
        }
        dist::barrier()?;
        let t0 = ahbm::now_ps();
        match once() {
            Err(dist::DistError::NotImplementedError(why))
                if i == 0 && why.contains(" out of place: ") =>
            {
                return Ok(Timed::Refused(why));
            }
            other => other?,
        }
        if i >= sw.warmup {
            total += ahbm::now_ps() - t0;
        }
    }
    Ok(Timed::Took(total / sw.iters as u64))
}

/// A measured block: its time, and its wrong elements when checked.
fn measured(sw: &Sweep, time_ps: u64, wrong: u64) -> report::Block {
    report::Block {
        time_ps,
        wrong: (sw.check > 0).then_some(wrong),
    }
}

/// The wrong elements `sw.check` checks find: `count` after the last
/// timed run, then after each further run (refilled with `refill`);
/// the count of the first check that finds any (0: none does).
fn checked(
    sw: &Sweep,
    mut refill: impl FnMut() -> Result<(), String>,
    mut once: impl FnMut() -> Result<(), String>,
    mut count: impl FnMut() -> Result<u64, String>,
) -> Result<u64, String> {
    if sw.check == 0 {
        return Ok(0);
    }
    let mut wrong = count()?;
    for _ in 1..sw.check {
        refill()?;
        dist::barrier()?;
        once()?;
        let now = count()?;
        if wrong == 0 {
            wrong = now;
        }
    }
    Ok(wrong)
}

/// The two blocks of a row: (out of place, in place); none where the
/// variant did not run.
type Blocks = (Option<report::Block>, Option<report::Block>);

/// One variant of one size: the timed runs, then the checks; none when
/// the algorithm runs it in place only (its refusal noted once, by rank
/// 0). Any other error ends the bench.
fn variant(
    sw: &Sweep,
    rank: u32,
    mut refill: impl FnMut() -> Result<(), String>,
    mut once: impl FnMut() -> Result<(), dist::DistError>,
    count: impl FnMut() -> Result<u64, String>,
) -> Result<Option<report::Block>, String> {
    let time_ps = match timed(sw, &mut refill, &mut once)? {
        Timed::Took(t) => t,
        Timed::Refused(why) => {
            // The host prints a note once however often it is said.
            if rank == 0 {
                report::note(&format!("out-of-place block N/A: {why}"));
            }
            return Ok(None);
        }
    };
    let once = || once().map_err(String::from);
    let wrong = checked(sw, &mut refill, once, count)?;
    Ok(Some(measured(sw, time_ps, wrong)))
}

/// One size of a collective, `count` reported elements, in both of
/// nccl-tests' variants: out of place (input and output apart), then in
/// place (one buffer; see `distributed.collective-in-place` for where
/// the input and output lie in it).
fn collective(
    c: Collective,
    sw: &Sweep,
    case: Case,
    rank: u32,
    ws: u32,
    count: u64,
) -> Result<Blocks, String> {
    let m = Measure::Collective(c);
    let block = m.block(count, ws);
    let call = Call {
        collective: c,
        dtype: case.dtype,
        op: case.op,
        root: case.root,
        block,
        world_size: ws,
        cube_w: 1,
        cube_h: 1,
    };
    let values = Values::of_call(&call);
    let (n_in, n_out) = call.buffers();
    let (name, op) = (c.name(), op_of(case, rank));
    let op = op.as_str();
    let check = |t: &torch::Tensor, at: u64| match expected_output(&call, &values, rank) {
        Expected::Unspecified => Ok(0),
        Expected::PerElement => wrong_in(t, at, n_out, |j| expected(&call, &values, rank, j)),
        table => wrong_in_table(t, at, n_out, &table),
    };
    let out_of_place = {
        let input = zeros(n_in, case.dtype, "input")?;
        let output = zeros(n_out, case.dtype, "output")?;
        variant(
            sw,
            rank,
            || fill(&input, 0, &values, rank, n_in),
            || dist::collective_out_of_place(name, &output, &input, op, case.root),
            || check(&output, 0),
        )?
    };
    let in_place = {
        // nccl-tests' places: all-gather's input is block `rank` of the
        // output; reduce-scatter's output is block `rank` of the input.
        let (n, input_at, output_at) = match c {
            Collective::AllGather => (n_out, rank as u64 * n_in, 0),
            Collective::ReduceScatter => (n_in, 0, rank as u64 * n_out),
            _ => (n_in, 0, 0),
        };
        let t = zeros(n, case.dtype, "buffer")?;
        variant(
            sw,
            rank,
            || fill(&t, input_at, &values, rank, n_in),
            || dist::collective_in_place(name, &t, op, case.root),
            || check(&t, output_at),
        )?
    };
    Ok((out_of_place, in_place))
}

/// All-reduce with every cube a contributor (`--cubes N`): each rank's
/// tensor is N tiles of `count` elements placed row-wise over N cubes;
/// out of place, the output is placed alike.
fn all_reduce_cubes(
    sw: &Sweep,
    case: Case,
    rank: u32,
    ws: u32,
    count: u64,
) -> Result<Blocks, String> {
    use torch::DpMode::{Replicate, RowWise};
    let cubes = sw.cubes;
    // Inputs and reductions are read at a tile's positions.
    let values = Values::at_positions_below(ws * cubes, case.dtype, case.op, true, count)
        .contributors_per_rank(cubes);
    let total = count * cubes as u64;
    let dp = torch::DpPolicy::new(RowWise, Replicate, cubes, 1);
    let rows = u32::try_from(count).map_err(|_| format!("{count} elements are too many"))?;
    let tiles = |name: &str| torch::zeros_dp(&[cubes, rows], case.dtype, dp, name);
    let refill = |t: &torch::Tensor| {
        for (first, n) in pieces(total) {
            let data: Vec<f64> = (first..first + n)
                .map(|j| values.value(rank * cubes + (j / count) as u32, j % count))
                .collect();
            t.copy_from_f64_at(first, &data)?;
        }
        Ok(())
    };
    let check = |t: &torch::Tensor| wrong_in(t, 0, total, |j| Some(values.reduced(j % count)));
    let op = op_of(case, rank);
    let op = op.as_str();
    let out_of_place = {
        let (input, output) = (tiles("allreduce_in")?, tiles("allreduce_out")?);
        variant(
            sw,
            rank,
            || refill(&input),
            || dist::collective_out_of_place("all_reduce", &output, &input, op, 0),
            || check(&output),
        )?
    };
    let t = tiles("allreduce_buf")?;
    let in_place = variant(
        sw,
        rank,
        || refill(&t),
        || dist::all_reduce(&t, op),
        || check(&t),
    )?;
    Ok((out_of_place, in_place))
}

/// One size of `ccl_sendrecv`: rank 2i sends to 2i + 1. None for an idle
/// last rank.
fn send_recv(
    sw: &Sweep,
    case: Case,
    rank: u32,
    ws: u32,
    count: u64,
) -> Result<Option<report::Block>, String> {
    let peer = rank ^ 1;
    if peer >= ws {
        return Ok(None);
    }
    let values = Values::at_positions_below(ws, case.dtype, RedOp::Sum, false, count);
    let t = zeros(count, case.dtype, "buffer")?;
    let sender = rank.is_multiple_of(2);
    let refill = || {
        if sender {
            fill(&t, 0, &values, rank, count)
        } else {
            Ok(())
        }
    };
    let once = || {
        if sender {
            dist::send(&t, peer)
        } else {
            dist::recv(&t, peer)
        }
    };
    variant(sw, rank, refill, once, || {
        if sender {
            return Ok(0);
        }
        match values.inputs(peer) {
            Some(want) => wrong_in_table(&t, 0, count, &Expected::Periodic(want)),
            None => wrong_in(&t, 0, count, |j| Some(values.value(peer, j))),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    const AR: Measure = Measure::Collective(Collective::AllReduce);

    #[test]
    fn flags_parse_like_nccl_tests() {
        let s = parse_args("t", AR, &args(&["-b", "1K", "-e", "1M", "-f", "4"])).unwrap();
        assert_eq!((s.min, s.max, s.factor, s.cubes), (1024, 1 << 20, 4, 1));
        assert_eq!(sizes(&s), vec![1024, 4096, 16384, 65536, 262144, 1 << 20]);
        let s = parse_args(
            "t",
            AR,
            &args(&["-n", "5", "-w", "2", "-c", "0", "-a", "1"]),
        )
        .unwrap();
        assert_eq!(s.aggregation, report::Aggregation::Mean);
        assert_eq!((s.iters, s.warmup, s.check), (5, 2, 0));
        assert_eq!(parse_args("t", AR, &args(&["-c", "3"])).unwrap().check, 3);
        assert_eq!(
            parse_args("t", AR, &args(&["--cubes", "16"]))
                .unwrap()
                .cubes,
            16
        );
        for bad in [
            &["--cubes", "0"][..],
            &["-x"],
            &["-n", "0"],
            &["-f", "1"],
            &["-b", "4", "-e", "2"],
            &["-d", "f8"],
            &["-d", "f8e4m3"],
            &["-o", "band"],
            &["-o", "premul_sum:2"],
            &["-r", "x"],
            &["-a", "4"],
        ] {
            assert!(parse_args("t", AR, &args(bad)).is_err(), "{bad:?}");
        }
        let gather = Measure::Collective(Collective::AllGather);
        let e = parse_args("t", gather, &args(&["-o", "max"])).unwrap_err();
        assert!(e.contains("does not reduce"), "{e}");
        assert!(parse_args("t", gather, &args(&["--cubes", "2"])).is_err());
        let s = parse_args("t", AR, &args(&["-d", "bfloat16", "-o", "PRODUCT"])).unwrap();
        assert_eq!((s.dtypes, s.ops), (vec![Dtype::Bf16], vec![RedOp::Prod]));
        let s = parse_args("t", AR, &args(&["-d", "uint64"])).unwrap();
        assert_eq!(s.dtypes, vec![Dtype::U64]);
        let e = parse_args("t", AR, &args(&["-d", "f8e5m2"])).unwrap_err();
        assert!(
            e.contains(
                "-d f8e5m2: fp8 is not modelled (the MATH unit has no fp8 arithmetic); the \
                 modelled dtypes are int8, uint8, int32, uint32, int64, uint64, half, float, \
                 double, bfloat16"
            ),
            "{e}"
        );
    }

    #[test]
    fn all_loops_nest_as_nccl_tests() {
        let case = |dtype, op, root| Case { dtype, op, root };
        let all = ["-d", "all", "-o", "all", "-r", "all"];
        let s = parse_args("t", AR, &args(&all)).unwrap();
        let got = cases(AR, &s, 3);
        // Every dtype in nccl-tests' order, each with every op.
        assert_eq!(got.len(), 10 * 6);
        assert_eq!(got[0], case(Dtype::I8, RedOp::Sum, 0));
        assert_eq!(got[4], case(Dtype::I8, RedOp::Avg, 0));
        assert_eq!(got[5], case(Dtype::I8, RedOp::PremulSum, 0));
        assert_eq!(got[12], case(Dtype::I32, RedOp::Sum, 0));
        assert_eq!(got[36], case(Dtype::F16, RedOp::Sum, 0));
        assert_eq!(got[59], case(Dtype::Bf16, RedOp::PremulSum, 0));
        let reduce = Measure::Collective(Collective::Reduce);
        let s = parse_args("t", reduce, &args(&all)).unwrap();
        let got = cases(reduce, &s, 2);
        assert_eq!(got.len(), 2 * 10 * 6);
        assert_eq!(
            got[..3],
            [
                case(Dtype::I8, RedOp::Sum, 0),
                case(Dtype::I8, RedOp::Sum, 1),
                case(Dtype::I8, RedOp::Prod, 0)
            ]
        );
        let bcast = Measure::Collective(Collective::Broadcast);
        let s = parse_args("t", bcast, &args(&["-d", "all", "-r", "-1"])).unwrap();
        let got = cases(bcast, &s, 2);
        assert_eq!(got.len(), 10 * 2);
        assert_eq!(got[1], case(Dtype::I8, RedOp::Sum, 1));
        let s = parse_args("t", AR, &args(&["-o", "mulsum"])).unwrap();
        assert_eq!(s.ops, [RedOp::PremulSum]);
        assert_eq!(
            op_of(case(Dtype::F32, RedOp::PremulSum, 0), 3),
            "premul_sum:2.0"
        );
        assert_eq!(
            op_of(case(Dtype::F32, RedOp::PremulSum, 0), 2),
            "premul_sum:1.0"
        );
        let s = parse_args("t", AR, &args(&["-d", "int32", "-o", "avg"])).unwrap();
        assert_eq!(cases(AR, &s, 2), [case(Dtype::I32, RedOp::Avg, 0)]);
        // -d all -o avg: every dtype.
        let s = parse_args("t", AR, &args(&["-d", "all", "-o", "avg"])).unwrap();
        assert_eq!(cases(AR, &s, 2).len(), 10);
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
