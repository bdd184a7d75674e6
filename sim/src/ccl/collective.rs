//! What a collective is, independent of how it runs: the collectives of
//! `torch.distributed` KernBench provides, their reduction ops, the shape
//! of one call (a [`Call`]: which collective, dtype, op, root and block
//! size) and the figures every report derives from it — the buffers each
//! rank passes in and gets out, and nccl-tests' bus-bandwidth factor.
//!
//! The names are PyTorch's (`all_reduce`, `all_gather`, ...); the WIT
//! spells them with dashes (`all-reduce`).

use crate::hw::dtype::Dtype;
use std::fmt;

/// A collective of `torch.distributed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Collective {
    AllReduce,
    Broadcast,
    Reduce,
    AllGather,
    ReduceScatter,
    AllToAll,
}

impl Collective {
    pub const ALL: [Collective; 6] = [
        Collective::AllReduce,
        Collective::Broadcast,
        Collective::Reduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::AllToAll,
    ];

    /// PyTorch's name (ccl.yaml keys and report rows use it).
    pub const fn name(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce",
            Collective::Broadcast => "broadcast",
            Collective::Reduce => "reduce",
            Collective::AllGather => "all_gather",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::AllToAll => "all_to_all",
        }
    }

    /// The WIT's name (`all-reduce`): a case of `ccl.collective`.
    pub const fn wit_name(self) -> &'static str {
        match self {
            Collective::AllReduce => "all-reduce",
            Collective::Broadcast => "broadcast",
            Collective::Reduce => "reduce",
            Collective::AllGather => "all-gather",
            Collective::ReduceScatter => "reduce-scatter",
            Collective::AllToAll => "all-to-all",
        }
    }

    /// The collective named `name` (PyTorch's spelling, or the WIT's with
    /// dashes).
    pub fn from_name(name: &str) -> Option<Collective> {
        let n = name.replace('-', "_");
        Collective::ALL.into_iter().find(|c| c.name() == n)
    }

    /// The collective a report row named `name` measured: [`Self::from_name`]
    /// plus the names of `torch.distributed`'s other entry points to the
    /// same collective (`all_gather_into_tensor`, `reduce_scatter_tensor`,
    /// `all_to_all_single` and the older `_base` forms), so a bench may
    /// label its rows with the function it called.
    pub fn from_record_name(name: &str) -> Option<Collective> {
        let n = name.replace('-', "_");
        let canonical = match n.as_str() {
            "all_gather_into_tensor" | "_all_gather_base" | "all_gather_base" => "all_gather",
            "reduce_scatter_tensor" | "_reduce_scatter_base" | "reduce_scatter_base" => {
                "reduce_scatter"
            }
            "all_to_all_single" => "all_to_all",
            other => other,
        };
        Collective::from_name(canonical)
    }

    /// Every name, for error messages.
    pub fn names() -> String {
        Collective::ALL.map(Collective::name).join(", ")
    }

    /// Whether it combines values with a [`RedOp`].
    pub const fn reduces(self) -> bool {
        matches!(
            self,
            Collective::AllReduce | Collective::Reduce | Collective::ReduceScatter
        )
    }

    /// Whether one rank is its root (`src` / `dst`).
    pub const fn has_root(self) -> bool {
        matches!(self, Collective::Broadcast | Collective::Reduce)
    }

    /// Whether the output is the input buffer (all-reduce, broadcast,
    /// reduce) rather than a buffer of its own.
    pub const fn in_place(self) -> bool {
        !matches!(
            self,
            Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll
        )
    }

    /// Elements of the (input, output) buffer of one rank for blocks of
    /// `block` elements among `world_size` ranks (see [`Call::block`]).
    pub const fn buffers(self, block: u64, world_size: u32) -> (u64, u64) {
        let all = block * world_size as u64;
        match self {
            Collective::AllReduce | Collective::Broadcast | Collective::Reduce => (block, block),
            Collective::AllGather => (block, all),
            Collective::ReduceScatter => (all, block),
            Collective::AllToAll => (all, all),
        }
    }

    /// nccl-tests' bus-bandwidth factor (its PERFORMANCE.md): busbw =
    /// algbw × factor, with algbw = size / time and size as
    /// [`Collective::reported_elements`]. all-reduce 2(n−1)/n; all-gather,
    /// reduce-scatter and all-to-all (n−1)/n; broadcast and reduce 1.
    pub fn busbw_factor(self, world_size: u32) -> f64 {
        let n = world_size.max(1) as f64;
        match self {
            Collective::AllReduce => 2.0 * (n - 1.0) / n,
            Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => {
                (n - 1.0) / n
            }
            Collective::Broadcast | Collective::Reduce => 1.0,
        }
    }

    /// The elements nccl-tests reports as `count` (and `size` in bytes) for
    /// blocks of `block`: the larger of a rank's two buffers (all-gather's
    /// output, reduce-scatter's input, all-to-all's whole buffer), the
    /// buffer itself for the others.
    pub const fn reported_elements(self, block: u64, world_size: u32) -> u64 {
        let (i, o) = self.buffers(block, world_size);
        if i > o {
            i
        } else {
            o
        }
    }
}

