//! [`Tl`] over the `kernbench:sim/tl` imports, and the export macro.

use crate::__algorithm::kernbench::sim::{ccl, tl, types};
use crate::{
    BinOp, Call, Collective, CompositeOp, Dtype, EntryDefaults, Link, ParamValue, Params, RedOp,
    ReduceOp, Tensor, Tl, UnaryOp,
};

impl From<Dtype> for types::Dtype {
    fn from(d: Dtype) -> Self {
        match d {
            Dtype::F16 => types::Dtype::F16,
            Dtype::Bf16 => types::Dtype::Bf16,
            Dtype::F32 => types::Dtype::F32,
            Dtype::I32 => types::Dtype::I32,
            Dtype::I8 => types::Dtype::I8,
            Dtype::U8 => types::Dtype::U8,
            Dtype::U32 => types::Dtype::U32,
            Dtype::I64 => types::Dtype::I64,
            Dtype::U64 => types::Dtype::U64,
            Dtype::F64 => types::Dtype::F64,
        }
    }
}

impl From<types::Dtype> for Dtype {
    fn from(d: types::Dtype) -> Self {
        match d {
            types::Dtype::F16 => Dtype::F16,
            types::Dtype::Bf16 => Dtype::Bf16,
            types::Dtype::F32 => Dtype::F32,
            types::Dtype::I32 => Dtype::I32,
            types::Dtype::I8 => Dtype::I8,
            types::Dtype::U8 => Dtype::U8,
            types::Dtype::U32 => Dtype::U32,
            types::Dtype::I64 => Dtype::I64,
            types::Dtype::U64 => Dtype::U64,
            types::Dtype::F64 => Dtype::F64,
        }
    }
}

impl From<BinOp> for tl::Binop {
    fn from(op: BinOp) -> Self {
        match op {
            BinOp::Add => tl::Binop::Add,
            BinOp::Sub => tl::Binop::Sub,
            BinOp::Mul => tl::Binop::Mul,
            BinOp::Max => tl::Binop::Max,
            BinOp::Min => tl::Binop::Min,
            BinOp::Div => tl::Binop::Div,
        }
    }
}

impl From<UnaryOp> for tl::UnaryOp {
    fn from(op: UnaryOp) -> Self {
        match op {
            UnaryOp::Neg => tl::UnaryOp::Neg,
            UnaryOp::Abs => tl::UnaryOp::Abs,
            UnaryOp::Exp => tl::UnaryOp::Exp,
            UnaryOp::Log => tl::UnaryOp::Log,
            UnaryOp::Sqrt => tl::UnaryOp::Sqrt,
            UnaryOp::Relu => tl::UnaryOp::Relu,
            UnaryOp::Recip => tl::UnaryOp::Recip,
        }
    }
}

impl From<CompositeOp> for tl::CompositeOp {
    fn from(op: CompositeOp) -> Self {
        match op {
            CompositeOp::Gemm => tl::CompositeOp::Gemm,
            CompositeOp::GemmAcc => tl::CompositeOp::GemmAcc,
            CompositeOp::GemmBias => tl::CompositeOp::GemmBias,
            CompositeOp::GemmRelu => tl::CompositeOp::GemmRelu,
            CompositeOp::GemmBiasRelu => tl::CompositeOp::GemmBiasRelu,
        }
    }
}

impl From<ReduceOp> for tl::ReduceOp {
    fn from(op: ReduceOp) -> Self {
        match op {
            ReduceOp::Sum => tl::ReduceOp::Sum,
            ReduceOp::Max => tl::ReduceOp::Max,
            ReduceOp::Min => tl::ReduceOp::Min,
        }
    }
}

impl Tensor for tl::Tensor {
    fn shape(&self) -> Vec<u32> {
        tl::Tensor::shape(self)
    }
    fn dtype(&self) -> Dtype {
        tl::Tensor::dtype(self).into()
    }
    fn addr(&self) -> u64 {
        tl::Tensor::addr(self)
    }
    fn nbytes(&self) -> u64 {
        tl::Tensor::nbytes(self)
    }
}

/// The kernel language as provided by the simulator host, one host call
/// per `tl` call: a refused call traps at the call, with the guest's
/// backtrace. [`crate::BatchTl`] (what [`crate::export_algorithm!`] uses)
/// makes the same calls in batches.
#[derive(Debug, Default, Clone, Copy)]
pub struct WasmTl;

impl Tl for WasmTl {
    type Tensor = tl::Tensor;
    type Future = tl::RecvFuture;

    fn recv_async(&self, dir: Option<&str>, shape: &[u32], dtype: Dtype) -> tl::RecvFuture {
        tl::recv_async(dir, shape, dtype.into())
    }
    fn wait(&self, f: tl::RecvFuture) -> tl::Tensor {
        tl::wait(f)
    }

