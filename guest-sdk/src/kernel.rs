//! The kernel language as a Rust trait, so one kernel body runs both as a
//! wasm component (against the host) and natively (against the mock).

use crate::Dtype;

/// Element-wise binary operations of the MATH unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Max,
    Min,
    /// `a / b` (i32: truncating, 0 where `b` is 0).
    Div,
}

/// A GEMM and the epilogue fused after it (`Tl::composite`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompositeOp {
    /// `a x b`.
    Gemm,
    /// `c + a x b`, `c` of shape `[m, n]` (accumulate over k tiles).
    GemmAcc,
    /// `a x b + c`, `c` a bias row `[n]` (or `[1, n]`).
    GemmBias,
    /// `relu(a x b)`.
    GemmRelu,
    /// `relu(a x b + c)`, `c` a bias row.
    GemmBiasRelu,
}

impl CompositeOp {
    /// The epilogue on the exact product `r` (row-major `[m, n]`) and `c`.
    pub fn epilogue(self, r: &mut [f64], n: usize, c: Option<&[f64]>) {
        match (self, c) {
            (CompositeOp::GemmAcc, Some(c)) => r.iter_mut().zip(c).for_each(|(r, c)| *r += c),
            (CompositeOp::GemmBias | CompositeOp::GemmBiasRelu, Some(c)) => {
                for row in r.chunks_mut(n) {
                    row.iter_mut().zip(c).for_each(|(r, c)| *r += c);
                }
            }
            _ => {}
        }
        if matches!(self, CompositeOp::GemmRelu | CompositeOp::GemmBiasRelu) {
            r.iter_mut().for_each(|r| *r = r.max(0.0));
        }
    }
}

/// Element-wise unary operations of the MATH unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    Neg,
    Abs,
    Exp,
    Log,
    Sqrt,
    Relu,
    /// `1 / x`.
    Recip,
}

impl UnaryOp {
    /// The op on one value (what the MATH unit computes, before rounding).
    pub fn apply(self, x: f64) -> f64 {
        match self {
            UnaryOp::Neg => -x,
            UnaryOp::Abs => x.abs(),
            UnaryOp::Exp => x.exp(),
            UnaryOp::Log => x.ln(),
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Relu => x.max(0.0),
            UnaryOp::Recip => 1.0 / x,
        }
    }
}

/// Reductions over one axis, on the MATH unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
}

/// The shape `reduce` over `axis` of `shape` gives: the axis dropped, one
/// element left of a 1-D input (the host's rule; an axis past the last is
/// refused by the host and asserted by the mock, and leaves the shape
/// here).
pub(crate) fn reduced_shape(shape: &[u32], axis: u32) -> Vec<u32> {
    let mut out = shape.to_vec();
    if (axis as usize) < out.len() {
        out.remove(axis as usize);
    }
    if out.is_empty() {
        out.push(1);
    }
    out
}

/// What a kernel can ask of a tensor handle.
pub trait Tensor {
    fn shape(&self) -> Vec<u32>;
    fn dtype(&self) -> Dtype;
    /// Physical address of the first element.
    fn addr(&self) -> u64;
    fn nbytes(&self) -> u64;
    fn numel(&self) -> u64 {
        self.shape().iter().map(|&d| d as u64).product()
    }
}

/// The `tl.*` kernel language (seed 003 §4). On the simulator, host-side
/// errors (unknown direction, bad address, mismatched shapes) abort the
/// kernel with a message naming the PE; they are not returned.
pub trait Tl {
    type Tensor: Tensor;
    /// A receive in progress ([`Tl::recv_async`]).
    type Future;