impl fmt::Display for Collective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A reduction of `torch.distributed.ReduceOp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RedOp {
    Sum,
    Prod,
    Max,
    Min,
    /// The sum divided by the world size.
    Avg,
    /// The sum of every rank's input times that rank's own factor
    /// (PyTorch's `_make_nccl_premul_sum`; [`Reduction`] carries the
    /// factor, which differs per rank and is not part of the call).
    PremulSum,
}

impl RedOp {
    pub const ALL: [RedOp; 6] = [
        RedOp::Sum,
        RedOp::Prod,
        RedOp::Max,
        RedOp::Min,
        RedOp::Avg,
        RedOp::PremulSum,
    ];

    /// The name reports print, lower case: nccl-tests' `-o` name but for
    /// `premul_sum` (PyTorch's; nccl-tests prints `mulsum`).
    pub const fn name(self) -> &'static str {
        match self {
            RedOp::Sum => "sum",
            RedOp::Prod => "prod",
            RedOp::Max => "max",
            RedOp::Min => "min",
            RedOp::Avg => "avg",
            RedOp::PremulSum => "premul_sum",
        }
    }

    /// The WIT's case (`ccl.red-op`).
    pub const fn wit_name(self) -> &'static str {
        match self {
            RedOp::PremulSum => "premul-sum",
            other => other.name(),
        }
    }

    /// The op named `name`: nccl-tests' spelling or PyTorch's `ReduceOp`
    /// member (`SUM`, `PRODUCT`, `MAX`, `MIN`, `AVG`, `PREMUL_SUM`), any
    /// case.
    pub fn from_name(name: &str) -> Option<RedOp> {
        match name.to_ascii_lowercase().as_str() {
            "sum" => Some(RedOp::Sum),
            "prod" | "product" => Some(RedOp::Prod),
            "max" => Some(RedOp::Max),
            "min" => Some(RedOp::Min),
            "avg" => Some(RedOp::Avg),
            "premul_sum" | "premul-sum" | "mulsum" => Some(RedOp::PremulSum),
            _ => None,
        }
    }
}

/// One rank's reduction as a bench asks for it: the op and, for
/// `premul_sum`, the rank's factor. Spelled `sum`, `avg`, ... or
/// `premul_sum:<factor>` (e.g. `premul_sum:0.25`; the factor any number
/// Rust's `f64` parser reads, finite).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reduction {
    pub op: RedOp,
    /// `premul_sum`'s factor, none for the other ops.
    pub factor: Option<f64>,
}

impl Reduction {
    /// `op` with no factor.
    pub const fn plain(op: RedOp) -> Reduction {
        Reduction { op, factor: None }
    }

    /// The reduction `spec` spells, or why not (the caller names the call).
    pub fn parse(spec: &str) -> Result<Reduction, String> {
        let known = "known: sum, prod, max, min, avg, premul_sum:<factor>";
        let (name, factor) = match spec.split_once(':') {
            Some((n, f)) => (n.trim(), Some(f.trim())),
            None => (spec.trim(), None),
        };
        let op = RedOp::from_name(name).ok_or_else(|| format!("unknown op '{spec}' ({known})"))?;
        match (op, factor) {
            (RedOp::PremulSum, None) => Err(format!(
                "op '{spec}' needs the rank's factor: premul_sum:<factor> (PyTorch: \
                 dist._make_nccl_premul_sum(factor))"
            )),
            (RedOp::PremulSum, Some(f)) => match f.parse::<f64>() {
                Ok(x) if x.is_finite() => Ok(Reduction {
                    op,
                    factor: Some(x),
                }),
                _ => Err(format!(
                    "op '{spec}': the factor '{f}' is not a finite number (e.g. premul_sum:0.5)"
                )),
            },
            (_, Some(_)) => Err(format!(
                "op '{spec}': only premul_sum takes a factor (write '{}')",
                op.name()
            )),
            (_, None) => Ok(Reduction::plain(op)),
        }
    }
}

impl fmt::Display for RedOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One collective call as the algorithm sees it (`kernel-args-for`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Call {
    pub collective: Collective,
    pub dtype: Dtype,
    /// The reduction (`Sum` where the collective does not reduce).
    pub op: RedOp,
    /// `src` of broadcast / send, `dst` of reduce (0 where there is none).
    pub root: u32,
    /// Elements of one block: the whole tensor of all-reduce, broadcast,
    /// reduce and send/recv; one rank's input of all-gather; one rank's
    /// output of reduce-scatter; what a rank sends each peer in all-to-all.
    pub block: u64,
    pub world_size: u32,
}

impl Call {
    /// The seed's call: an f16 sum all-reduce of `block` elements.
    pub fn seed_all_reduce(block: u64, world_size: u32) -> Call {
        Call {
            collective: Collective::AllReduce,
            dtype: Dtype::F16,
            op: RedOp::Sum,
            root: 0,
            block,
            world_size,
        }
    }

    /// Whether the seed's ABI (`kernel-args-with(world-size, n-elem, ...)`)
    /// can express it: an f16 sum all-reduce.
    pub fn is_seed_form(&self) -> bool {
        self.collective == Collective::AllReduce
            && self.dtype == Dtype::F16
            && self.op == RedOp::Sum
    }

    /// Elements of one rank's (input, output).
    pub fn buffers(&self) -> (u64, u64) {
        self.collective.buffers(self.block, self.world_size)
    }

    /// Human words for errors: `all_reduce (avg, bf16)`.
    pub fn describe(&self) -> String {
        let mut words = Vec::new();
        if self.collective.reduces() {
            words.push(self.op.name().to_string());
        }
        words.push(self.dtype.name().to_string());
        if self.collective.has_root() {
            words.push(format!("root {}", self.root));
        }
        format!("{} ({})", self.collective, words.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wit_name_is_the_name_with_dashes_and_reads_back() {
        for c in Collective::ALL {
            assert_eq!(c.wit_name(), c.name().replace('_', "-"));
            assert_eq!(Collective::from_name(c.wit_name()), Some(c));
        }
    }

    #[test]
    fn names_round_trip_in_both_spellings() {
        for c in Collective::ALL {
            assert_eq!(Collective::from_name(c.name()), Some(c));
            assert_eq!(Collective::from_name(&c.name().replace('_', "-")), Some(c));
        }
        assert_eq!(Collective::from_name("allreduce"), None);
        assert_eq!(Collective::from_name("all_gather_into_tensor"), None);
        for (torch_name, c) in [
            ("all_gather_into_tensor", Collective::AllGather),
            ("_all_gather_base", Collective::AllGather),
            ("reduce_scatter_tensor", Collective::ReduceScatter),
            ("reduce-scatter-tensor", Collective::ReduceScatter),
            ("all_to_all_single", Collective::AllToAll),
            ("all_reduce", Collective::AllReduce),
        ] {
            assert_eq!(
                Collective::from_record_name(torch_name),
                Some(c),
                "{torch_name}"
            );
        }
        assert_eq!(Collective::from_record_name("allgather"), None);
        for o in RedOp::ALL {
            assert_eq!(RedOp::from_name(o.name()), Some(o));
        }
        assert_eq!(RedOp::from_name("PRODUCT"), Some(RedOp::Prod));
        assert_eq!(RedOp::from_name("band"), None);
        assert_eq!(RedOp::PremulSum.wit_name(), "premul-sum");
    }

    #[test]
    fn a_reduction_reads_premul_sums_factor_and_refuses_what_is_not_one() {
        assert_eq!(Reduction::parse("avg"), Ok(Reduction::plain(RedOp::Avg)));
        let p = Reduction::parse("PREMUL_SUM:0.25").unwrap();
        assert_eq!((p.op, p.factor), (RedOp::PremulSum, Some(0.25)));
        assert_eq!(Reduction::parse("premul_sum: 2").unwrap().factor, Some(2.0));
        for (bad, why) in [
            ("premul_sum", "needs the rank's factor"),
            ("premul_sum:inf", "not a finite number"),
            ("premul_sum:x", "not a finite number"),
            ("sum:2", "only premul_sum takes a factor"),
            ("band", "unknown op 'band'"),
        ] {
            let e = Reduction::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn busbw_factors_are_nccl_tests() {
        assert_eq!(Collective::AllReduce.busbw_factor(4), 1.5);
        assert_eq!(Collective::AllGather.busbw_factor(4), 0.75);
        assert_eq!(Collective::ReduceScatter.busbw_factor(8), 0.875);
        assert_eq!(Collective::Broadcast.busbw_factor(8), 1.0);
        assert_eq!(Collective::Reduce.busbw_factor(1), 1.0);
        assert_eq!(Collective::AllReduce.busbw_factor(1), 0.0);
    }

    #[test]
    fn buffers_and_reported_size() {
        assert_eq!(Collective::AllGather.buffers(10, 4), (10, 40));
        assert_eq!(Collective::ReduceScatter.buffers(10, 4), (40, 10));
        assert_eq!(Collective::AllToAll.buffers(10, 4), (40, 40));
        assert_eq!(Collective::AllReduce.buffers(10, 4), (10, 10));
        assert_eq!(Collective::AllGather.reported_elements(10, 4), 40);
        assert_eq!(Collective::ReduceScatter.reported_elements(10, 4), 40);
        assert_eq!(Collective::Broadcast.reported_elements(10, 4), 10);
    }

    #[test]
    fn a_call_describes_itself() {
        let mut c = Call::seed_all_reduce(8, 4);
        assert!(c.is_seed_form());
        assert_eq!(c.describe(), "all_reduce (sum, f16)");
        c.op = RedOp::Avg;
        assert!(!c.is_seed_form());
        c.collective = Collective::Broadcast;
        c.root = 2;
        assert_eq!(c.describe(), "broadcast (f16, root 2)");
    }
}
