//! Results as nccl-tests prints them (doc/PERFORMANCE.md): per size and
//! variant (out-of-place, in-place), the ranks' times combined as the row
//! asks (`-a`: the slowest rank's by default), algbw = S/t, busbw = algbw
//! × the collective's factor, and `#wrong` summed over ranks; plus a
//! lower bound of the collective on the modelled machine
//! ([`crate::bounds`]) and the efficiency bound/time. The table's
//! columns are nccl-tests 2.x's, with the bound and efficiency after
//! them. Also JSON and CSV, with the same fields.

use crate::ccl::collective::Collective;
use crate::hw::dtype::Dtype;
use crate::runtime::comms::AlphaBeta;
use crate::runtime::session::{Measured, ReportRecord, TimeAggregation};
use crate::runtime::RunResult;
use crate::units::{ps_to_us, Ps};
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write;

/// One variant of a row (out-of-place or in-place), all ranks merged.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct Block {
    pub time_ps: Ps,
    pub time_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    /// bound / time, when a bound is known.
    pub efficiency: Option<f64>,
    /// Wrong elements summed over the ranks; None when not checked.
    pub wrong: Option<u64>,
}

/// One line of the report (all ranks merged).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct Row {
    pub collective: String,
    pub size_bytes: u64,
    pub count: u64,
    /// nccl-tests' name of the dtype (`half`, `bfloat16`, `float`,
    /// `int32`).
    #[serde(rename = "type")]
    pub dtype: String,
    pub redop: String,
    /// nccl-tests' root column: the root of broadcast / reduce, -1 for
    /// the others.
    #[serde(default = "no_root")]
    pub root: i64,
    pub ranks: u32,
    /// How the ranks' times were combined (`-a`).
    #[serde(default)]
    pub time_aggregation: TimeAggregation,
    /// The headline: the out-of-place block's figures when it ran, else
    /// the in-place block's.
    pub time_ps: Ps,
    pub time_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    /// Lower bound of the collective on the modelled machine (µs), when
    /// one is known.
    pub bound_us: Option<f64>,
    /// bound / headline time.
    pub efficiency: Option<f64>,
    /// Wrong elements of both blocks, summed over the ranks.
    pub wrong: u64,
    /// Output apart from the input (None: not run).
    #[serde(default)]
    pub out_of_place: Option<Block>,
    /// Output in the input's place (None: not run).
    #[serde(default)]
    pub in_place: Option<Block>,
}

/// The root of a row without one (and of rows a sweep wrote before rows
/// had roots).
fn no_root() -> i64 {
    -1
}

/// nccl-tests bus-bandwidth factor of a collective with `n` ranks
/// ([`Collective::busbw_factor`] of the collective the row's name
/// measured, [`Collective::from_record_name`]; 1 for `sendrecv` and
/// unknown names).
pub fn busbw_factor(collective: &str, n: u32) -> f64 {
    Collective::from_record_name(collective).map_or(1.0, |c| c.busbw_factor(n))
}

/// Whether the table knows `collective` (its busbw factor and bound):
/// a collective by the name of any `torch.distributed` function that runs
/// it, or `sendrecv`.
pub fn knows(collective: &str) -> bool {
    collective == "sendrecv" || Collective::from_record_name(collective).is_some()
}

/// Lower bound (ps) of `collective` moving `bytes` per rank, when known
/// (see [`crate::bounds`]).
pub fn bound_ps(collective: &str, bytes: u64, ab: &AlphaBeta) -> Option<Ps> {
    ab.bound?.collective_ps(collective, bytes, ab.world_size)
}

/// The total of `#wrong` counts. A total a u64 cannot hold is `u64::MAX`,
/// shown by [`wrong_shown`] as "or more": a failure, never a wrapped 0.
pub fn total_wrong(counts: impl IntoIterator<Item = u64>) -> u64 {
    counts.into_iter().fold(0, u64::saturating_add)
}

/// A `#wrong` count (or total) as printed: a saturated one says so.
pub fn wrong_shown(n: u64) -> String {
    if n == u64::MAX {
        format!("{n} or more")
    } else {
        n.to_string()
    }
}

