//! The interfaces of every release before 0.7.0, whose `dtype` has four
//! cases (`f16`, `bf16`, `f32`, `i32`): today's has ten, and a component
//! imports a function only with the exact type it was built with. Each
//! function whose type names a dtype (a parameter, a result, a field of a
//! record or of a batch call) is served again with the four-case type,
//! over today's implementation. The four keep their indices, so an old
//! guest's `submit-encoded` bytes mean what they meant.

use super::super::bench::{BenchHost, BenchTensor};
use super::super::bindings::algorithm::kernbench::sim::{tl, types::Dtype};
use super::super::bindings::algorithm_eager::kernbench::sim::tl as eager_tl;
use super::super::bindings::bench::kernbench::sim::{report, torch};
use super::super::eager::{EagerHost, EagerTensor};
use super::super::kernel::{KernelHost, KernelTensor};
use wasmtime::component::{ComponentType, Lift, LinkerInstance, Lower, Resource};
use wasmtime::StoreContextMut;

/// The state (0.MINOR.0) whose `dtype` has ten cases.
pub(super) const DTYPE_HAS_TEN: u64 = 7;

/// `dtype` before 0.7.0.
#[derive(ComponentType, Lift, Lower, Clone, Copy, Debug, PartialEq, Eq)]
#[component(enum)]
#[repr(u8)]
pub(super) enum Dtype4 {
    #[component(name = "f16")]
    F16,
    #[component(name = "bf16")]
    Bf16,
    #[component(name = "f32")]
    F32,
    #[component(name = "i32")]
    I32,
}

impl Dtype4 {
    pub(super) fn today(self) -> Dtype {
        match self {
            Self::F16 => Dtype::F16,
            Self::Bf16 => Dtype::Bf16,
            Self::F32 => Dtype::F32,
            Self::I32 => Dtype::I32,
        }
    }

    /// Today's dtype as the four-case type: a trap for one the guest's
    /// release did not have (it cannot make such a tensor: a guest's
    /// tensors have the dtypes it named).
    fn of(d: Dtype) -> wasmtime::Result<Self> {
        Ok(match d {
            Dtype::F16 => Self::F16,
            Dtype::Bf16 => Self::Bf16,
            Dtype::F32 => Self::F32,
            Dtype::I32 => Self::I32,
            other => wasmtime::bail!(
                "a tensor of dtype {other:?}, which this component's kernbench:sim (before \
                 0.7.0) cannot name: rebuild it against this release's guest SDK"
            ),
        })
    }
}

/// The batch calls of 0.6.2 to 0.6.5 with the four-case dtype, for one
/// binding's `tl` (the kernel's and the recorded kernel's are distinct
/// Rust types of one WIT type).
macro_rules! batch_before_0_7 {
    ($tl:ident) => {
        #[derive(ComponentType, Lift, Clone, Copy, Debug)]
        #[component(record)]
        pub(super) struct BatchRecv4 {
            dir: Option<u32>,
            shape: u32,
            dtype: Dtype4,
            into: Option<u64>,
            out: u32,
        }

        #[derive(ComponentType, Lift, Clone, Copy, Debug)]
        #[component(record)]
        pub(super) struct BatchComposite4 {
            op: $tl::CompositeOp,
            a: u32,
            b: u32,
            c: Option<u32>,
            #[component(name = "out-dtype")]
            out_dtype: Dtype4,
            out: u32,
        }

        #[derive(ComponentType, Lift, Clone, Copy, Debug)]
        #[component(variant)]
        pub(super) enum BatchCall4 {
            #[component(name = "load")]
            Load((u64, u32, Dtype4, u32)),
            #[component(name = "store")]
            Store((u64, u32)),
            #[component(name = "send")]
            Send((u32, u32)),
            #[component(name = "send-addr")]
            SendAddr((u32, u64, u32, Dtype4)),
            #[component(name = "recv")]
            Recv(BatchRecv4),
            #[component(name = "binary")]
            Binary(($tl::Binop, u32, u32, u32)),
            #[component(name = "scale")]
            Scale((u32, f64, u32)),
            #[component(name = "unary")]
            Unary(($tl::UnaryOp, u32, u32)),
            #[component(name = "cast")]
            Cast((u32, Dtype4, u32)),
            #[component(name = "reduce")]
            Reduce(($tl::ReduceOp, u32, u32, u32)),
            #[component(name = "composite")]
            Composite(BatchComposite4),
            #[component(name = "recv-async")]
            RecvAsync((Option<u32>, u32, Dtype4, u32)),
            #[component(name = "wait")]
            Wait((u32, u32)),
            #[component(name = "drop-tensor")]
            DropTensor(u32),
            #[component(name = "drop-future")]
            DropFuture(u32),
        }

        impl BatchCall4 {
            pub(super) fn today(self) -> $tl::BatchCall {
                use $tl::BatchCall as C;
                match self {
                    Self::Load((a, s, d, o)) => C::Load((a, s, d.today(), o)),
                    Self::Store(x) => C::Store(x),
                    Self::Send(x) => C::Send(x),
                    Self::SendAddr((dir, a, s, d)) => C::SendAddr((dir, a, s, d.today())),
                    Self::Recv(r) => C::Recv($tl::BatchRecv {
                        dir: r.dir,
                        shape: r.shape,
                        dtype: r.dtype.today(),
                        into: r.into,
                        out: r.out,
                    }),
                    Self::Binary(x) => C::Binary(x),
                    Self::Scale(x) => C::Scale(x),
                    Self::Unary(x) => C::Unary(x),
                    Self::Cast((a, d, o)) => C::Cast((a, d.today(), o)),
                    Self::Reduce(x) => C::Reduce(x),
                    Self::Composite(c) => C::Composite($tl::BatchComposite {
                        op: c.op,
                        a: c.a,
                        b: c.b,
                        c: c.c,
                        out_dtype: c.out_dtype.today(),
                        out: c.out,
                    }),
                    Self::RecvAsync((dir, s, d, o)) => C::RecvAsync((dir, s, d.today(), o)),
                    Self::Wait(x) => C::Wait(x),
                    Self::DropTensor(x) => C::DropTensor(x),
                    Self::DropFuture(x) => C::DropFuture(x),
                }
            }
        }
    };
}

