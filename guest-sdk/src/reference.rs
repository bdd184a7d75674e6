//! Exact inputs and expected outputs of every collective, shared by the
//! benches (which check every element the host hands back) and the mock
//! (which checks an algorithm before it meets the host).
//!
//! Rank `r`'s input element `i` is [`Values::value`]`(r, i)`: small
//! integers chosen so that every partial result of any reduction order is
//! exact in the dtype — sums of at most [`max_contributors`] values below
//! 16 (f16 < 2048, bf16 < 256), products of 1s and 2s from at most 5
//! ranks — so the check is exact equality at every world size (`avg`: the
//! exact sum divided once, rounded once). Collectives that only move data
//! use values distinct across ranks and positions, so a block delivered
//! to the wrong place is caught.

use crate::{Call, Collective, Dtype, RedOp};

/// At most this many ranks add a non-zero value (0..16) to any one
/// element: every partial sum, in any order, stays an integer within the
/// dtype's exact range (f16 2048, bf16 256, i8 128, u8 256, the others
/// 2^24).
pub fn max_contributors(dtype: Dtype) -> u32 {
    match dtype {
        Dtype::F16 => 128,
        Dtype::Bf16 | Dtype::U8 => 16,
        Dtype::I8 => 8,
        Dtype::F32 | Dtype::I32 | Dtype::U32 | Dtype::I64 | Dtype::U64 | Dtype::F64 => 1 << 20,
    }
}

/// Rank `rank`'s premul_sum factor in the benches and the mock: 1 on
/// even ranks, 2 on odd ones, nccl-tests' `ncclVerifiablePremulScalar`.
/// Its contributions can double, so premul_sum's inputs use half of
/// [`max_contributors`].
pub fn premul_factor(rank: u32) -> f64 {
    if rank.is_multiple_of(2) {
        1.0
    } else {
        2.0
    }
}

fn lcm(a: u64, b: u64) -> u64 {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x * b
}

/// The largest integer a dtype holds exactly, plus one (bounded at 2^24
/// for the wide ones).
fn exact_range(dtype: Dtype) -> u64 {
    match dtype {
        Dtype::F16 => 2048,
        Dtype::Bf16 | Dtype::U8 => 256,
        Dtype::I8 => 128,
        Dtype::F32 | Dtype::I32 | Dtype::U32 | Dtype::I64 | Dtype::U64 | Dtype::F64 => 1 << 24,
    }
}

/// `avg` of `n` values that sum to `sum` (exact), as NCCL finishes it:
/// floats scaled by `1 / n` (rounded once, by the caller's encoding),
/// integers divided, truncating toward zero.
fn avg(sum: f64, n: u64, dtype: Dtype) -> f64 {
    if dtype.is_integer() {
        (sum / n as f64).trunc()
    } else {
        sum * (1.0 / n as f64)
    }
}

/// The inputs of one run: `contributors` ranks, `dtype`, `op`, and
/// whether the collective reduces.
#[derive(Debug, Clone)]
pub struct Values {
    pub contributors: u32,
    pub dtype: Dtype,
    pub op: RedOp,
    reduces: bool,
    /// Ranks `r` with `(r + i) % stride == 0` contribute to element `i`.
    pub stride: u64,
    /// The element positions the inputs and reductions are read at are
    /// below this: what their tables hold (see [`Periodic::below`]).
    positions: u64,
    /// The exact reduction of every element (reductions only).
    reductions: Option<Periodic>,
    /// Contributors per rank (a rank's cubes, each a contributor): all of
    /// a rank's take its premul_sum factor ([`Values::factor`]).
    per_rank: u32,
}

impl Values {
    /// The values of a collective that reduces with `op` (`reduces`) or
    /// only moves data.
    pub fn new(contributors: u32, dtype: Dtype, op: RedOp, reduces: bool) -> Values {
        Values::at_positions_below(contributors, dtype, op, reduces, u64::MAX)
    }