/// nccl-tests' name of a dtype (its `-d` names).
pub fn nccl_type(d: Dtype) -> &'static str {
    match d {
        Dtype::F16 => "half",
        Dtype::Bf16 => "bfloat16",
        Dtype::F32 => "float",
        Dtype::I32 => "int32",
        Dtype::I8 => "int8",
        Dtype::U8 => "uint8",
        Dtype::U32 => "uint32",
        Dtype::I64 => "int64",
        Dtype::U64 => "uint64",
        Dtype::F64 => "double",
    }
}

/// The ranks' blocks of one variant of a row, merged.
#[derive(Debug)]
struct BlockAcc {
    n: u32,
    max: Ps,
    min: Ps,
    sum: u128,
    rank0: Option<Ps>,
    wrong: Option<u64>,
}

impl Default for BlockAcc {
    /// No rank yet: the first one's time is both bounds.
    fn default() -> Self {
        BlockAcc {
            n: 0,
            max: Ps::MIN,
            min: Ps::MAX,
            sum: 0,
            rank0: None,
            wrong: None,
        }
    }
}

impl BlockAcc {
    fn add(&mut self, m: &Measured, rank: Option<u32>) {
        self.max = self.max.max(m.time_ps);
        self.min = self.min.min(m.time_ps);
        self.n += 1;
        self.sum += m.time_ps as u128;
        if rank.unwrap_or(0) == 0 {
            self.rank0.get_or_insert(m.time_ps);
        }
        if let Some(w) = m.wrong {
            self.wrong = Some(self.wrong.unwrap_or(0).saturating_add(w));
        }
    }

    /// The merged block: its time as `how` combines the ranks' (rank 0's
    /// falls back to the slowest when rank 0 did not report the row).
    fn block(&self, how: TimeAggregation, row: &Row, n: u32, bound: Option<Ps>) -> Block {
        let time_ps = match how {
            TimeAggregation::Rank0 => self.rank0.unwrap_or(self.max),
            TimeAggregation::Mean => (self.sum / self.n.max(1) as u128) as Ps,
            TimeAggregation::Min => self.min,
            TimeAggregation::Max => self.max,
        };
        let algbw_gbps = if time_ps == 0 {
            0.0
        } else {
            row.size_bytes as f64 / (time_ps as f64 / 1000.0)
        };
        Block {
            time_ps,
            time_us: ps_to_us(time_ps),
            algbw_gbps,
            busbw_gbps: algbw_gbps * busbw_factor(&row.collective, n),
            efficiency: bound.and_then(|b| (time_ps > 0).then(|| b as f64 / time_ps as f64)),
            wrong: self.wrong,
        }
    }
}

/// Merge the per-rank records of each (collective, size, op, dtype,
/// root): each variant's time combined as the record asks (`-a`),
/// `#wrong` summed. Order: first appearance.
pub fn aggregate(records: &[ReportRecord], ab: Option<&AlphaBeta>) -> Vec<Row> {
    let mut rows: Vec<(Row, BlockAcc, BlockAcc)> = Vec::new();
    // (collective, size, redop, dtype, root) -> index in `rows`: linear
    // in the number of records, whatever their count.
    let mut index: HashMap<(&str, u64, &str, Dtype, Option<u32>), usize> = HashMap::new();
    for r in records {
        let key = (
            r.collective.as_str(),
            r.size_bytes,
            r.redop.as_str(),
            r.dtype,
            r.root,
        );
        let i = *index.entry(key).or_insert_with(|| {
            rows.push((
                Row {
                    collective: r.collective.clone(),
                    size_bytes: r.size_bytes,
                    count: r.count,
                    dtype: nccl_type(r.dtype).to_string(),
                    redop: r.redop.clone(),
                    root: r.root.map_or(-1, i64::from),
                    ranks: 0,
                    time_aggregation: r.aggregation,
                    time_ps: 0,
                    time_us: 0.0,
                    algbw_gbps: 0.0,
                    busbw_gbps: 0.0,
                    bound_us: None,
                    efficiency: None,
                    wrong: 0,
                    out_of_place: None,
                    in_place: None,
                },
                BlockAcc::default(),
                BlockAcc::default(),
            ));
            rows.len() - 1
        });
        let (row, oop, ip) = &mut rows[i];
        row.ranks += 1;
        if let Some(m) = &r.out_of_place {
            oop.add(m, r.rank);
        }
        if let Some(m) = &r.in_place {
            ip.add(m, r.rank);
        }
    }
    rows.into_iter()
        .map(|(mut row, oop, ip)| {
            let n = ab.map(|a| a.world_size).unwrap_or(row.ranks);
            let bound = ab.and_then(|a| bound_ps(&row.collective, row.size_bytes, a));
            let how = row.time_aggregation;
            row.out_of_place = (oop.n > 0).then(|| oop.block(how, &row, n, bound));
            row.in_place = (ip.n > 0).then(|| ip.block(how, &row, n, bound));
            row.bound_us = bound.map(ps_to_us);
            if let Some(h) = row.out_of_place.as_ref().or(row.in_place.as_ref()) {
                (
                    row.time_ps,
                    row.time_us,
                    row.algbw_gbps,
                    row.busbw_gbps,
                    row.efficiency,
                ) = (
                    h.time_ps,
                    h.time_us,
                    h.algbw_gbps,
                    h.busbw_gbps,
                    h.efficiency,
                );
            }
            row.wrong = total_wrong(
                [&row.out_of_place, &row.in_place]
                    .into_iter()
                    .flatten()
                    .filter_map(|b| b.wrong),
            );
            row
        })
        .collect()
}

