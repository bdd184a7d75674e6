//! The shapes of the guest interface this host serves: today's
//! (`kernbench:sim@0.8.4`) and every earlier release.
//!
//! The interface changed incompatibly five times while it was labelled
//! `0.1.0`; those states are the releases 0.1.0 (as first released) to
//! 0.6.0 (wit/history/README.md), and the labels 0.1.1 to 0.1.3 were
//! released on top of the last of them. Then 0.7.0 gave `dtype` six more
//! cases, and 0.8.0 `ccl.red-op` the case `premul-sum` (a type only the
//! exports use: 0.7.0's imports are today's). The imported functions
//! that differ from today's:
//! every one whose type names a dtype, before 0.7.0 ([`dtype4`]);
//! `torch.zeros` without `dp` (before 0.2.0);
//! `distributed.init-process-group` without `options` (before 0.3.0);
//! `tl.binary` with the 5-case `binop` (before 0.5.0).
//!
//! wasmtime matches an import by exact name first, else by the highest
//! version of its semver track, and type-checks every imported function
//! exactly. So today's linker holds today's interfaces under `@0.8.4` (0.8.0
//! to 0.8.3 resolve to it: 0.8.1 only added `tl.fill`, 0.8.2 the process
//! groups of `distributed`, 0.8.3 its asynchronous calls, 0.8.4
//! `launch-async` and `ahbm.gemm` / `busy`),
//! again under `@0.7.0`, `@0.6.5` (0.6.x resolve to it) and `@0.1.3` (the labels
//! 0.1.1 to 0.1.3, and 0.1.0 of the states 0.5.0 and 0.6.0, resolve to
//! it), and under each of `@0.2.0` to `@0.5.0`, with adapters over the one
//! implementation for the functions that differ in that state. A
//! component labelled `0.1.0` may be of any state 0.1.0 to 0.6.0, and one
//! exact name holds one type per function, so each older state a world
//! tells apart is a linker of its own: today's plus that state under the
//! exact name `@0.1.0`. [`Shapes::instantiate_pre`] tries today's linker
//! first, then those; a component none links is refused with today's
//! linker's words. The exports whose types changed (`entry-defaults`,
//! `collectives`, `kernel-args-for`) are called by value
//! ([`crate::runtime::hooks`]), so any state's export serves; a call of a
//! dtype the component's `kernel-args-for` cannot name is refused there.

mod dtype4;

use super::bench::BenchHost;
use super::bindings::algorithm::kernbench::sim::tl;
use super::bindings::algorithm_eager::kernbench::sim::tl as eager_tl;
use super::bindings::bench::kernbench::sim::{
    accelerator, ahbm, distributed, multiprocessing, report, torch,
};
use super::eager::{EagerHost, EagerTensor};
use super::kernel::{KernelHost, KernelTensor};
use crate::components::compat::interface_at;
use wasmtime::component::{Component, ComponentType, HasSelf, InstancePre, Lift, Linker, Resource};
use wasmtime::StoreContextMut;

/// The state (0.MINOR.0) in which `torch.zeros` took `dp`.
const ZEROS_TAKES_DP: u64 = 2;
/// The state in which `distributed.init-process-group` took `options`.
const INIT_TAKES_OPTIONS: u64 = 3;
/// The state in which `tl.binop` gained `div`.
const BINOP_GAINS_DIV: u64 = 5;

/// The labels today's linker serves besides today's `@0.8.4`, each with
/// the state (0.MINOR.0) of the interfaces it names: 0.7.0, the last release of
/// the 0.6 line (0.6.x resolve to it), the legacy labels 0.1.1 to 0.1.3
/// (the interface of 0.6.1 to 0.6.3), then each earlier line.
const LABELS: [(&str, u64); 7] = [
    ("0.7.0", 7),
    ("0.6.5", 6),
    ("0.1.3", 6),
    ("0.2.0", 2),
    ("0.3.0", 3),
    ("0.4.0", 4),
    ("0.5.0", 5),
];

/// Registers, under `kernbench:sim/<interface>@<label>`, every interface
/// of one world with today's functions, adapted to state `0.<state>.0`.
type Adapt<T> = fn(&mut Linker<T>, &str, u64) -> wasmtime::Result<()>;

/// One shape: a linker and the state it serves under the label `0.1.0`
/// (none: today's linker).
struct Shape<T: 'static> {
    serves: Option<&'static str>,
    linker: Linker<T>,
}

/// The linkers of every shape one world is served in, today's first.
pub struct Shapes<T: 'static> {
    shapes: Vec<Shape<T>>,
}

