//! The collectives an algorithm can implement ([`Collective`], [`RedOp`]),
//! one call of one ([`Call`], what `kernel-args-for` receives), and the
//! encoding SDK algorithms use to hand a call to their kernel
//! ([`Call::to_args`] / [`Call::from_args`], [`HostArgs`] for the values
//! the host appends).

use crate::{BinOp, Dtype, Tl, UnaryOp};

/// A collective of `torch.distributed` (the WIT's `ccl.collective`).
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

    /// PyTorch's name.
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

    /// Whether the output is the input buffer (all-reduce, broadcast,
    /// reduce); the others get the host's `out-ptr`.
    pub const fn in_place(self) -> bool {
        !matches!(
            self,
            Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll
        )
    }

    /// Elements of one rank's (input, output) for blocks of `block`.
    pub const fn buffers(self, block: u64, world_size: u32) -> (u64, u64) {
        let all = block * world_size as u64;
        match self {
            Collective::AllGather => (block, all),
            Collective::ReduceScatter => (all, block),
            Collective::AllToAll => (all, all),
            _ => (block, block),
        }
    }
}

/// `torch.distributed.ReduceOp` (the WIT's `ccl.red-op`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RedOp {
    Sum,
    Prod,
    Max,
    Min,
    /// The sum divided by the world size.
    Avg,
    /// The sum of every rank's input times that rank's own factor
    /// (PyTorch's `_make_nccl_premul_sum`): the host appends the factor
    /// to the kernel's arguments ([`HostArgs::factor`]); an algorithm
    /// multiplies its own contribution by it as it reads it
    /// ([`RedOp::prepare`]), then sums.
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

    /// PyTorch's name, lower case (`premul_sum`; nccl-tests prints
    /// [`RedOp::nccl_name`]).
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

    /// nccl-tests' name (`-o`, the table's `redop` column): `mulsum` for
    /// premul_sum.
    pub const fn nccl_name(self) -> &'static str {
        match self {
            RedOp::PremulSum => "mulsum",
            other => other.name(),
        }
    }

    /// The op named `name` (PyTorch's `ReduceOp` names, any case;
    /// `product` for prod; `mulsum` for premul_sum).
    pub fn from_name(name: &str) -> Option<RedOp> {
        let n = name.to_ascii_lowercase();
        let n = match n.as_str() {
            "product" => "prod".to_string(),
            "mulsum" | "premul-sum" => "premul_sum".to_string(),
            _ => n,
        };
        RedOp::ALL.into_iter().find(|o| o.name() == n)
    }

    /// The op as `torch.distributed` takes it from one rank: its name, and
    /// for premul_sum the rank's `factor` (`premul_sum:<factor>`).
    pub fn spelled(self, factor: f64) -> String {
        match self {
            RedOp::PremulSum => format!("premul_sum:{factor:?}"),
            other => other.name().to_string(),
        }
    }

    /// What a rank does to its own contribution before it combines it:
    /// premul_sum's multiplication by the rank's `factor` (none for the
    /// other ops, or without a factor).
    pub fn prepare(self, dtype: Dtype, factor: Option<f64>) -> Option<Prepare> {
        match (self, factor) {
            (RedOp::PremulSum, Some(f)) => Some(Prepare::of(dtype, f)),
            _ => None,
        }
    }

    /// The MATH unit's operation that combines two partial results (`Avg`
    /// and premul_sum add; divide once at the end with [`RedOp::finish`]).
    pub const fn combine(self) -> BinOp {
        match self {
            RedOp::Sum | RedOp::Avg | RedOp::PremulSum => BinOp::Add,
            RedOp::Prod => BinOp::Mul,
            RedOp::Max => BinOp::Max,
            RedOp::Min => BinOp::Min,
        }
    }

    /// The factor to scale the full reduction by: `1 / world_size` for
    /// `Avg`, none for the others. Floats only: an integer `avg` divides,
    /// truncating ([`RedOp::finish`] says which).
    pub fn finish_factor(self, world_size: u32) -> Option<f64> {
        (self == RedOp::Avg).then(|| 1.0 / world_size.max(1) as f64)
    }

    /// What the full reduction of `contributions` values of `dtype` still
    /// needs: `Avg`'s division, none for the others.
    pub fn finish(self, dtype: Dtype, contributions: u32) -> Option<Finish> {
        let n = contributions.max(1);
        (self == RedOp::Avg).then(|| {
            if dtype.is_integer() {
                Finish::Divide(n)
            } else {
                Finish::Scale(1.0 / n as f64)
            }
        })
    }
}