/// nccl-tests' `getFloatStr(value, width)`: the first of 2, 1 and 0
/// decimals that fits `width` characters, else an exponent form with one
/// decimal (width 7 and more) or none, C's `%e` spelling (`1.2e+07`).
pub fn nccl_float(value: f64, width: usize) -> String {
    for decimals in [2, 1, 0] {
        let s = format!("{value:>width$.decimals$}");
        if s.len() <= width {
            return s;
        }
    }
    let decimals = usize::from(width >= 7);
    let e = format!("{value:.decimals$e}");
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{:>width$}", format!("{mantissa}e{sign}{:02}", exp.abs()))
}

/// C's `%6g` of a count, as nccl-tests prints `#wrong`: the integer up
/// to six digits, else six significant digits with an exponent.
pub fn nccl_count(n: u64) -> String {
    if n < 1_000_000 {
        return format!("{n:>6}");
    }
    let e = format!("{:.5e}", n as f64);
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
    let exp: i32 = exp.parse().unwrap_or(0);
    format!("{:>6}", format!("{mantissa}e+{exp:02}"))
}

/// Guest text as one table line: control characters (a newline would
/// start a line that is not a comment) become spaces.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// The machine-readable form of a run.
#[derive(Debug, Serialize)]
pub struct JsonReport<'a> {
    pub bench: &'a str,
    pub algorithm: Option<&'a str>,
    /// The algorithm that served each collective.
    pub algorithms: &'a std::collections::BTreeMap<String, String>,
    pub world_size: Option<u32>,
    pub alpha_us: Option<f64>,
    pub bandwidth_gbps: Option<f64>,
    pub sim_end_us: f64,
    /// `--timing-only`: no bytes were kept, the rows have no `wrong` and
    /// `wrong_total` is null.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub timing_only: bool,
    pub wrong_total: Option<u64>,
    /// The header lines the bench asked for (`report.note`).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub notes: &'a [String],
    pub rows: &'a [Row],
    /// The compute table (benches that launch kernels).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub kernels: &'a [crate::kernel_report::KernelRow],
    /// What each rank's time went to, in ps (runs that overlap compute
    /// and communication).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub ranks: &'a [crate::runtime::timeline::RankRow],
    /// The second pass (`--verify-data`), when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify: Option<JsonVerify>,
}

/// The second pass's outcome in the JSON report (details: the text report
/// on stderr).
#[derive(Debug, Serialize)]
pub struct JsonVerify {
    pub ok: bool,
    pub ops: usize,
    pub bytes: u64,
    pub mismatches: usize,
    pub races: usize,
}