mod kernel_batch {
    use super::{tl, ComponentType, Dtype4, Lift};
    batch_before_0_7!(tl);
}

mod eager_batch {
    use super::{eager_tl, ComponentType, Dtype4, Lift};
    batch_before_0_7!(eager_tl);
}

/// Serve `tl`'s functions that name a dtype with the four-case type, in
/// a kernel run in step with simulated time.
pub(super) fn kernel(inst: &mut LinkerInstance<'_, KernelHost>) -> wasmtime::Result<()> {
    type S<'a> = StoreContextMut<'a, KernelHost>;
    type T = Resource<KernelTensor>;
    inst.func_wrap_async(
        "load",
        |mut s: S<'_>, (addr, shape, d): (u64, Vec<u32>, Dtype4)| {
            Box::new(
                async move { Ok((tl::Host::load(s.data_mut(), addr, shape, d.today()).await?,)) },
            )
        },
    )?;
    inst.func_wrap_async(
        "send-addr",
        |mut s: S<'_>, (dir, src, shape, d): (String, u64, Vec<u32>, Dtype4)| {
            Box::new(
                async move { tl::Host::send_addr(s.data_mut(), dir, src, shape, d.today()).await },
            )
        },
    )?;
    inst.func_wrap_async(
        "recv",
        |mut s: S<'_>, (dir, shape, d): (Option<String>, Vec<u32>, Dtype4)| {
            Box::new(
                async move { Ok((tl::Host::recv(s.data_mut(), dir, shape, d.today()).await?,)) },
            )
        },
    )?;
    inst.func_wrap_async(
        "recv-into",
        |mut s: S<'_>, (dir, shape, d, dst): (Option<String>, Vec<u32>, Dtype4, u64)| {
            Box::new(async move {
                Ok((tl::Host::recv_into(s.data_mut(), dir, shape, d.today(), dst).await?,))
            })
        },
    )?;
    inst.func_wrap(
        "recv-async",
        |mut s: S<'_>, (dir, shape, d): (Option<String>, Vec<u32>, Dtype4)| {
            Ok((tl::Host::recv_async(s.data_mut(), dir, shape, d.today())?,))
        },
    )?;
    inst.func_wrap("[method]tensor.dtype", |mut s: S<'_>, (t,): (T,)| {
        Ok((Dtype4::of(tl::HostTensor::dtype(s.data_mut(), t)?)?,))
    })?;
    inst.func_wrap(
        "[method]recv-future.dtype",
        |mut s: S<'_>, (f,): (Resource<super::super::kernel::KernelFuture>,)| {
            Ok((Dtype4::of(tl::HostRecvFuture::dtype(s.data_mut(), f)?)?,))
        },
    )?;
    inst.func_wrap_async("cast", |mut s: S<'_>, (a, d): (T, Dtype4)| {
        Box::new(async move { Ok((tl::Host::cast(s.data_mut(), a, d.today()).await?,)) })
    })?;
    inst.func_wrap_async("gemm", |mut s: S<'_>, (a, b, d): (T, T, Dtype4)| {
        Box::new(async move { Ok((tl::Host::gemm(s.data_mut(), a, b, d.today()).await?,)) })
    })?;
    inst.func_wrap_async(
        "composite",
        |mut s: S<'_>, (op, a, b, c, d): (tl::CompositeOp, T, T, Option<T>, Dtype4)| {
            Box::new(async move {
                Ok((tl::Host::composite(s.data_mut(), op, a, b, c, d.today()).await?,))
            })
        },
    )?;
    inst.func_wrap_async(
        "submit",
        |mut s: S<'_>, (dirs, shapes, calls): (Vec<String>, Vec<Vec<u32>>, Vec<kernel_batch::BatchCall4>)| {
            Box::new(async move {
                let calls = calls.into_iter().map(|c| c.today()).collect();
                Ok((tl::Host::submit(s.data_mut(), dirs, shapes, calls).await?,))
            })
        },
    )?;
    Ok(())
}