/// `avg`'s last step, as NCCL does it: floats are scaled by `1 / n` and
/// rounded once; integers are divided by `n`, truncating toward zero
/// (NCCL's `ncclAvg` of an integer type: the sum, then divided).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Finish {
    Scale(f64),
    Divide(u32),
}

impl Finish {
    /// `t` finished on the MATH unit. A float takes one `scale`. An
    /// integer takes four commands: `n` made by [`filled_like`] (three),
    /// then `t / n`; i8 / u8 with more contributions than they hold are
    /// divided in i32 (two `cast`s more).
    pub fn apply<T: Tl + ?Sized>(self, tl: &T, t: &T::Tensor) -> T::Tensor {
        match self {
            Finish::Scale(f) => tl.scale(t, f),
            Finish::Divide(n) => {
                let dtype = crate::Tensor::dtype(t);
                let narrow = match dtype {
                    Dtype::I8 => n > i8::MAX as u32,
                    Dtype::U8 => n > u8::MAX as u32,
                    _ => false,
                };
                let divide =
                    |x: &T::Tensor| tl.binary(BinOp::Div, x, &filled_like(tl, x, n.into()));
                if narrow {
                    let wide = tl.cast(t, Dtype::I32);
                    tl.cast(&divide(&wide), dtype)
                } else {
                    divide(t)
                }
            }
        }
    }
}

/// A tensor of `x`'s shape and dtype whose every element is `k`, made
/// as kernels built before `tl.fill` existed make it: `exp(x − x) · k`,
/// three MATH commands. One `tl.fill` would do, and take less simulated
/// time; it is not used here so that a kernel rebuilt with this SDK
/// times integer `avg` and `premul_sum` exactly as before (switching is
/// a change of simulated times, to be made on its own and announced in
/// the CHANGELOG).
fn filled_like<T: Tl + ?Sized>(tl: &T, x: &T::Tensor, k: f64) -> T::Tensor {
    let zero = tl.binary(BinOp::Sub, x, x);
    let one = tl.unary(UnaryOp::Exp, &zero);
    tl.scale(&one, k)
}

/// premul_sum's first step, NCCL's `preOp`: a rank's own contribution
/// times the rank's factor converted to the dtype, the product taken in
/// the dtype. A float's factor is rounded to the dtype and applied by one
/// `scale` (the f64 product of two values of the dtype is exact, so the
/// one rounding is the dtype's own multiplication). An integer's factor
/// is truncated toward zero and wrapped to the dtype, then multiplied
/// with `binary(mul)`, which wraps as NCCL's does: four commands (the
/// factor made by [`filled_like`], then `t · k`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Prepare {
    Scale(f64),
    Multiply(f64),
}

impl Prepare {
    /// The step for `factor` on values of `dtype`.
    pub fn of(dtype: Dtype, factor: f64) -> Prepare {
        if dtype.is_integer() {
            Prepare::Multiply(dtype.wrap(factor.trunc()))
        } else {
            Prepare::Scale(dtype.decode(&dtype.encode(&[factor]))[0])
        }
    }

    /// `t` times the factor, on the MATH unit.
    pub fn apply<T: Tl + ?Sized>(self, tl: &T, t: &T::Tensor) -> T::Tensor {
        match self {
            Prepare::Scale(f) => tl.scale(t, f),
            Prepare::Multiply(k) => tl.binary(BinOp::Mul, t, &filled_like(tl, t, k)),
        }
    }
}

/// How one rank reduces for a call, the three steps of NCCL's reduction:
/// its own contribution prepared as it is read ([`Prepare`]: premul_sum's
/// factor), partial results combined ([`RedOp::combine`]), the full
/// reduction finished ([`Finish`]: avg's division). The SDK's reducing
/// helpers take one, so an algorithm built on them does every op.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reduction {
    pub prepare: Option<Prepare>,
    pub combine: BinOp,
    pub finish: Option<Finish>,
}

impl Reduction {
    /// This rank's reduction for `call` (its factor from `host`) over
    /// `contributions` values (one: nothing to finish, avg of one value
    /// is the value).
    pub fn of(call: &Call, host: &HostArgs, contributions: u32) -> Reduction {
        Reduction {
            prepare: host.prepare(call),
            combine: call.op.combine(),
            finish: call
                .op
                .finish(call.dtype, contributions)
                .filter(|_| contributions > 1),
        }
    }