pub fn to_json(res: &RunResult, rows: &[Row]) -> String {
    let ab = res.alpha_beta.as_ref();
    let j = JsonReport {
        bench: &res.bench,
        algorithm: res.algorithm.as_deref(),
        algorithms: &res.algorithms,
        world_size: ab.map(|a| a.world_size),
        alpha_us: ab.map(|a| ps_to_us(a.alpha_ps)),
        bandwidth_gbps: ab.map(|a| a.bandwidth.giga_per_s()),
        sim_end_us: ps_to_us(res.end_time_ps),
        timing_only: res.timing_only,
        wrong_total: (!res.timing_only).then(|| {
            total_wrong(
                rows.iter()
                    .map(|r| r.wrong)
                    .chain(res.kernel_rows.iter().map(|r| r.wrong)),
            )
        }),
        notes: &res.notes,
        rows,
        kernels: &res.kernel_rows,
        ranks: &res.ranks,
        verify: res.verification.as_ref().map(|v| JsonVerify {
            ok: !v.failed(),
            ops: v.ops,
            bytes: v.bytes,
            mismatches: v.mismatches.len(),
            races: v.races.len(),
        }),
    };
    let mut v = serde_json::to_value(&j).expect("report serialises");
    if res.timing_only {
        // Nothing was checked: no row claims a count of wrong elements.
        for row in v["rows"].as_array_mut().into_iter().flatten() {
            if let Some(o) = row.as_object_mut() {
                o.remove("wrong");
                for block in ["out_of_place", "in_place"] {
                    if let Some(b) = o.get_mut(block).and_then(|b| b.as_object_mut()) {
                        b.insert("wrong".into(), serde_json::Value::Null);
                    }
                }
            }
        }
    }
    serde_json::to_string_pretty(&v).expect("report serialises")
}

/// The rows as CSV: the table's fields, each block's as `oop_*` and
/// `ip_*` columns (empty when the block was not run); without the
/// `wrong` columns when nothing was checked (`checked` false:
/// `--timing-only`).
pub fn to_csv(rows: &[Row], checked: bool) -> String {
    // The csv crate quotes fields holding commas, quotes or newlines (a
    // collective or redop name comes from the guest).
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header: Vec<String> = [
        "collective",
        "size_bytes",
        "count",
        "type",
        "redop",
        "root",
        "time_aggregation",
    ]
    .map(String::from)
    .to_vec();
    let block_fields: &[&str] = if checked {
        &["time_us", "algbw_gbps", "busbw_gbps", "efficiency", "wrong"]
    } else {
        &["time_us", "algbw_gbps", "busbw_gbps", "efficiency"]
    };
    for prefix in ["oop", "ip"] {
        header.extend(block_fields.iter().map(|f| format!("{prefix}_{f}")));
    }
    header.push("bound_us".into());
    let mut records = vec![header];
    let f4 = |v: Option<f64>| v.map(|v| format!("{v:.4}")).unwrap_or_default();
    for r in rows {
        let mut rec = vec![
            r.collective.clone(),
            r.size_bytes.to_string(),
            r.count.to_string(),
            r.dtype.clone(),
            r.redop.clone(),
            r.root.to_string(),
            aggregation_name(r.time_aggregation).to_string(),
        ];
        for b in [&r.out_of_place, &r.in_place] {
            rec.push(f4(b.as_ref().map(|b| b.time_us)));
            rec.push(f4(b.as_ref().map(|b| b.algbw_gbps)));
            rec.push(f4(b.as_ref().map(|b| b.busbw_gbps)));
            rec.push(f4(b.as_ref().and_then(|b| b.efficiency)));
            if checked {
                rec.push(
                    b.as_ref()
                        .and_then(|b| b.wrong)
                        .map(|w| w.to_string())
                        .unwrap_or_default(),
                );
            }
        }
        rec.push(f4(r.bound_us));
        records.push(rec);
    }
    for rec in records {
        // Writing to a Vec cannot fail.
        let _ = w.write_record(&rec);
    }
    String::from_utf8_lossy(&w.into_inner().unwrap_or_default()).into_owned()
}

/// The name of an aggregation, as `-a` and the JSON spell it.
pub fn aggregation_name(a: TimeAggregation) -> &'static str {
    match a {
        TimeAggregation::Rank0 => "rank0",
        TimeAggregation::Mean => "mean",
        TimeAggregation::Min => "min",
        TimeAggregation::Max => "max",
    }
}