    /// axis 0: PE index in its cube; axis 1: cube index.
    fn program_id(&self, axis: u32) -> i64;
    /// axis 0: PEs per cube; axis 1: cubes per SIP.
    fn num_programs(&self, axis: u32) -> i64;
    /// DMA read into PE scratch; returns at once, the data lands later.
    fn load(&self, addr: u64, shape: &[u32], dtype: Dtype) -> Self::Tensor;
    /// DMA write of `value` to `addr`.
    fn store(&self, addr: u64, value: &Self::Tensor);
    /// Send to the neighbour in `dir`; blocks while the peer has no free slot.
    fn send(&self, dir: &str, value: &Self::Tensor);
    /// Send `shape` / `dtype` elements straight from memory at `src_addr`
    /// (no load first); the DMA reads them when its transfer starts.
    fn send_addr(&self, dir: &str, src_addr: u64, shape: &[u32], dtype: Dtype);
    /// Receive from `dir` (or round-robin over all directions with `None`).
    /// The handle points at the IPCQ slot; dropping it releases the slot.
    fn recv(&self, dir: Option<&str>, shape: &[u32], dtype: Dtype) -> Self::Tensor;
    /// Receive and copy to `dst_addr`; the slot is released after the copy.
    fn recv_into(
        &self,
        dir: Option<&str>,
        shape: &[u32],
        dtype: Dtype,
        dst_addr: u64,
    ) -> Self::Tensor;
    /// Start a receive from `dir` and return at once; [`Tl::wait`] gives
    /// its tensor. Receives and futures on one direction take their
    /// messages in issue order. A future never waited for fails the kernel.
    fn recv_async(&self, dir: Option<&str>, shape: &[u32], dtype: Dtype) -> Self::Future;
    /// Wait for `f`'s message (a tensor on its IPCQ slot, as `recv`'s).
    fn wait(&self, f: Self::Future) -> Self::Tensor;
    /// Element-wise `a op b`.
    fn binary(&self, op: BinOp, a: &Self::Tensor, b: &Self::Tensor) -> Self::Tensor;
    /// `a * factor`.
    fn scale(&self, a: &Self::Tensor, factor: f64) -> Self::Tensor;
    /// `op(a)` element-wise, rounded once.
    fn unary(&self, op: UnaryOp, a: &Self::Tensor) -> Self::Tensor;
    /// `a` converted to `dtype` (floats to nearest-even; integers rounded
    /// to nearest and saturated).
    fn cast(&self, a: &Self::Tensor, dtype: Dtype) -> Self::Tensor;
    /// A tensor of `shape` / `dtype` in PE scratch whose every element is
    /// `value`, converted as [`Tl::cast`] converts; one MATH command, no
    /// inputs (WIT 0.8.1: a host of 0.8.0 does not run a kernel that
    /// calls it).
    fn fill(&self, shape: &[u32], dtype: Dtype, value: f64) -> Self::Tensor;
    /// `a [m, k] x b [k, n]` on the matrix unit, rounded once to
    /// `out_dtype` (a command takes at most `pe.gemm.max_m/n/k`).
    fn gemm(&self, a: &Self::Tensor, b: &Self::Tensor, out_dtype: Dtype) -> Self::Tensor;
    /// The GEMM of `a` and `b` then `op`'s epilogue with `c` (the seed's
    /// `tl.composite`), one non-blocking command on the matrix and MATH
    /// units, rounded once to `out_dtype`.
    fn composite(
        &self,
        op: CompositeOp,
        a: &Self::Tensor,
        b: &Self::Tensor,
        c: Option<&Self::Tensor>,
        out_dtype: Dtype,
    ) -> Self::Tensor;
    /// `op` over `axis` of `a`; the axis is dropped (a 1-D input gives one
    /// element). An axis past the last fails the kernel.
    fn reduce(&self, op: ReduceOp, a: &Self::Tensor, axis: u32) -> Self::Tensor;
    /// Simulated time of this PE in picoseconds (0 in the mock).
    fn now_ps(&self) -> u64;
    /// A trace line, printed with the PE's name.
    fn log(&self, msg: &str);

    fn add(&self, a: &Self::Tensor, b: &Self::Tensor) -> Self::Tensor {
        self.binary(BinOp::Add, a, b)
    }
}