    fn program_id(&self, axis: u32) -> i64 {
        tl::program_id(axis)
    }
    fn num_programs(&self, axis: u32) -> i64 {
        tl::num_programs(axis)
    }
    fn load(&self, addr: u64, shape: &[u32], dtype: Dtype) -> tl::Tensor {
        tl::load(addr, shape, dtype.into())
    }
    fn store(&self, addr: u64, value: &tl::Tensor) {
        tl::store(addr, value)
    }
    fn send(&self, dir: &str, value: &tl::Tensor) {
        tl::send(dir, value)
    }
    fn send_addr(&self, dir: &str, src_addr: u64, shape: &[u32], dtype: Dtype) {
        tl::send_addr(dir, src_addr, shape, dtype.into())
    }
    fn recv(&self, dir: Option<&str>, shape: &[u32], dtype: Dtype) -> tl::Tensor {
        tl::recv(dir, shape, dtype.into())
    }
    fn recv_into(
        &self,
        dir: Option<&str>,
        shape: &[u32],
        dtype: Dtype,
        dst_addr: u64,
    ) -> tl::Tensor {
        tl::recv_into(dir, shape, dtype.into(), dst_addr)
    }
    fn binary(&self, op: BinOp, a: &tl::Tensor, b: &tl::Tensor) -> tl::Tensor {
        tl::binary(op.into(), a, b)
    }
    fn add(&self, a: &tl::Tensor, b: &tl::Tensor) -> tl::Tensor {
        tl::add(a, b)
    }
    fn scale(&self, a: &tl::Tensor, factor: f64) -> tl::Tensor {
        tl::scale(a, factor)
    }
    fn unary(&self, op: UnaryOp, a: &tl::Tensor) -> tl::Tensor {
        tl::unary(op.into(), a)
    }
    fn gemm(&self, a: &tl::Tensor, b: &tl::Tensor, out_dtype: Dtype) -> tl::Tensor {
        tl::gemm(a, b, out_dtype.into())
    }
    fn composite(
        &self,
        op: CompositeOp,
        a: &tl::Tensor,
        b: &tl::Tensor,
        c: Option<&tl::Tensor>,
        out_dtype: Dtype,
    ) -> tl::Tensor {
        tl::composite(op.into(), a, b, c, out_dtype.into())
    }
    fn cast(&self, a: &tl::Tensor, dtype: Dtype) -> tl::Tensor {
        tl::cast(a, dtype.into())
    }
    fn fill(&self, shape: &[u32], dtype: Dtype, value: f64) -> tl::Tensor {
        tl::fill(shape, dtype.into(), value)
    }
    fn reduce(&self, op: ReduceOp, a: &tl::Tensor, axis: u32) -> tl::Tensor {
        tl::reduce(op.into(), a, axis)
    }
    fn now_ps(&self) -> u64 {
        tl::now_ps()
    }
    fn log(&self, msg: &str) {
        tl::log(msg)
    }
}

/// The WIT parameters as [`Params`].
#[doc(hidden)]
pub fn params_in(params: Vec<ccl::Param>) -> Params {
    Params::new(
        params
            .into_iter()
            .map(|p| {
                let v = match p.value {
                    ccl::ParamValue::Int(v) => ParamValue::Int(v),
                    ccl::ParamValue::Float(v) => ParamValue::Float(v),
                    ccl::ParamValue::Text(v) => ParamValue::Text(v),
                    ccl::ParamValue::Flag(v) => ParamValue::Flag(v),
                };
                (p.name, v)
            })
            .collect(),
    )
}

fn collective_of(c: ccl::Collective) -> Collective {
    match c {
        ccl::Collective::AllReduce => Collective::AllReduce,
        ccl::Collective::Broadcast => Collective::Broadcast,
        ccl::Collective::Reduce => Collective::Reduce,
        ccl::Collective::AllGather => Collective::AllGather,
        ccl::Collective::ReduceScatter => Collective::ReduceScatter,
        ccl::Collective::AllToAll => Collective::AllToAll,
    }
}

#[doc(hidden)]
pub fn collectives_out(list: Vec<Collective>) -> Vec<ccl::Collective> {
    list.into_iter()
        .map(|c| match c {
            Collective::AllReduce => ccl::Collective::AllReduce,
            Collective::Broadcast => ccl::Collective::Broadcast,
            Collective::Reduce => ccl::Collective::Reduce,
            Collective::AllGather => ccl::Collective::AllGather,
            Collective::ReduceScatter => ccl::Collective::ReduceScatter,
            Collective::AllToAll => ccl::Collective::AllToAll,
        })
        .collect()
}

/// The WIT call as a [`Call`].
#[doc(hidden)]
pub fn call_in(c: ccl::Call) -> Call {
    Call {
        collective: collective_of(c.collective),
        dtype: c.dtype.into(),
        op: match c.op {
            ccl::RedOp::Sum => RedOp::Sum,
            ccl::RedOp::Prod => RedOp::Prod,
            ccl::RedOp::Max => RedOp::Max,
            ccl::RedOp::Min => RedOp::Min,
            ccl::RedOp::Avg => RedOp::Avg,
            ccl::RedOp::PremulSum => RedOp::PremulSum,
        },
        root: c.root,
        block: c.block,
        world_size: c.world_size,
        cube_w: c.cube_w,
        cube_h: c.cube_h,
    }
}