    /// [`Values::new`], whose inputs and reductions are read only at
    /// element positions below `positions` (a buffer's length; the tables
    /// of data-moving values shifted per rank, [`Values::data_base`], are
    /// whole).
    pub fn at_positions_below(
        contributors: u32,
        dtype: Dtype,
        op: RedOp,
        reduces: bool,
        positions: u64,
    ) -> Values {
        let cap = match op {
            RedOp::PremulSum => max_contributors(dtype) / 2,
            _ => max_contributors(dtype),
        };
        let stride = contributors.div_ceil(cap).max(1) as u64;
        let mut v = Values {
            contributors,
            dtype,
            op,
            reduces,
            stride,
            positions,
            reductions: None,
            per_rank: 1,
        };
        v.tabulate();
        v
    }

    /// The reductions tabulated (reductions only).
    fn tabulate(&mut self) {
        if self.reduces {
            // The reduction is periodic in the element index (period
            // 48 × stride): tabulated once, not reduced per element.
            let period = self.input_period();
            let positions = self.positions;
            self.reductions =
                period.map(|p| Periodic::below(p, positions, |i| self.reduce_exact(i)));
        }
    }

    /// These values with `k` consecutive contributors per rank (a rank's
    /// `k` cubes): the premul_sum factor is the rank's.
    pub fn contributors_per_rank(mut self, k: u32) -> Values {
        self.per_rank = k.max(1);
        self.tabulate();
        self
    }

    /// Contributor `c`'s premul_sum factor: its rank's
    /// [`premul_factor`]; 1 for the other ops.
    pub fn factor(&self, c: u32) -> f64 {
        match self.op {
            RedOp::PremulSum => premul_factor(c / self.per_rank),
            _ => 1.0,
        }
    }

    /// The values of `call` (its world size contributes). Every position
    /// they are read at is below the call's input buffer's length: the
    /// inputs, and the reductions (of every input position, a rank's
    /// block of them after reduce-scatter).
    pub fn of_call(call: &Call) -> Values {
        let reduces = matches!(
            call.collective,
            Collective::AllReduce | Collective::Reduce | Collective::ReduceScatter
        );
        let (n_in, _) = call.buffers();
        Values::at_positions_below(call.world_size, call.dtype, call.op, reduces, n_in)
    }