impl<T: 'static> Shapes<T> {
    /// Today's linker (`base`, plus every label of [`LABELS`] through
    /// `adapt`), then, for each `(state, serves)` of `label_0_1_0`, that
    /// linker again plus the state under the label `0.1.0`.
    fn new(
        base: impl Fn() -> wasmtime::Result<Linker<T>>,
        adapt: Adapt<T>,
        label_0_1_0: &[(u64, &'static str)],
    ) -> wasmtime::Result<Self> {
        let today = || -> wasmtime::Result<Linker<T>> {
            let mut linker = base()?;
            // An adapter replaces today's function of its name.
            linker.allow_shadowing(true);
            for (label, state) in LABELS {
                adapt(&mut linker, label, state)?;
            }
            Ok(linker)
        };
        let mut shapes = vec![Shape {
            serves: None,
            linker: today()?,
        }];
        for &(state, serves) in label_0_1_0 {
            let mut linker = today()?;
            adapt(&mut linker, "0.1.0", state)?;
            shapes.push(Shape {
                serves: Some(serves),
                linker,
            });
        }
        Ok(Shapes { shapes })
    }

    /// Pre-instantiate `component` in the first shape that links it, and
    /// say which earlier state labelled `0.1.0` it serves (none: today's
    /// linker); today's linker's refusal when none does.
    pub fn instantiate_pre(
        &self,
        component: &Component,
    ) -> wasmtime::Result<(InstancePre<T>, Option<&'static str>)> {
        let mut first_refusal = None;
        for shape in &self.shapes {
            match shape.linker.instantiate_pre(component) {
                Ok(pre) => return Ok((pre, shape.serves)),
                Err(e) => {
                    first_refusal.get_or_insert(e);
                }
            }
        }
        Err(first_refusal.expect("there is always today's shape"))
    }
}

/// `tl.binop` before `div` (0.1.0 to 0.4.0).
#[derive(ComponentType, Lift, Clone, Copy, Debug, PartialEq, Eq)]
#[component(enum)]
#[allow(dead_code, reason = "its values are lifted from guests")]
#[repr(u8)]
enum BinopBeforeDiv {
    #[component(name = "add")]
    Add,
    #[component(name = "sub")]
    Sub,
    #[component(name = "mul")]
    Mul,
    #[component(name = "max")]
    Max,
    #[component(name = "min")]
    Min,
}

impl BinopBeforeDiv {
    fn today(self) -> tl::Binop {
        match self {
            Self::Add => tl::Binop::Add,
            Self::Sub => tl::Binop::Sub,
            Self::Mul => tl::Binop::Mul,
            Self::Max => tl::Binop::Max,
            Self::Min => tl::Binop::Min,
        }
    }

    fn today_eager(self) -> eager_tl::Binop {
        match self {
            Self::Add => eager_tl::Binop::Add,
            Self::Sub => eager_tl::Binop::Sub,
            Self::Mul => eager_tl::Binop::Mul,
            Self::Max => eager_tl::Binop::Max,
            Self::Min => eager_tl::Binop::Min,
        }
    }
}

/// The kernel world's states under the label `0.1.0` that today's linker
/// cannot serve: only `binop` differs, so 0.1.0 to 0.4.0 are one shape.
const KERNEL_0_1_0: [(u64, &str); 1] = [(
    4,
    "kernbench:sim@0.4.0 or earlier (labelled 0.1.0 then; `binop` without `div`)",
)];

/// A kernel's shapes (see the module doc).
pub fn kernel(
    base: impl Fn() -> wasmtime::Result<Linker<KernelHost>>,
) -> wasmtime::Result<Shapes<KernelHost>> {
    fn adapt(l: &mut Linker<KernelHost>, label: &str, state: u64) -> wasmtime::Result<()> {
        let mut inst = l.instance(&interface_at("tl", label))?;
        tl::add_to_linker_instance::<KernelHost, HasSelf<KernelHost>>(&mut inst, |s| s)?;
        if state < dtype4::DTYPE_HAS_TEN {
            dtype4::kernel(&mut inst)?;
        }
        if state < BINOP_GAINS_DIV {
            type Args = (
                BinopBeforeDiv,
                Resource<KernelTensor>,
                Resource<KernelTensor>,
            );
            inst.func_wrap_async(
                "binary",
                |mut store: StoreContextMut<'_, KernelHost>, (op, a, b): Args| {
                    Box::new(async move {
                        let t = tl::Host::binary(store.data_mut(), op.today(), a, b).await?;
                        Ok((t,))
                    })
                },
            )?;
        }
        Ok(())
    }
    Shapes::new(base, adapt, &KERNEL_0_1_0)
}