/// A collective algorithm (seed ADR-0050): a kernel plus its argument
/// builder. Export it with [`crate::export_algorithm!`].
pub trait Algorithm {
    /// The kernel run on every participating PE. `args` is
    /// `kernel_args(...)` (or `kernel_args_for(...)`) followed by
    /// `(sip_rank, sip_topo_kind, sip_topo_w, sip_topo_h)` and, for a
    /// collective with its own output buffer (all-gather, reduce-scatter,
    /// all-to-all, and those [`Algorithm::out_of_place`] lists), `out_ptr`
    /// ([`crate::HostArgs`]).
    fn kernel<T: Tl>(tl: &T, t_ptr: u64, args: &[i64]);

    /// The kernel's positional arguments (before the four appended by the
    /// host), from the world size, the elements per shard and the cube mesh.
    fn kernel_args(world_size: u32, n_elem: u64, cube_w: u32, cube_h: u32) -> Vec<i64>;

    /// `TOPO_NAME_TO_KIND`: the standard map unless overridden.
    fn topo_name_to_kind(name: &str) -> Option<i32> {
        crate::topo::standard_kind(name)
    }

    /// `kernel_args` with the parameters of the ccl.yaml entry (seed 004
    /// D4). Override it to take parameters: read each one from `params`,
    /// then return `params.finish()?`'s verdict with your arguments. The
    /// default takes none: a ccl.yaml entry with parameters is refused.
    fn kernel_args_with(
        world_size: u32,
        n_elem: u64,
        cube_w: u32,
        cube_h: u32,
        params: &crate::Params,
    ) -> Result<Vec<i64>, String> {
        params.finish()?;
        Ok(Self::kernel_args(world_size, n_elem, cube_w, cube_h))
    }

    /// The collectives this algorithm implements; the host maps it to no
    /// other. Default: all-reduce.
    fn collectives() -> Vec<crate::Collective> {
        vec![crate::Collective::AllReduce]
    }

    /// Those of all-reduce, broadcast and reduce whose kernel takes an
    /// output apart from its input: their calls get `out_ptr` too (equal
    /// to `t_ptr` in place), and nccl-tests' out-of-place form runs. Read
    /// the input at `t_ptr`, write the result at
    /// [`crate::HostArgs::out_ptr`]. Default: none (they run in place).
    fn out_of_place() -> Vec<crate::Collective> {
        Vec::new()
    }

    /// The kernel's positional arguments for one `call`, with the
    /// parameters of the ccl.yaml entry; an `Err` refuses the call (say
    /// what the algorithm does instead). Default: the seed's ABI
    /// ([`Algorithm::kernel_args_with`]) for an f16 sum all-reduce, a
    /// refusal for anything else. [`crate::Call::to_args`] encodes a call
    /// for the kernel to read back with [`crate::Call::from_args`].
    fn kernel_args_for(call: &crate::Call, params: &crate::Params) -> Result<Vec<i64>, String> {
        if call.is_seed_form() {
            return Self::kernel_args_with(
                call.world_size,
                call.block,
                call.cube_w,
                call.cube_h,
                params,
            );
        }
        Err("implements only an f16 sum all_reduce (the seed's ABI)".into())
    }

    /// Install keys for a ccl.yaml entry that leaves them out (ccl.yaml
    /// wins). Default: none, the host's defaults apply.
    fn entry_defaults() -> crate::EntryDefaults {
        crate::EntryDefaults::default()
    }

    /// `neighbors(rank, world_size, neighbor_map)` (seed 003 §3): rewrite
    /// participant `rank`'s row of the builtin table (`map`), or `None` to
    /// keep it. `rank` and the peers are indices in the flat participant
    /// order, `world_size` their count.
    fn neighbors(rank: u32, world_size: u32, map: Vec<crate::Link>) -> Option<Vec<crate::Link>> {
        let _ = (rank, world_size, map);
        None
    }
}