/// nccl-tests' three header lines (all_reduce_perf's, the same for every
/// collective): the block titles, the columns, their units. The column
/// lines end with one space, as nccl-tests prints them.
pub fn nccl_header() -> [String; 3] {
    let e = "";
    [
        format!(
            "# {e:>10}  {e:>12}  {e:>8}  {e:>6}  {e:>6}           out-of-place                       in-place          "
        ),
        format!(
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6} ",
            "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
            "algbw", "busbw", "#wrong"
        ),
        format!(
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6} ",
            "(B)", "(elements)", e, e, e, "(us)", "(GB/s)", "(GB/s)", e, "(us)", "(GB/s)", "(GB/s)", e
        ),
    ]
}

/// One block of a table row as nccl-tests prints it: time, algbw, busbw,
/// `#wrong` (`N/A` when not checked; every field `N/A` when not run).
fn nccl_block(b: Option<&Block>, checked: bool) -> String {
    match b {
        None => format!("  {:>7}  {:>6}  {:>6}  {:>6}", "N/A", "N/A", "N/A", "N/A"),
        Some(b) => format!(
            "  {}  {}  {}  {}",
            nccl_float(b.time_us, 7),
            nccl_float(b.algbw_gbps, 6),
            nccl_float(b.busbw_gbps, 6),
            match b.wrong.filter(|_| checked) {
                Some(w) => nccl_count(w),
                None => format!("{:>6}", "N/A"),
            }
        ),
    }
}