    /// Combine with `combine` only (nothing to prepare or finish: the
    /// seed's sum is `BinOp::Add`).
    pub const fn combining(combine: BinOp) -> Reduction {
        Reduction {
            prepare: None,
            combine,
            finish: None,
        }
    }

    /// The rank's own contribution `t`, prepared.
    pub fn own<T: Tl + ?Sized>(&self, tl: &T, t: T::Tensor) -> T::Tensor {
        match self.prepare {
            Some(p) => p.apply(tl, &t),
            None => t,
        }
    }

    /// Load the rank's own contribution (`n` elements of `dt` at `addr`),
    /// prepared.
    pub fn load<T: Tl + ?Sized>(&self, tl: &T, addr: u64, n: u64, dt: Dtype) -> T::Tensor {
        self.own(tl, tl.load(addr, &[n as u32], dt))
    }

    /// `a` and `b` combined.
    pub fn combine<T: Tl + ?Sized>(&self, tl: &T, a: &T::Tensor, b: &T::Tensor) -> T::Tensor {
        tl.binary(self.combine, a, b)
    }

    /// The full reduction `t`, finished.
    pub fn finished<T: Tl + ?Sized>(&self, tl: &T, t: T::Tensor) -> T::Tensor {
        match self.finish {
            Some(f) => f.apply(tl, &t),
            None => t,
        }
    }

    /// Whether a rank alone must still compute (premul_sum's factor): its
    /// result is not its input as is.
    pub fn alone_computes(&self) -> bool {
        self.prepare.is_some()
    }
}

/// One collective call (the WIT's `ccl.call`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Call {
    pub collective: Collective,
    pub dtype: Dtype,
    pub op: RedOp,
    /// `src` of broadcast, `dst` of reduce, else 0.
    pub root: u32,
    /// Elements of one block (see the WIT's `call.block`).
    pub block: u64,
    pub world_size: u32,
    pub cube_w: u32,
    pub cube_h: u32,
}

/// Values of [`Call::to_args`].
pub const CALL_ARGS: usize = 6;

impl Call {
    /// The seed's call: an f16 sum all-reduce of `block` elements.
    pub fn all_reduce(block: u64, world_size: u32) -> Call {
        Call {
            collective: Collective::AllReduce,
            dtype: Dtype::F16,
            op: RedOp::Sum,
            root: 0,
            block,
            world_size,
            cube_w: 1,
            cube_h: 1,
        }
    }

    /// An f16 sum `collective` of blocks of `block` elements, root 0.
    pub fn of(collective: Collective, block: u64, world_size: u32) -> Call {
        Call {
            collective,
            ..Call::all_reduce(block, world_size)
        }
    }

    /// Whether the seed's ABI can express it: an f16 sum all-reduce.
    pub fn is_seed_form(&self) -> bool {
        self.collective == Collective::AllReduce
            && self.dtype == Dtype::F16
            && self.op == RedOp::Sum
    }

    /// Elements of one rank's (input, output).
    pub fn buffers(&self) -> (u64, u64) {
        self.collective.buffers(self.block, self.world_size)
    }

    /// `all_reduce (avg, bf16)`, for messages.
    pub fn describe(&self) -> String {
        format!(
            "{} ({}, {})",
            self.collective.name(),
            self.op.name(),
            self.dtype.name()
        )
    }

    /// The call as the first [`CALL_ARGS`] kernel arguments: collective,
    /// dtype, op, root, block, world size.
    pub fn to_args(&self) -> Vec<i64> {
        let idx = |c: Collective| Collective::ALL.iter().position(|&x| x == c).unwrap();
        let dt = Dtype::ALL.iter().position(|&d| d == self.dtype).unwrap();
        let op = RedOp::ALL.iter().position(|&o| o == self.op).unwrap();
        vec![
            idx(self.collective) as i64,
            dt as i64,
            op as i64,
            self.root as i64,
            self.block as i64,
            self.world_size as i64,
        ]
    }

    /// The call [`Call::to_args`] encoded at the front of `args` (the cube
    /// mesh is not encoded: 1 × 1).
    pub fn from_args(args: &[i64]) -> Call {
        assert!(
            args.len() >= CALL_ARGS,
            "kernel args hold no call: {args:?}"
        );
        Call {
            collective: Collective::ALL[args[0] as usize],
            dtype: Dtype::ALL[args[1] as usize],
            op: RedOp::ALL[args[2] as usize],
            root: args[3] as u32,
            block: args[4] as u64,
            world_size: args[5] as u32,
            cube_w: 1,
            cube_h: 1,
        }
    }
}