/// A recorded kernel's shapes: the same as [`kernel`]'s, plain calls.
pub fn eager(
    base: impl Fn() -> wasmtime::Result<Linker<EagerHost>>,
) -> wasmtime::Result<Shapes<EagerHost>> {
    fn adapt(l: &mut Linker<EagerHost>, label: &str, state: u64) -> wasmtime::Result<()> {
        let mut inst = l.instance(&interface_at("tl", label))?;
        eager_tl::add_to_linker_instance::<EagerHost, HasSelf<EagerHost>>(&mut inst, |s| s)?;
        if state < dtype4::DTYPE_HAS_TEN {
            dtype4::eager(&mut inst)?;
        }
        if state < BINOP_GAINS_DIV {
            type Args = (BinopBeforeDiv, Resource<EagerTensor>, Resource<EagerTensor>);
            inst.func_wrap(
                "binary",
                |mut store: StoreContextMut<'_, EagerHost>, (op, a, b): Args| {
                    let t = eager_tl::Host::binary(store.data_mut(), op.today_eager(), a, b)?;
                    Ok((t,))
                },
            )?;
        }
        Ok(())
    }
    Shapes::new(base, adapt, &KERNEL_0_1_0)
}

/// A bench's shapes (see the module doc): under the label `0.1.0`, the
/// states 0.3.0 and later are today's; 0.2.0 lacks `options`, 0.1.0 `dp`
/// too.
pub fn bench(
    base: impl Fn() -> wasmtime::Result<Linker<BenchHost>>,
) -> wasmtime::Result<Shapes<BenchHost>> {
    fn adapt(l: &mut Linker<BenchHost>, label: &str, state: u64) -> wasmtime::Result<()> {
        use super::bench::capabilities::{Devices, Dist, Reports, Spawn, Tensors};
        let mut inst = l.instance(&interface_at("torch", label))?;
        torch::add_to_linker_instance::<BenchHost, Tensors>(&mut inst, BenchHost::tensors)?;
        if state < dtype4::DTYPE_HAS_TEN {
            dtype4::torch(&mut inst, state >= ZEROS_TAKES_DP)?;
        }
        let mut inst = l.instance(&interface_at("distributed", label))?;
        distributed::add_to_linker_instance::<BenchHost, Dist>(&mut inst, BenchHost::dist)?;
        if state < INIT_TAKES_OPTIONS {
            type Args = (String, Option<u32>, Option<u32>);
            inst.func_wrap_async(
                "init-process-group",
                |mut store: StoreContextMut<'_, BenchHost>, (backend, world_size, rank): Args| {
                    Box::new(async move {
                        let mut host = store.data_mut().dist();
                        let r = distributed::Host::init_process_group(
                            &mut host, backend, world_size, rank, None,
                        )
                        .await;
                        let r = match r {
                            Ok(()) => Ok(()),
                            Err(e) => Err(distributed::Host::convert_dist_error(&mut host, e)?),
                        };
                        Ok((r,))
                    })
                },
            )?;
        }
        let mut inst = l.instance(&interface_at("multiprocessing", label))?;
        multiprocessing::add_to_linker_instance::<BenchHost, Spawn>(&mut inst, BenchHost::spawner)?;
        let mut inst = l.instance(&interface_at("ahbm", label))?;
        ahbm::add_to_linker_instance::<BenchHost, Devices>(&mut inst, BenchHost::devices)?;
        let mut inst = l.instance(&interface_at("accelerator", label))?;
        accelerator::add_to_linker_instance::<BenchHost, Devices>(&mut inst, BenchHost::devices)?;
        let mut inst = l.instance(&interface_at("report", label))?;
        report::add_to_linker_instance::<BenchHost, Reports>(&mut inst, BenchHost::reports)?;
        if state < dtype4::DTYPE_HAS_TEN {
            dtype4::report(&mut inst)?;
        }
        Ok(())
    }
    Shapes::new(
        base,
        adapt,
        &[
            (
                2,
                "kernbench:sim@0.2.0 (labelled 0.1.0 then; `init-process-group` without options)",
            ),
            (
                1,
                "kernbench:sim@0.1.0 as first released (`zeros` without `dp`, \
                 `init-process-group` without options)",
            ),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_5_case_binop_maps_each_case_to_today_s_of_the_same_name() {
        use BinopBeforeDiv::*;
        for (old, new) in [
            (Add, tl::Binop::Add),
            (Sub, tl::Binop::Sub),
            (Mul, tl::Binop::Mul),
            (Max, tl::Binop::Max),
            (Min, tl::Binop::Min),
        ] {
            assert_eq!(old.today(), new);
            assert_eq!(format!("{:?}", old.today_eager()), format!("{new:?}"));
        }
    }
}