    /// Rank `rank`'s input element `i`.
    pub fn value(&self, rank: u32, i: u64) -> f64 {
        if !self.reduces {
            return ((rank as u64 * 977 + i * 31 + 1) % exact_range(self.dtype)) as f64;
        }
        if self.op == RedOp::Prod {
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

    /// The reduction of element `i` over every contributor, rounded once.
    /// A rank's value depends on the rank only modulo `lcm(stride, 16)`
    /// (products: only ranks below 15 differ from 1), so it is computed
    /// from the residue classes and how many ranks each holds: O(stride)
    /// per element instead of O(contributors), the same exact result
    /// (the values are small integers, so every order of the f64 sum is
    /// exact). At 1024 ranks the direct loop made each rank's bench spend
    /// ~12 M instructions tabulating its checks.
    fn reduce_exact(&self, i: u64) -> f64 {
        let n = self.contributors as u64;
        let x = if self.op == RedOp::Prod {
            (0..n.min(15)).map(|r| self.value(r as u32, i)).product()
        } else {
            let l = lcm(self.stride, 16);
            // (value, how many ranks have it) per residue class that
            // holds a rank.
            let classes = (0..l.min(n)).map(|c| (self.value(c as u32, i), (n - c).div_ceil(l)));
            match self.op {
                RedOp::Sum => classes.map(|(v, k)| v * k as f64).sum(),
                // l is a multiple of 16: class c's ranks share c's parity,
                // so its factor.
                RedOp::PremulSum if self.per_rank == 1 => (0..l.min(n))
                    .map(|c| {
                        self.value(c as u32, i) * self.factor(c as u32) * (n - c).div_ceil(l) as f64
                    })
                    .sum(),
                RedOp::PremulSum => (0..n)
                    .map(|c| self.value(c as u32, i) * self.factor(c as u32))
                    .sum(),
                RedOp::Avg => avg(classes.map(|(v, k)| v * k as f64).sum(), n, self.dtype),
                RedOp::Max => classes.fold(f64::MIN, |m, (v, _)| m.max(v)),
                RedOp::Min => classes.fold(f64::MAX, |m, (v, _)| m.min(v)),
                RedOp::Prod => unreachable!("handled above"),
            }
        };
        self.dtype.decode(&self.dtype.encode(&[x]))[0]
    }

    /// The reduction over every contributor of element `i`, rounded once
    /// to the dtype.
    pub fn reduced(&self, i: u64) -> f64 {
        match &self.reductions {
            Some(t) => t.at(i),
            None => self.reduce_exact(i),
        }
    }
}

/// A sequence over element positions that repeats every `period`
/// elements, tabulated once. The benches fill and check up to 10^9
/// elements per rank: a piece is copied out of the table, and checked
/// against it, with no division or call per element (per element, the
/// f64 formulas cost the guest ~250 wasm instructions, a copy a few).
///
/// A sequence read only at positions below some bound (a call's buffer of
/// 8 elements, where the period is 384) tabulates only those positions
/// ([`Periodic::below`]): a rank's bench no longer weighs hundreds of
/// reductions to check a handful of elements (256 ranks x 16 B: 5.4 % of
/// the run's instructions; 1024 ranks: ~15 ms of wall time, on the thread
/// the run waits for). A read past the tabulated positions panics; it
/// never wraps early.
#[derive(Debug, Clone)]
pub struct Periodic {
    period: u64,
    /// `v(0) .. v(n - 1)`, `n` the period or the bound on the positions
    /// read, whichever is less.
    table: Vec<f64>,
}

impl Periodic {
    /// `v(0)`, ..., `v(period - 1)`; `v` must repeat every `period`.
    pub fn new(period: u64, v: impl Fn(u64) -> f64) -> Periodic {
        Periodic::below(period, u64::MAX, v)
    }

    /// The sequence `v` of period `period`, read only at positions below
    /// `read_below`: tabulated up to the lesser of the two.
    pub fn below(period: u64, read_below: u64, v: impl Fn(u64) -> f64) -> Periodic {
        let period = period.max(1);
        Periodic {
            period,
            table: (0..period.min(read_below)).map(v).collect(),
        }
    }

    /// Elements before it repeats.
    pub fn period(&self) -> u64 {
        self.period
    }

    /// The table from position `phase` (< the period), `take` elements.
    fn slice(&self, phase: usize, take: usize) -> &[f64] {
        self.table.get(phase..phase + take).unwrap_or_else(|| {
            panic!(
                "positions {phase}..{} of a sequence of period {} read, {} tabulated",
                phase + take,
                self.period,
                self.table.len()
            )
        })
    }

    /// Element `i` of the sequence.
    pub fn at(&self, i: u64) -> f64 {
        self.slice((i % self.period) as usize, 1)[0]
    }

    /// Elements `first .. first + count`, appended to `out`.
    pub fn extend_piece(&self, first: u64, count: u64, out: &mut Vec<f64>) {
        let p = self.period as usize;
        let mut phase = (first % self.period) as usize;
        let end = out.len() + count as usize;
        while out.len() < end {
            let take = (p - phase).min(end - out.len());
            out.extend_from_slice(self.slice(phase, take));
            phase = 0;
        }
    }

    /// How many of `got` (elements `first ..`) differ from the sequence.
    pub fn mismatches(&self, first: u64, got: &[f64]) -> u64 {
        let p = self.period as usize;
        let mut phase = (first % self.period) as usize;
        let mut rest = got;
        let mut wrong = 0;
        while !rest.is_empty() {
            let take = (p - phase).min(rest.len());
            let want = self.slice(phase, take);
            wrong += rest[..take]
                .iter()
                .zip(want)
                .filter(|(g, w)| g != w)
                .count();
            rest = &rest[take..];
            phase = 0;
        }
        wrong as u64
    }
}

impl Values {
    /// The period of every rank's inputs over element positions, where
    /// one is small enough to tabulate: 48 × stride for reductions (their
    /// terms repeat every 16, 3 and `stride` elements), the dtype's exact
    /// range for data-moving values of f16 and bf16 (2048, 256); none
    /// for those of f32 and i32 (2^24).
    fn input_period(&self) -> Option<u64> {
        if self.reduces {
            return Some(48 * self.stride);
        }
        Some(exact_range(self.dtype)).filter(|&r| r <= 1 << 12)
    }

    /// Rank `rank`'s inputs as a [`Periodic`] sequence, if they have a
    /// small period.
    pub fn inputs(&self, rank: u32) -> Option<Periodic> {
        self.input_period()
            .map(|p| Periodic::below(p, self.positions, |i| self.value(rank, i)))
    }

    /// Data-moving values as one sequence at a shift per rank:
    /// `value(r, i) = base.at(i + shift(r))`, where the dtype's exact range
    /// is small enough to tabulate. `(r·977 + 31·i + 1) mod R` with `R` a
    /// power of two and 31 odd (so invertible mod `R`) is
    /// `base(i + r·977·31⁻¹)` with `base(i) = (31·i + 1) mod R`.
    pub fn data_base(&self) -> Option<(Periodic, impl Fn(u32) -> u64)> {
        let r = self.input_period().filter(|_| !self.reduces)?;
        let inv31 = (1..r).find(|x| (31 * x) % r == 1)?;
        let base = Periodic::new(r, |i| ((31 * i + 1) % r) as f64);
        Some((base, move |rank: u32| (rank as u64 * 977 % r) * inv31 % r))
    }

    /// The reductions ([`Values::reduced`]) from element `shift` on, as a
    /// [`Periodic`] sequence (reductions only).
    fn reduced_from(&self, shift: u64) -> Option<Periodic> {
        let t = self.reductions.as_ref()?;
        let below = self.positions.saturating_sub(shift);
        Some(Periodic::below(t.period(), below, |j| t.at(shift + j)))
    }
}

/// What a rank's output must hold after a call, in the form that checks
/// it fastest.
#[derive(Debug, Clone)]
pub enum Expected {
    /// Nothing: PyTorch leaves the output unspecified (a non-root rank of
    /// `reduce`).
    Unspecified,
    /// A sequence with a small period.
    Periodic(Periodic),
    /// Block `k` (of `block` elements) holds `base` from its element
    /// `starts[k]` on: every rank's data-moving values are one sequence
    /// at a shift (all-gather, all-to-all).
    Blocks {
        block: u64,
        base: Periodic,
        starts: Vec<u64>,
    },
    /// Element by element: [`expected`].
    PerElement,
}

impl Expected {
    /// How many of `got` (output elements `first ..`) differ, for the
    /// tabulated forms (`None` for the others).
    pub fn mismatches(&self, first: u64, got: &[f64]) -> Option<u64> {
        match self {
            Expected::Periodic(p) => Some(p.mismatches(first, got)),
            Expected::Blocks {
                block,
                base,
                starts,
            } => {
                let (mut at, mut rest, mut wrong) = (first, got, 0);
                while !rest.is_empty() {
                    let (k, within) = (at / block, at % block);
                    let take = ((block - within) as usize).min(rest.len());
                    wrong += base.mismatches(starts[k as usize] + within, &rest[..take]);
                    (at, rest) = (at + take as u64, &rest[take..]);
                }
                Some(wrong)
            }
            Expected::Unspecified | Expected::PerElement => None,
        }
    }
}

/// What rank `rank`'s output must hold after `call` (as [`expected`]),
/// tabulated where it repeats.
pub fn expected_output(call: &Call, values: &Values, rank: u32) -> Expected {
    let b = call.block.max(1);
    let blocks = |own: u64| match values.data_base() {
        Some((base, shift)) => Expected::Blocks {
            block: b,
            base,
            starts: (0..call.world_size).map(|k| shift(k) + own).collect(),
        },
        None => Expected::PerElement,
    };
    let periodic = match call.collective {
        Collective::Reduce if rank != call.root => return Expected::Unspecified,
        Collective::AllReduce | Collective::Reduce => values.reduced_from(0),
        Collective::ReduceScatter => values.reduced_from(rank as u64 * b),
        Collective::Broadcast => values.inputs(call.root),
        // Block k is rank k's input from element 0 (all-gather) or from
        // this rank's block (all-to-all).
        Collective::AllGather => return blocks(0),
        Collective::AllToAll => return blocks(rank as u64 * b),
    };
    periodic.map_or(Expected::PerElement, Expected::Periodic)
}

/// What rank `rank`'s output element `j` must hold after `call`, whose
/// ranks' inputs are `values` (None: PyTorch leaves it unspecified, e.g.
/// a non-root rank of `reduce`).
pub fn expected(call: &Call, values: &Values, rank: u32, j: u64) -> Option<f64> {
    let b = call.block.max(1);
    Some(match call.collective {
        Collective::AllReduce => values.reduced(j),
        Collective::Broadcast => values.value(call.root, j),
        Collective::Reduce if rank == call.root => values.reduced(j),
        Collective::Reduce => return None,
        Collective::AllGather => values.value((j / b) as u32, j % b),
        Collective::ReduceScatter => values.reduced(rank as u64 * b + j),
        Collective::AllToAll => values.value((j / b) as u32, rank as u64 * b + j % b),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The residue-class reduction equals the reduction over every rank,
    /// in rank order, for every op, dtype and a range of world sizes.
    #[test]
    fn reductions_by_residue_class_equal_the_direct_fold() {
        for dtype in Dtype::ALL {
            for op in RedOp::ALL {
                for ws in [1, 2, 3, 15, 16, 17, 31, 129, 256, 300, 1000, 1024] {
                    let v = Values::new(ws, dtype, op, true);
                    for i in 0..2 * 48 * v.stride + 5 {
                        let vals = (0..ws).map(|r| v.value(r, i));
                        let x = match op {
                            RedOp::Sum => vals.sum(),
                            RedOp::PremulSum => {
                                (0..ws).map(|r| v.value(r, i) * premul_factor(r)).sum()
                            }
                            RedOp::Avg => avg(vals.sum(), ws as u64, dtype),
                            RedOp::Prod => vals.product(),
                            RedOp::Max => vals.fold(f64::MIN, f64::max),
                            RedOp::Min => vals.fold(f64::MAX, f64::min),
                        };
                        let direct = dtype.decode(&dtype.encode(&[x]))[0];
                        assert_eq!(
                            v.reduce_exact(i).to_bits(),
                            direct.to_bits(),
                            "{dtype:?} {op:?} ws {ws} element {i}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn every_partial_result_is_exact_at_every_world_size() {
        for dtype in Dtype::ALL {
            for op in [
                RedOp::Sum,
                RedOp::Prod,
                RedOp::Max,
                RedOp::Avg,
                RedOp::PremulSum,
            ] {
                for ws in [1, 2, 4, 16, 17, 128, 129, 273, 1000, 4096] {
                    let v = Values::new(ws, dtype, op, true);
                    for i in 0..v.reductions.as_ref().unwrap().period() * 2 {
                        let factor = |r| match op {
                            RedOp::PremulSum => premul_factor(r),
                            _ => 1.0,
                        };
                        let vals: Vec<f64> = (0..ws).map(|r| v.value(r, i) * factor(r)).collect();
                        // Sums and products of all of them bound every
                        // partial result, in any order.
                        if op == RedOp::Prod {
                            let prod: f64 = vals.iter().product();
                            assert!(prod <= 32.0, "ws {ws} element {i}: {prod}");
                        } else {
                            let sum: f64 = vals.iter().sum();
                            assert!(
                                sum < exact_range(dtype) as f64,
                                "{dtype:?} ws {ws} element {i}: {sum}"
                            );
                        }
                        assert_eq!(v.reduced(i), v.reduce_exact(i));
                    }
                }
            }
        }
        assert_eq!(Values::new(128, Dtype::F16, RedOp::Sum, true).stride, 1);
        // avg: the exact sum (0 + 13 + 10 at element 0 of 3 ranks),
        // divided and rounded once.
        let avg = Values::new(3, Dtype::F16, RedOp::Avg, true);
        let once = Dtype::F16.decode(&Dtype::F16.encode(&[23.0 * (1.0 / 3.0)]))[0];
        assert_eq!(avg.reduced(0), once);
        assert_ne!(once, 23.0 / 3.0, "f16 rounds it");
    }

    #[test]
    fn premul_sum_takes_each_ranks_factor_for_all_its_contributors() {
        for dtype in [Dtype::F16, Dtype::I8, Dtype::F32] {
            for (ws, k) in [(2u32, 1u32), (3, 4), (4, 16), (5, 2)] {
                let v = Values::new(ws * k, dtype, RedOp::PremulSum, true).contributors_per_rank(k);
                for i in 0..48 * v.stride {
                    let direct: f64 = (0..ws * k)
                        .map(|c| v.value(c, i) * premul_factor(c / k))
                        .sum();
                    let direct = dtype.decode(&dtype.encode(&[direct]))[0];
                    assert_eq!(v.reduced(i), direct, "{dtype:?} {ws} x {k} element {i}");
                }
            }
        }
        assert_eq!(Values::new(4, Dtype::F32, RedOp::Sum, true).factor(3), 1.0);
    }

    #[test]
    fn a_sequence_read_below_a_bound_tabulates_only_that_far() {
        let calls = std::cell::Cell::new(0);
        let v = |i: u64| {
            calls.set(calls.get() + 1);
            (i % 384) as f64
        };
        let short = Periodic::below(384, 8, v);
        assert_eq!((short.period(), calls.get()), (384, 8));
        let mut piece = vec![];
        short.extend_piece(2, 6, &mut piece);
        assert_eq!(piece, [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
        assert_eq!(short.mismatches(0, &[0.0, 1.0, 9.0]), 1);
        // A read past the tabulated positions is refused, not wrapped at 8.
        let past = std::panic::catch_unwind(|| short.at(8));
        assert!(past.is_err());
        // Below a bound, the reductions are the whole period's.
        let whole = Values::new(1024, Dtype::F16, RedOp::Sum, true);
        let few = Values::at_positions_below(1024, Dtype::F16, RedOp::Sum, true, 8);
        assert_eq!(whole.reductions.as_ref().unwrap().table.len(), 384);
        assert_eq!(few.reductions.as_ref().unwrap().table.len(), 8);
        assert!((0..8).all(|i| few.reduced(i) == whole.reduced(i)));
    }

    #[test]
    fn data_moving_values_are_exact_and_tell_ranks_apart() {
        for dtype in Dtype::ALL {
            let v = Values::new(8, dtype, RedOp::Sum, false);
            for r in 0..8 {
                for i in 0..64 {
                    let x = v.value(r, i);
                    assert_eq!(dtype.decode(&dtype.encode(&[x]))[0], x);
                }
            }
            // Neighbouring ranks differ at the same position.
            assert!((0..7).all(|r| v.value(r, 5) != v.value(r + 1, 5)));
        }
    }

    #[test]
    fn periodic_tables_equal_the_formulas_from_any_position() {
        let calls = |ws| {
            [
                Collective::AllReduce,
                Collective::Reduce,
                Collective::ReduceScatter,
                Collective::Broadcast,
                Collective::AllGather,
                Collective::AllToAll,
            ]
            .map(|c| Call {
                collective: c,
                root: 1,
                ..Call::all_reduce(37, ws)
            })
        };
        let (mut tabulated, mut blocks) = (0, 0);
        for dtype in Dtype::ALL {
            for op in [RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Avg] {
                for ws in [2, 3, 129, 300] {
                    for call in calls(ws) {
                        let call = Call { dtype, op, ..call };
                        let v = Values::of_call(&call);
                        for rank in [0, 1, ws - 1] {
                            let n = call.buffers().1;
                            let want: Vec<Option<f64>> =
                                (0..n).map(|j| expected(&call, &v, rank, j)).collect();
                            match expected_output(&call, &v, rank) {
                                Expected::Unspecified => assert!(want.iter().all(Option::is_none)),
                                Expected::PerElement => {}
                                table => {
                                    tabulated += 1;
                                    blocks += matches!(table, Expected::Blocks { .. }) as u32;
                                    let want: Vec<f64> = want.into_iter().flatten().collect();
                                    assert_eq!(want.len() as u64, n);
                                    if let Expected::Periodic(p) = &table {
                                        for first in [0, 1, 5, n / 2] {
                                            let mut piece = vec![];
                                            p.extend_piece(first, n - first, &mut piece);
                                            assert_eq!(piece, want[first as usize..], "{call:?}");
                                        }
                                    }
                                    for first in [0, 1, 5, 36, 37, 38, n / 2].map(|f| f.min(n - 1))
                                    {
                                        let got = &want[first as usize..];
                                        assert_eq!(
                                            table.mismatches(first, got),
                                            Some(0),
                                            "{call:?}"
                                        );
                                    }
                                    let mut bad = want.clone();
                                    bad[3] += 1.0;
                                    bad[n as usize - 1] = -1.0;
                                    assert_eq!(table.mismatches(0, &bad), Some(2), "{call:?}");
                                    assert_eq!(table.mismatches(2, &bad[2..]), Some(2));
                                }
                            }
                            // Tabulated over the whole period, from any
                            // position (a call's own tables stop at its
                            // buffer's length).
                            let whole = Values::new(ws, dtype, op, v.reduces);
                            if let Some(p) = whole.inputs(rank) {
                                for first in [0, 7, 5000] {
                                    let mut piece = vec![];
                                    p.extend_piece(first, 300, &mut piece);
                                    let direct: Vec<f64> =
                                        (first..first + 300).map(|i| v.value(rank, i)).collect();
                                    assert_eq!(piece, direct);
                                }
                            }
                        }
                    }
                }
            }
        }
        assert!(tabulated > 500 && blocks > 100, "{tabulated} {blocks}");
    }

    #[test]
    fn expected_outputs_follow_pytorch_semantics() {
        let call = |c, block| Call {
            collective: c,
            root: 2,
            ..Call::all_reduce(block, 4)
        };
        let gather = call(Collective::AllGather, 3);
        let v = Values::of_call(&gather);
        assert_eq!(expected(&gather, &v, 0, 7), Some(v.value(2, 1)));
        let a2a = call(Collective::AllToAll, 3);
        assert_eq!(expected(&a2a, &v, 1, 7), Some(v.value(2, 4)));
        let bc = call(Collective::Broadcast, 5);
        assert_eq!(expected(&bc, &v, 3, 4), Some(v.value(2, 4)));
        let red = call(Collective::Reduce, 5);
        let rv = Values::of_call(&red);
        assert_eq!(expected(&red, &rv, 1, 0), None);
        assert_eq!(expected(&red, &rv, 2, 3), Some(rv.reduced(3)));
        let rs = call(Collective::ReduceScatter, 5);
        let rsv = Values::of_call(&rs);
        assert_eq!(expected(&rs, &rsv, 3, 1), Some(rsv.reduced(16)));
    }
}