/// The values the host appends to every kernel's arguments.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostArgs {
    /// The rank (SIP rank) this kernel runs for.
    pub sip_rank: u32,
    pub sip_topo_kind: i64,
    pub sip_topo_w: u32,
    pub sip_topo_h: u32,
    /// Where the rank's output goes: the appended `out-ptr` of a
    /// collective with its own output buffer, else `t_ptr` (in place).
    pub out_ptr: u64,
    /// The rank's premul_sum factor (the host appends it after `out-ptr`
    /// to a premul_sum call's arguments), none for the other ops.
    pub factor: Option<f64>,
}

/// The seed's four host values (sip rank, topology kind, w, h).
pub const HOST_ARGS: usize = 4;

impl HostArgs {
    /// The host's values in `args` after the kernel's own `n_own`
    /// arguments (what `kernel_args_for` returned); `t_ptr` is the
    /// kernel's.
    pub fn after(args: &[i64], n_own: usize, t_ptr: u64) -> HostArgs {
        assert!(
            args.len() >= n_own + HOST_ARGS,
            "kernel args hold no host values after {n_own} of the kernel's own: {args:?}"
        );
        let t = &args[n_own..];
        HostArgs {
            sip_rank: t[0] as u32,
            sip_topo_kind: t[1],
            sip_topo_w: t[2] as u32,
            sip_topo_h: t[3] as u32,
            out_ptr: t.get(HOST_ARGS).map_or(t_ptr, |&p| p as u64),
            factor: t.get(HOST_ARGS + 1).map(|&b| f64::from_bits(b as u64)),
        }
    }

    /// What this rank does to its own contribution to `call` before it
    /// combines it ([`RedOp::prepare`] with the rank's factor).
    pub fn prepare(&self, call: &Call) -> Option<Prepare> {
        call.op.prepare(call.dtype, self.factor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_survives_the_args_encoding() {
        for c in Collective::ALL {
            for op in RedOp::ALL {
                for dtype in Dtype::ALL {
                    let call = Call {
                        collective: c,
                        dtype,
                        op,
                        root: 3,
                        block: 1 << 33,
                        world_size: 7,
                        cube_w: 1,
                        cube_h: 1,
                    };
                    let mut args = call.to_args();
                    args.extend([9, 8]);
                    assert_eq!(Call::from_args(&args), call);
                }
            }
        }
    }

    #[test]
    fn host_args_follow_the_kernels_own() {
        let h = HostArgs::after(&[1, 2, 5, 0, 4, 4, 0x9000], 2, 0x1000);
        assert_eq!(h.sip_rank, 5);
        assert_eq!(h.sip_topo_w, 4);
        assert_eq!(h.out_ptr, 0x9000);
        let h = HostArgs::after(&[1, 2, 5, 0, 4, 4], 2, 0x1000);
        assert_eq!(h.out_ptr, 0x1000, "in place");
        assert_eq!(h.factor, None);
        let h = HostArgs::after(
            &[1, 2, 5, 0, 4, 4, 0x1000, 2.5f64.to_bits() as i64],
            2,
            0x1000,
        );
        assert_eq!(h.factor, Some(2.5));
    }

    #[test]
    fn premul_sums_factor_is_converted_to_the_dtype_as_nccl_does() {
        assert_eq!(Prepare::of(Dtype::F32, 0.1), Prepare::Scale(0.1f32 as f64));
        assert_eq!(Prepare::of(Dtype::F16, 2.0), Prepare::Scale(2.0));
        assert_eq!(Prepare::of(Dtype::I32, 2.9), Prepare::Multiply(2.0));
        assert_eq!(Prepare::of(Dtype::I32, -2.9), Prepare::Multiply(-2.0));
        assert_eq!(Prepare::of(Dtype::U8, 257.0), Prepare::Multiply(1.0));
        assert_eq!(Prepare::of(Dtype::I8, 200.0), Prepare::Multiply(-56.0));
        assert_eq!(RedOp::Sum.prepare(Dtype::F32, Some(2.0)), None);
        assert_eq!(RedOp::PremulSum.prepare(Dtype::F32, None), None);
        assert_eq!(RedOp::from_name("mulsum"), Some(RedOp::PremulSum));
        assert_eq!(RedOp::PremulSum.spelled(2.0), "premul_sum:2.0");
        assert_eq!(RedOp::Max.spelled(2.0), "max");
    }
}