#[doc(hidden)]
pub fn entry_defaults_out(d: EntryDefaults) -> ccl::EntryDefaults {
    ccl::EntryDefaults {
        topology: d.topology.map(str::to_string),
        mapper: d.mapper.map(str::to_string),
        buffer_kind: d.buffer_kind.map(str::to_string),
        n_slots: d.n_slots,
        slot_size: d.slot_size,
        validator: d.validator.map(str::to_string),
    }
}

#[doc(hidden)]
pub fn links_in(map: Vec<ccl::Link>) -> Vec<Link> {
    map.into_iter()
        .map(|l| Link {
            dir: l.dir,
            peer: l.peer,
            peer_dir: l.peer_dir,
        })
        .collect()
}

#[doc(hidden)]
pub fn links_out(map: Vec<Link>) -> Vec<ccl::Link> {
    map.into_iter()
        .map(|l| ccl::Link {
            dir: l.dir,
            peer: l.peer,
            peer_dir: l.peer_dir,
        })
        .collect()
}

/// Export a type implementing [`crate::Algorithm`] as the component's
/// `algorithm` world. Use once per crate:
///
/// ```ignore
/// struct Ring;
/// impl kernbench_guest::Algorithm for Ring { /* ... */ }
/// kernbench_guest::export_algorithm!(Ring);
/// ```
#[macro_export]
macro_rules! export_algorithm {
    ($ty:ty) => {
        $crate::__component_metadata!(algorithm);
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct __KernbenchAlgorithm;
            impl $crate::__algorithm::Guest for __KernbenchAlgorithm {
                fn kernel(t_ptr: u64, args: ::std::vec::Vec<i64>) {
                    let tl = $crate::BatchTl::default();
                    <$ty as $crate::Algorithm>::kernel(&tl, t_ptr, &args);
                    tl.flush();
                }
                fn kernel_args(
                    world_size: u32,
                    n_elem: u64,
                    cube_w: u32,
                    cube_h: u32,
                ) -> ::std::vec::Vec<i64> {
                    <$ty as $crate::Algorithm>::kernel_args(world_size, n_elem, cube_w, cube_h)
                }
                fn topo_name_to_kind(name: ::std::string::String) -> ::std::option::Option<i32> {
                    <$ty as $crate::Algorithm>::topo_name_to_kind(&name)
                }
                fn kernel_args_with(
                    world_size: u32,
                    n_elem: u64,
                    cube_w: u32,
                    cube_h: u32,
                    params: ::std::vec::Vec<$crate::__algorithm::kernbench::sim::ccl::Param>,
                ) -> ::std::result::Result<::std::vec::Vec<i64>, ::std::string::String> {
                    <$ty as $crate::Algorithm>::kernel_args_with(
                        world_size,
                        n_elem,
                        cube_w,
                        cube_h,
                        &$crate::algorithm_wasm::params_in(params),
                    )
                }
                fn collectives(
                ) -> ::std::vec::Vec<$crate::__algorithm::kernbench::sim::ccl::Collective> {
                    $crate::algorithm_wasm::collectives_out(
                        <$ty as $crate::Algorithm>::collectives(),
                    )
                }
                fn out_of_place(
                ) -> ::std::vec::Vec<$crate::__algorithm::kernbench::sim::ccl::Collective> {
                    $crate::algorithm_wasm::collectives_out(
                        <$ty as $crate::Algorithm>::out_of_place(),
                    )
                }
                fn kernel_args_for(
                    call: $crate::__algorithm::kernbench::sim::ccl::Call,
                    params: ::std::vec::Vec<$crate::__algorithm::kernbench::sim::ccl::Param>,
                ) -> ::std::result::Result<::std::vec::Vec<i64>, ::std::string::String> {
                    <$ty as $crate::Algorithm>::kernel_args_for(
                        &$crate::algorithm_wasm::call_in(call),
                        &$crate::algorithm_wasm::params_in(params),
                    )
                }
                fn entry_defaults() -> $crate::__algorithm::kernbench::sim::ccl::EntryDefaults {
                    $crate::algorithm_wasm::entry_defaults_out(
                        <$ty as $crate::Algorithm>::entry_defaults(),
                    )
                }
                fn neighbors(
                    rank: u32,
                    world_size: u32,
                    map: ::std::vec::Vec<$crate::__algorithm::kernbench::sim::ccl::Link>,
                ) -> ::std::option::Option<
                    ::std::vec::Vec<$crate::__algorithm::kernbench::sim::ccl::Link>,
                > {
                    <$ty as $crate::Algorithm>::neighbors(
                        rank,
                        world_size,
                        $crate::algorithm_wasm::links_in(map),
                    )
                    .map($crate::algorithm_wasm::links_out)
                }
            }
            $crate::__algorithm::__export_algorithm_world!(__KernbenchAlgorithm);
        };
        // Natively the exports do not exist; keep the impl "used" (it runs
        // under the mock runner).
        #[cfg(not(target_arch = "wasm32"))]
        const _: fn(u32, u64, u32, u32) -> ::std::vec::Vec<i64> =
            <$ty as $crate::Algorithm>::kernel_args;
    };
}