/// [`kernel`]'s functions for a kernel recorded ahead of time.
pub(super) fn eager(inst: &mut LinkerInstance<'_, EagerHost>) -> wasmtime::Result<()> {
    type S<'a> = StoreContextMut<'a, EagerHost>;
    type T = Resource<EagerTensor>;
    use eager_tl::Host as H;
    inst.func_wrap(
        "load",
        |mut s: S<'_>, (addr, shape, d): (u64, Vec<u32>, Dtype4)| {
            Ok((H::load(s.data_mut(), addr, shape, d.today())?,))
        },
    )?;
    inst.func_wrap(
        "send-addr",
        |mut s: S<'_>, (dir, src, shape, d): (String, u64, Vec<u32>, Dtype4)| {
            H::send_addr(s.data_mut(), dir, src, shape, d.today())
        },
    )?;
    inst.func_wrap(
        "recv",
        |mut s: S<'_>, (dir, shape, d): (Option<String>, Vec<u32>, Dtype4)| {
            Ok((H::recv(s.data_mut(), dir, shape, d.today())?,))
        },
    )?;
    inst.func_wrap(
        "recv-into",
        |mut s: S<'_>, (dir, shape, d, dst): (Option<String>, Vec<u32>, Dtype4, u64)| {
            Ok((H::recv_into(s.data_mut(), dir, shape, d.today(), dst)?,))
        },
    )?;
    inst.func_wrap(
        "recv-async",
        |mut s: S<'_>, (dir, shape, d): (Option<String>, Vec<u32>, Dtype4)| {
            Ok((H::recv_async(s.data_mut(), dir, shape, d.today())?,))
        },
    )?;
    inst.func_wrap("[method]tensor.dtype", |mut s: S<'_>, (t,): (T,)| {
        Ok((Dtype4::of(eager_tl::HostTensor::dtype(s.data_mut(), t)?)?,))
    })?;
    inst.func_wrap(
        "[method]recv-future.dtype",
        |mut s: S<'_>, (f,): (Resource<super::super::eager::EagerFuture>,)| {
            Ok((Dtype4::of(eager_tl::HostRecvFuture::dtype(
                s.data_mut(),
                f,
            )?)?,))
        },
    )?;
    inst.func_wrap("cast", |mut s: S<'_>, (a, d): (T, Dtype4)| {
        Ok((H::cast(s.data_mut(), a, d.today())?,))
    })?;
    inst.func_wrap("gemm", |mut s: S<'_>, (a, b, d): (T, T, Dtype4)| {
        Ok((H::gemm(s.data_mut(), a, b, d.today())?,))
    })?;
    inst.func_wrap(
        "composite",
        |mut s: S<'_>, (op, a, b, c, d): (eager_tl::CompositeOp, T, T, Option<T>, Dtype4)| {
            Ok((H::composite(s.data_mut(), op, a, b, c, d.today())?,))
        },
    )?;
    inst.func_wrap(
        "submit",
        |mut s: S<'_>, (dirs, shapes, calls): (Vec<String>, Vec<Vec<u32>>, Vec<eager_batch::BatchCall4>)| {
            let calls = calls.into_iter().map(|c| c.today()).collect();
            Ok((H::submit(s.data_mut(), dirs, shapes, calls)?,))
        },
    )?;
    Ok(())
}

/// `report.result-row` before 0.7.0.
#[derive(ComponentType, Lift, Clone, Debug)]
#[component(record)]
struct ResultRow4 {
    #[component(name = "size-bytes")]
    size_bytes: u64,
    count: u64,
    dtype: Dtype4,
    redop: String,
    #[component(name = "time-ps")]
    time_ps: u64,
    wrong: u64,
}

/// `report.kernel-row` before 0.7.0.
#[derive(ComponentType, Lift, Clone, Debug)]
#[component(record)]
struct KernelRow4 {
    name: String,
    shape: String,
    dtype: Dtype4,
    pes: u32,
    flops: u64,
    #[component(name = "time-ps")]
    time_ps: u64,
    checked: u64,
    wrong: u64,
    #[component(name = "max-rel-err")]
    max_rel_err: f64,
    tolerance: f64,
}

