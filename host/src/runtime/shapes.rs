//! The shapes of the guest interface this host serves: today's, and the
//! earlier snapshots of `kernbench:sim@0.1.0` that components in the wild
//! were built against.
//!
//! While the interface was young it changed incompatibly under the one
//! label `0.1.0` (wit/history/snapshots/README.md). A component of such a
//! snapshot imports a few functions whose types differ from today's:
//! `tl.binary` with the 5-case `binop` (before `div`), `torch.zeros`
//! without `dp`, `distributed.init-process-group` without `options`.
//! wasmtime type-checks every imported function exactly, and one exact
//! instance name holds one type per function, so each shape is a linker
//! of its own: today's interface (which every `@0.1.x` import resolves to
//! by semver), plus, under the exact name `…@0.1.0`, every function of the
//! interfaces that differ, the differing ones replaced by adapters over
//! the one implementation. [`Shapes::instantiate_pre`] tries today's
//! shape first, then each older one; a component none of them links is
//! refused with today's linker's words. The exports whose types changed
//! (`entry-defaults`, `collectives`, `kernel-args-for`) are called by
//! value ([`crate::runtime::hooks`]), so any snapshot's export serves.

use super::bench::{BenchHost, BenchTensor};
use super::bindings::algorithm::kernbench::sim::{tl, types::Dtype};
use super::bindings::algorithm_eager::kernbench::sim::tl as eager_tl;
use super::bindings::bench::kernbench::sim::{distributed, torch};
use super::eager::{EagerHost, EagerTensor};
use super::kernel::{KernelHost, KernelTensor};
use wasmtime::component::{Component, ComponentType, HasSelf, InstancePre, Lift, Linker, Resource};
use wasmtime::StoreContextMut;

/// The name under which the earlier snapshots import an interface.
fn snapshot_instance(interface: &str) -> String {
    format!("kernbench:sim/{interface}@0.1.0")
}

/// What turns today's linker into an earlier snapshot's.
type Adapt<T> = fn(&mut Linker<T>) -> wasmtime::Result<()>;

/// One shape: a linker and the snapshot it serves (none: today's).
struct Shape<T: 'static> {
    serves: Option<&'static str>,
    linker: Linker<T>,
}

/// The linkers of every shape one world is served in, today's first.
pub struct Shapes<T: 'static> {
    shapes: Vec<Shape<T>>,
}

impl<T: 'static> Shapes<T> {
    /// Today's shape only (built by `base`), then each `(serves, adapt)`
    /// as a linker of its own: `base` again, then `adapt` over it.
    fn new(
        base: impl Fn() -> wasmtime::Result<Linker<T>>,
        older: &[(&'static str, Adapt<T>)],
    ) -> wasmtime::Result<Self> {
        let mut shapes = vec![Shape {
            serves: None,
            linker: base()?,
        }];
        for &(serves, adapt) in older {
            let mut linker = base()?;
            linker.allow_shadowing(true);
            adapt(&mut linker)?;
            linker.allow_shadowing(false);
            shapes.push(Shape {
                serves: Some(serves),
                linker,
            });
        }
        Ok(Shapes { shapes })
    }

    /// Pre-instantiate `component` in the first shape that links it, and
    /// say which earlier snapshot it serves (none: today's interface);
    /// today's linker's refusal when none does.
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

    /// The earlier snapshots served, oldest last.
    pub fn snapshots(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.shapes.iter().filter_map(|s| s.serves)
    }
}

/// `tl.binop` before `div` (snapshots b1ef600 to 616f16e).
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

const BINOP_BEFORE_DIV: &str =
    "kernbench:sim@0.1.0 before `binop` gained `div` (as of 2026-11-21 to 2026-11-24)";

/// A kernel's shapes: today's, and `tl` before `div`.
pub fn kernel(
    base: impl Fn() -> wasmtime::Result<Linker<KernelHost>>,
) -> wasmtime::Result<Shapes<KernelHost>> {
    fn binop_before_div(l: &mut Linker<KernelHost>) -> wasmtime::Result<()> {
        let mut inst = l.instance(&snapshot_instance("tl"))?;
        tl::add_to_linker_instance::<KernelHost, HasSelf<KernelHost>>(&mut inst, |s| s)?;
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
        )
    }
    Shapes::new(base, &[(BINOP_BEFORE_DIV, binop_before_div)])
}

/// A recorded kernel's shapes: the same as [`kernel`]'s, plain calls.
pub fn eager(
    base: impl Fn() -> wasmtime::Result<Linker<EagerHost>>,
) -> wasmtime::Result<Shapes<EagerHost>> {
    fn binop_before_div(l: &mut Linker<EagerHost>) -> wasmtime::Result<()> {
        let mut inst = l.instance(&snapshot_instance("tl"))?;
        eager_tl::add_to_linker_instance::<EagerHost, HasSelf<EagerHost>>(&mut inst, |s| s)?;
        type Args = (BinopBeforeDiv, Resource<EagerTensor>, Resource<EagerTensor>);
        inst.func_wrap(
            "binary",
            |mut store: StoreContextMut<'_, EagerHost>, (op, a, b): Args| {
                let t = eager_tl::Host::binary(store.data_mut(), op.today_eager(), a, b)?;
                Ok((t,))
            },
        )
    }
    Shapes::new(base, &[(BINOP_BEFORE_DIV, binop_before_div)])
}

/// `distributed` before `init-process-group` took `options` (snapshots
/// b1ef600 and 6d454a2).
fn init_process_group_before_options(l: &mut Linker<BenchHost>) -> wasmtime::Result<()> {
    let mut inst = l.instance(&snapshot_instance("distributed"))?;
    distributed::add_to_linker_instance::<BenchHost, HasSelf<BenchHost>>(&mut inst, |s| s)?;
    type Args = (String, Option<u32>, Option<u32>);
    inst.func_wrap_async(
        "init-process-group",
        |mut store: StoreContextMut<'_, BenchHost>, (backend, world_size, rank): Args| {
            Box::new(async move {
                let r = distributed::Host::init_process_group(
                    store.data_mut(),
                    backend,
                    world_size,
                    rank,
                    None,
                )
                .await?;
                Ok((r,))
            })
        },
    )
}

/// A bench's shapes: today's; `distributed` before `options`; and the
/// first snapshot, `torch.zeros` before `dp` too.
pub fn bench(
    base: impl Fn() -> wasmtime::Result<Linker<BenchHost>>,
) -> wasmtime::Result<Shapes<BenchHost>> {
    fn zeros_before_dp(l: &mut Linker<BenchHost>) -> wasmtime::Result<()> {
        init_process_group_before_options(l)?;
        let mut inst = l.instance(&snapshot_instance("torch"))?;
        torch::add_to_linker_instance::<BenchHost, HasSelf<BenchHost>>(&mut inst, |s| s)?;
        type Args = (Vec<u32>, Dtype, String);
        inst.func_wrap_async(
            "zeros",
            |mut store: StoreContextMut<'_, BenchHost>, (shape, dtype, name): Args| {
                Box::new(async move {
                    let t: Result<Resource<BenchTensor>, String> =
                        torch::Host::zeros(store.data_mut(), shape, dtype, None, name).await?;
                    Ok((t,))
                })
            },
        )
    }
    Shapes::new(
        base,
        &[
            (
                "kernbench:sim@0.1.0 before `init-process-group` took `options` (as of 2026-11-24)",
                init_process_group_before_options,
            ),
            (
                "kernbench:sim@0.1.0 as first released (as of 2026-11-21 to 2026-11-23)",
                zeros_before_dp,
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