/// The nccl-tests-style table.
pub fn to_table(res: &RunResult, rows: &[Row], topo_line: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# KernBench {} | bench {} | algorithm {} | {topo_line}",
        env!("CARGO_PKG_VERSION"),
        res.bench,
        res.algorithm.as_deref().unwrap_or("-")
    );
    // The algorithm of each collective, when one is not the installed one.
    if res
        .algorithms
        .values()
        .any(|a| Some(a.as_str()) != res.algorithm.as_deref())
    {
        let each: Vec<String> = res
            .algorithms
            .iter()
            .map(|(c, a)| format!("{c}: {a}"))
            .collect();
        let _ = writeln!(s, "# algorithms: {}", each.join(", "));
    }
    if let Some(ab) = &res.alpha_beta {
        let _ = writeln!(
            s,
            "# world_size {} | alpha {:.3} us (DMA setup + path latency, rank -> rank+1) | B {:.1} GB/s (bottleneck)",
            ab.world_size,
            ps_to_us(ab.alpha_ps),
            ab.bandwidth.giga_per_s()
        );
        let bounded = rows.iter().any(|r| r.bound_us.is_some());
        if let Some(b) = ab.bound.as_ref().filter(|_| bounded) {
            // The terms of the collectives the table bounds, each once.
            let mut terms: Vec<String> = Vec::new();
            for r in rows.iter().filter(|r| r.bound_us.is_some()) {
                if let Some(t) = crate::bounds::terms(&r.collective) {
                    if !terms.contains(&t) {
                        terms.push(t);
                    }
                }
            }
            let _ = writeln!(
                s,
                "# bound: lower bound max(setup + hops*lambda, setup + lambda + in/B_in, setup + lambda + out/B_out) \
                 with the bytes S per rank that must enter and leave a SIP ({}; docs/timing-model.md); \
                 D = {} SIP hops, lambda = {:.3} us per inter-SIP link, B_in = {:.1} GB/s, B_out = {:.1} GB/s; \
                 eff = bound / time",
                terms.join("; "),
                b.diameter,
                ps_to_us(b.link_latency),
                b.ingress.giga_per_s(),
                b.egress.giga_per_s()
            );
        }
    }
    if res.timing_only {
        let _ = writeln!(
            s,
            "# timing only: no bytes were stored or moved, so the results were not checked \
             (same simulated times as a run with data)"
        );
    }
    for note in &res.notes {
        let _ = writeln!(s, "# {}", one_line(note));
    }
    let _ = writeln!(s, "#");
    if rows.is_empty() && !res.kernel_rows.is_empty() {
        s.push_str(&crate::kernel_report::to_table(&res.kernel_rows));
        if !res.ranks.is_empty() {
            s.push_str(&crate::runtime::timeline::to_table(&res.ranks));
        }
        return s;
    }
    let checked = !res.timing_only;
    // The bound and efficiency follow nccl-tests' columns, when known.
    let bounded = rows.iter().any(|r| r.bound_us.is_some());
    let extras = |a: &str, b: &str| {
        if bounded {
            format!(" {a:>7}  {b:>6}")
        } else {
            String::new()
        }
    };
    let [titles, columns, units] = nccl_header();
    // One header per collective, its rows in report order.
    let mut collectives: Vec<&str> = Vec::new();
    for r in rows {
        if !collectives.contains(&r.collective.as_str()) {
            collectives.push(&r.collective);
        }
    }
    for c in collectives {
        let _ = writeln!(s, "# collective: {}", one_line(c));
        let _ = writeln!(s, "#");
        let _ = writeln!(s, "{titles}");
        let _ = writeln!(s, "{columns}{}", extras("bound", "eff"));
        let _ = writeln!(s, "{units}{}", extras("(us)", "(%)"));
        for r in rows.iter().filter(|r| r.collective == c) {
            let _ = write!(
                s,
                "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}{}{}",
                r.size_bytes,
                r.count,
                r.dtype,
                one_line(&r.redop),
                r.root,
                nccl_block(r.out_of_place.as_ref(), checked),
                nccl_block(r.in_place.as_ref(), checked)
            );
            if bounded {
                let _ = write!(
                    s,
                    "  {}  {}",
                    r.bound_us
                        .map_or_else(|| format!("{:>7}", "-"), |v| nccl_float(v, 7)),
                    r.efficiency
                        .map_or_else(|| format!("{:>6}", "-"), |v| nccl_float(v * 100.0, 6))
                );
            }
            let _ = writeln!(s);
        }
    }
    let wrong = total_wrong(rows.iter().map(|r| r.wrong));
    // nccl-tests: the mean busbw of every block printed.
    let busbw: Vec<f64> = rows
        .iter()
        .flat_map(|r| [&r.out_of_place, &r.in_place])
        .flatten()
        .map(|b| b.busbw_gbps)
        .collect();
    let avg_bus = if busbw.is_empty() {
        0.0
    } else {
        busbw.iter().sum::<f64>() / busbw.len() as f64
    };
    if res.timing_only {
        let _ = writeln!(s, "# Out of bounds values : not checked (timing only)");
    } else {
        let _ = writeln!(
            s,
            "# Out of bounds values : {} {}",
            wrong_shown(wrong),
            if wrong == 0 { "OK" } else { "FAILED" }
        );
    }
    let _ = writeln!(s, "# Avg bus bandwidth    : {avg_bus:.3} GB/s");
    if !res.kernel_rows.is_empty() {
        let _ = writeln!(s, "#");
        s.push_str(&crate::kernel_report::to_table(&res.kernel_rows));
    }
    if !res.ranks.is_empty() {
        s.push_str(&crate::runtime::timeline::to_table(&res.ranks));
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_table_knows_the_collectives_their_torch_variants_and_sendrecv() {
        for c in [
            "all_reduce",
            "all_gather",
            "all_to_all",
            "sendrecv",
            "all_gather_into_tensor",
            "reduce_scatter_tensor",
            "all_to_all_single",
        ] {
            assert!(super::knows(c), "{c}");
        }
        for c in ["allreduce", "gather", ""] {
            assert!(!super::knows(c), "{c}");
        }
    }

    use super::*;
    use crate::units::Rate;

    #[test]
    fn bound_comes_from_the_machine_figures() {
        let ab = AlphaBeta {
            world_size: 4,
            alpha_ps: 1_000,
            bandwidth: Rate::from_giga_per_s(100.0),
            bound: Some(crate::bounds::CollectiveBound {
                setup: 20,
                link_latency: 500,
                diameter: 2,
                ingress: Rate::from_giga_per_s(200.0),
                egress: Rate::from_giga_per_s(200.0),
            }),
        };
        // 1e6 bytes through 200 GB/s = 5_000_000 ps.
        assert_eq!(
            bound_ps("all_reduce", 1_000_000, &ab),
            Some(20 + 500 + 5_000_000)
        );
        assert_eq!(bound_ps("all_reduce", 2, &ab), Some(20 + 2 * 500));
        assert_eq!(busbw_factor("all_reduce", 4), 1.5);
        // A row named for the tensor variant is the same collective.
        assert_eq!(busbw_factor("all_gather_into_tensor", 4), 0.75);
        assert_eq!(
            bound_ps("reduce_scatter_tensor", 1_000_000, &ab),
            bound_ps("reduce_scatter", 1_000_000, &ab)
        );
        assert!(bound_ps("all_to_all_single", 1_000_000, &ab).is_some());
        assert_eq!(bound_ps("sendrecv", 8, &ab), Some(20 + 500 + 40));
        assert_eq!(bound_ps("gossip", 8, &ab), None);
    }

    #[test]
    fn a_wrong_total_past_u64_is_a_failure_not_zero() {
        // Two rows of 2^63 wrong elements: 2^64 wraps to 0 in u64.
        assert_eq!(total_wrong([1 << 63, 1 << 63]), u64::MAX);
        assert_eq!(total_wrong([2, 3]), 5);
        assert_eq!(wrong_shown(u64::MAX), "18446744073709551615 or more");
        assert_eq!(wrong_shown(7), "7");
    }

    /// A rank's all-reduce record of one block (in place), checked.
    fn rec(rank: u32, t: Ps, w: u64, how: TimeAggregation) -> ReportRecord {
        let m = Measured {
            time_ps: t,
            wrong: Some(w),
        };
        let what = ("all_reduce".into(), 1000, 500, Dtype::F16, "sum".into());
        ReportRecord::new(what, None, Some(rank), None, Some(m), how)
    }

    #[test]
    fn ranks_merge_to_slowest_time_and_summed_wrong() {
        let rows = aggregate(
            &[
                rec(0, 10_000, 1, TimeAggregation::Max),
                rec(1, 20_000, 2, TimeAggregation::Max),
            ],
            None,
        );
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (rows[0].time_ps, rows[0].wrong, rows[0].ranks),
            (20_000, 3, 2)
        );
        assert!((rows[0].algbw_gbps - 50.0).abs() < 1e-9); // 1000 B / 20 ns
        assert!((rows[0].busbw_gbps - 50.0).abs() < 1e-9); // 2 ranks: factor 1
        let ip = rows[0].in_place.as_ref().unwrap();
        assert_eq!((ip.time_ps, ip.wrong), (20_000, Some(3)));
        assert_eq!(rows[0].out_of_place, None);
        assert_eq!((rows[0].root, rows[0].dtype.as_str()), (-1, "half"));
    }

    #[test]
    fn a_is_rank_0_mean_min_or_max_as_nccl_tests() {
        for (how, want) in [
            (TimeAggregation::Rank0, 30_000),
            (TimeAggregation::Mean, 20_000),
            (TimeAggregation::Min, 10_000),
            (TimeAggregation::Max, 30_000),
        ] {
            let recs = [
                rec(1, 20_000, 0, how),
                rec(0, 30_000, 0, how),
                rec(2, 10_000, 0, how),
            ];
            let rows = aggregate(&recs, None);
            assert_eq!(rows[0].time_ps, want, "{how:?}");
            assert_eq!(rows[0].time_aggregation, how);
        }
    }

    #[test]
    fn both_blocks_roots_and_unchecked_counts_stay_apart() {
        let block = |t, w| {
            Some(Measured {
                time_ps: t,
                wrong: w,
            })
        };
        let what = || ("reduce".into(), 64, 16, Dtype::F32, "max".into());
        let recs = [
            ReportRecord::new(
                what(),
                Some(0),
                Some(0),
                block(4_000, None),
                block(2_000, None),
                TimeAggregation::Max,
            ),
            ReportRecord::new(
                what(),
                Some(1),
                Some(0),
                block(4_000, Some(0)),
                None,
                TimeAggregation::Max,
            ),
        ];
        let rows = aggregate(&recs, None);
        assert_eq!(rows.len(), 2, "one row per root");
        assert_eq!(rows[0].root, 0);
        assert_eq!(rows[0].out_of_place.as_ref().unwrap().wrong, None);
        assert_eq!(rows[0].in_place.as_ref().unwrap().time_ps, 2_000);
        assert_eq!(
            rows[0].time_ps, 4_000,
            "the headline is the out-of-place block"
        );
        assert_eq!(rows[1].in_place, None);
    }

    #[test]
    fn the_header_is_nccl_tests_all_reduce_perf_s() {
        // nccl-tests v2.19.6's all_reduce_perf, as it prints them (with
        // the `#` line before).
        let fixture = include_str!("../../tests/fixtures/nccl-tests/all_reduce_perf.header.txt");
        let lines: Vec<&str> = fixture.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0], "#");
        let ours = nccl_header();
        for (i, (want, got)) in lines[1..].iter().zip(&ours).enumerate() {
            assert_eq!(got, want, "header line {}", i + 2);
        }
        // Column by column: the names and their right edges.
        let cols = |l: &str| {
            l.split_whitespace()
                .skip(1)
                .map(|w| (w.to_string(), l.find(w).unwrap() + w.len()))
                .collect::<Vec<_>>()
        };
        assert_eq!(cols(&ours[1]).len(), 13);
        assert_eq!(
            include_str!("../../tests/fixtures/nccl-tests/broadcast_perf.header.txt"),
            fixture,
            "every collective prints the same header"
        );
    }

    #[test]
    fn a_row_written_before_roots_and_blocks_reads_back() {
        let old = r#"{"collective":"all_reduce","size_bytes":8,"count":4,"type":"f16",
            "redop":"sum","ranks":4,"time_ps":1000,"time_us":0.001,"algbw_gbps":8.0,
            "busbw_gbps":12.0,"bound_us":null,"efficiency":null,"wrong":0}"#;
        let row: Row = serde_json::from_str(old).unwrap();
        assert_eq!((row.root, row.time_aggregation), (-1, TimeAggregation::Max));
        assert_eq!((row.out_of_place, row.in_place), (None, None));
    }

    #[test]
    fn numbers_print_as_nccl_tests_prints_them() {
        assert_eq!(nccl_float(1234.5, 7), "1234.50");
        assert_eq!(nccl_float(123456.7, 7), " 123457");
        assert_eq!(nccl_float(1.2345e7, 7), "1.2e+07");
        assert_eq!(nccl_float(1234.56, 6), "1234.6");
        assert_eq!(nccl_float(12345.6, 6), " 12346");
        assert_eq!(nccl_float(1234567.0, 6), " 1e+06");
        assert_eq!(nccl_float(1.98, 7), "   1.98");
        assert_eq!(nccl_count(0), "     0");
        assert_eq!(nccl_count(999_999), "999999");
        assert_eq!(nccl_count(1_048_576), "1.04858e+06");
        assert_eq!(nccl_count(2_000_000), " 2e+06");
    }

    #[test]
    fn csv_quotes_fields_with_commas_quotes_and_newlines() {
        let m = Measured {
            time_ps: 1000,
            wrong: Some(0),
        };
        let what = (
            "all,reduce \"x\"\nnext".into(),
            8,
            4,
            Dtype::F16,
            "sum".into(),
        );
        let rec = ReportRecord::new(what, None, None, Some(m), None, TimeAggregation::Max);
        let csv = to_csv(&aggregate(&[rec], None), true);
        let mut r = csv::Reader::from_reader(csv.as_bytes());
        assert_eq!(r.headers().unwrap().len(), 18);
        let row = r.records().next().unwrap().unwrap();
        assert_eq!(&row[0], "all,reduce \"x\"\nnext");
        assert_eq!(&row[1], "8");
        assert_eq!(&row[5], "-1");
        assert_eq!(&row[11], "0", "oop_wrong");
        assert_eq!(&row[12], "", "no in-place block");
        assert_eq!(row.len(), 18);
        let unchecked = to_csv(&aggregate(&[rec_unchecked()], None), false);
        assert_eq!(unchecked.lines().next().unwrap().split(',').count(), 16);
    }

    fn rec_unchecked() -> ReportRecord {
        rec(0, 1, 0, TimeAggregation::Max)
    }

    #[test]
    fn many_distinct_rows_aggregate_in_linear_time() {
        let recs: Vec<ReportRecord> = (0..200_000u64)
            .map(|i| {
                let m = Measured {
                    time_ps: 1,
                    wrong: Some(0),
                };
                let what = ("all_reduce".into(), i, i, Dtype::F16, "sum".into());
                ReportRecord::new(what, None, None, None, Some(m), TimeAggregation::Max)
            })
            .collect();
        // Quadratic merging would take minutes here; linear takes ms.
        assert_eq!(aggregate(&recs, None).len(), 200_000);
    }
}