/// `report.perf-row` of 0.6.4 and 0.6.5.
#[derive(ComponentType, Lift, Clone, Debug)]
#[component(record)]
struct PerfRow4 {
    #[component(name = "size-bytes")]
    size_bytes: u64,
    count: u64,
    dtype: Dtype4,
    redop: String,
    root: Option<u32>,
    #[component(name = "out-of-place")]
    out_of_place: Option<report::PerfBlock>,
    #[component(name = "in-place")]
    in_place: Option<report::PerfBlock>,
    aggregation: report::TimeAggregation,
}

/// Serve `torch.zeros` (with `dp` when `takes_dp`) and `tensor.dtype`
/// with the four-case type.
pub(super) fn torch(
    inst: &mut LinkerInstance<'_, BenchHost>,
    takes_dp: bool,
) -> wasmtime::Result<()> {
    type S<'a> = StoreContextMut<'a, BenchHost>;
    if takes_dp {
        type Args = (Vec<u32>, Dtype4, Option<torch::DpPolicy>, String);
        inst.func_wrap_async("zeros", |mut s: S<'_>, (shape, d, dp, name): Args| {
            Box::new(async move {
                Ok((
                    torch::Host::zeros(&mut s.data_mut().tensors(), shape, d.today(), dp, name)
                        .await?,
                ))
            })
        })?;
    } else {
        type Args = (Vec<u32>, Dtype4, String);
        inst.func_wrap_async("zeros", |mut s: S<'_>, (shape, d, name): Args| {
            Box::new(async move {
                Ok((
                    torch::Host::zeros(&mut s.data_mut().tensors(), shape, d.today(), None, name)
                        .await?,
                ))
            })
        })?;
    }
    inst.func_wrap_async(
        "[method]tensor.dtype",
        |mut s: S<'_>, (t,): (Resource<BenchTensor>,)| {
            Box::new(async move {
                Ok((Dtype4::of(
                    torch::HostTensor::dtype(&mut s.data_mut().tensors(), t).await?,
                )?,))
            })
        },
    )?;
    Ok(())
}

/// Serve `report`'s rows with the four-case type.
pub(super) fn report(inst: &mut LinkerInstance<'_, BenchHost>) -> wasmtime::Result<()> {
    type S<'a> = StoreContextMut<'a, BenchHost>;
    inst.func_wrap_async(
        "record-result",
        |mut s: S<'_>, (collective, r): (String, ResultRow4)| {
            Box::new(async move {
                let row = report::ResultRow {
                    size_bytes: r.size_bytes,
                    count: r.count,
                    dtype: r.dtype.today(),
                    redop: r.redop,
                    time_ps: r.time_ps,
                    wrong: r.wrong,
                };
                report::Host::record_result(&mut s.data_mut().reports(), collective, row).await
            })
        },
    )?;
    inst.func_wrap_async("record-kernel", |mut s: S<'_>, (r,): (KernelRow4,)| {
        Box::new(async move {
            let row = report::KernelRow {
                name: r.name,
                shape: r.shape,
                dtype: r.dtype.today(),
                pes: r.pes,
                flops: r.flops,
                time_ps: r.time_ps,
                checked: r.checked,
                wrong: r.wrong,
                max_rel_err: r.max_rel_err,
                tolerance: r.tolerance,
            };
            report::Host::record_kernel(&mut s.data_mut().reports(), row).await
        })
    })?;
    inst.func_wrap_async(
        "record-perf",
        |mut s: S<'_>, (collective, r): (String, PerfRow4)| {
            Box::new(async move {
                let row = report::PerfRow {
                    size_bytes: r.size_bytes,
                    count: r.count,
                    dtype: r.dtype.today(),
                    redop: r.redop,
                    root: r.root,
                    out_of_place: r.out_of_place,
                    in_place: r.in_place,
                    aggregation: r.aggregation,
                };
                report::Host::record_perf(&mut s.data_mut().reports(), collective, row).await
            })
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_dtypes_keep_their_names_and_indices() {
        for (i, old) in [Dtype4::F16, Dtype4::Bf16, Dtype4::F32, Dtype4::I32]
            .into_iter()
            .enumerate()
        {
            let today = old.today();
            assert_eq!(today as usize, i);
            assert_eq!(Dtype4::of(today).unwrap(), old);
            let hw = crate::runtime::kernel::dtype_in(today);
            assert_eq!(crate::hw::dtype::Dtype::ALL[i], hw);
        }
        assert!(Dtype4::of(Dtype::I8).is_err());
    }
}
