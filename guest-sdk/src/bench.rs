//! The bench world: PyTorch-like wrappers over the host imports
//! (`torch`, `torch.distributed`, `torch.multiprocessing`, `torch.ahbm`,
//! `torch.accelerator`) and the result reporter.

use crate::__bench::kernbench::sim as raw;
use crate::Dtype;

impl From<Dtype> for raw::types::Dtype {
    fn from(d: Dtype) -> Self {
        match d {
            Dtype::F16 => raw::types::Dtype::F16,
            Dtype::Bf16 => raw::types::Dtype::Bf16,
            Dtype::F32 => raw::types::Dtype::F32,
            Dtype::I32 => raw::types::Dtype::I32,
            Dtype::I8 => raw::types::Dtype::I8,
            Dtype::U8 => raw::types::Dtype::U8,
            Dtype::U32 => raw::types::Dtype::U32,
            Dtype::I64 => raw::types::Dtype::I64,
            Dtype::U64 => raw::types::Dtype::U64,
            Dtype::F64 => raw::types::Dtype::F64,
        }
    }
}

impl From<raw::types::Dtype> for Dtype {
    fn from(d: raw::types::Dtype) -> Self {
        match d {
            raw::types::Dtype::F16 => Dtype::F16,
            raw::types::Dtype::Bf16 => Dtype::Bf16,
            raw::types::Dtype::F32 => Dtype::F32,
            raw::types::Dtype::I32 => Dtype::I32,
            raw::types::Dtype::I8 => Dtype::I8,
            raw::types::Dtype::U8 => Dtype::U8,
            raw::types::Dtype::U32 => Dtype::U32,
            raw::types::Dtype::I64 => Dtype::I64,
            raw::types::Dtype::U64 => Dtype::U64,
            raw::types::Dtype::F64 => Dtype::F64,
        }
    }
}

/// A bench program. `run` is the entry point; `worker` is one rank of
/// [`mp::spawn`].
pub trait Bench {
    fn run(args: Vec<String>) -> Result<(), String>;
    fn worker(rank: u32, world_size: u32, args: Vec<String>) -> Result<(), String> {
        let _ = (rank, world_size, args);
        Err("this bench does not define a worker (multiprocessing.spawn)".into())
    }
}

/// `torch.*` tensors.
pub mod torch {
    use super::raw::torch as t;
    use crate::Dtype;

    /// `DPPolicy(cube=..., pe=..., num_cubes=..., num_pes=...)` (the WIT
    /// record): how a tensor is laid out over the cubes of the device, then
    /// over the PEs of each cube (seed ADR-0026). There is no SIP field:
    /// the device is the one chosen with `ahbm::set_device`.
    pub use t::DpPolicy;
    pub use t::{DpMode, ShardSpec};

    /// A device tensor on the calling rank's current device.
    pub struct Tensor(pub(crate) t::Tensor);

    impl DpPolicy {
        pub fn new(cube: DpMode, pe: DpMode, num_cubes: u32, num_pes: u32) -> Self {
            DpPolicy {
                cube,
                pe,
                num_cubes,
                num_pes,
            }
        }
    }

    /// `torch.__version__`: the host's release and the `kernbench:sim`
    /// version it implements, e.g. `kernbench 0.1.0 (kernbench:sim@0.8.4)`.
    pub fn version() -> String {
        t::version()
    }

    /// `torch.zeros(shape, dtype=..., name=...)`: one shard on cube 0, PE 0.
    pub fn zeros(shape: &[u32], dtype: Dtype, name: &str) -> Result<Tensor, String> {
        t::zeros(shape, dtype.into(), None, name).map(Tensor)
    }

    /// Run the kernel component `kernel` (an algorithm name or .wasm path)
    /// on every PE holding a shard of `t` (`t_ptr` = `t.data_ptr()`, then
    /// `args`), wait for them; the simulated picoseconds it took. `t` must
    /// be on the current device.
    pub fn launch(kernel: &str, t: &Tensor, args: &[i64]) -> Result<u64, String> {
        t::launch(kernel, &t.0, args)
    }

    /// [`launch`] without waiting: it runs on the rank's compute stream
    /// (after its earlier launches and `ahbm::gemm` / `busy`) while the
    /// bench goes on. Errors in the call come back here, a kernel's
    /// failure from [`Launched::wait`].
    pub fn launch_async(kernel: &str, t: &Tensor, args: &[i64]) -> Result<Launched, String> {
        t::launch_async(kernel, &t.0, args).map(Launched)
    }

    /// A launch in flight ([`launch_async`]); dropping it does not cancel it.
    pub struct Launched(t::Launched);

    impl Launched {
        /// Wait until its kernels have ended: the picoseconds it took.
        pub fn wait(&self) -> Result<u64, String> {
            self.0.wait()
        }
        /// Whether it has ended; a `false` costs 100 ns of simulated time.
        pub fn is_completed(&self) -> bool {
            self.0.is_completed()
        }
    }

    /// `torch.zeros(shape, dtype=..., dp=..., name=...)`.
    pub fn zeros_dp(
        shape: &[u32],
        dtype: Dtype,
        dp: DpPolicy,
        name: &str,
    ) -> Result<Tensor, String> {
        t::zeros(shape, dtype.into(), Some(dp), name).map(Tensor)
    }

    impl Tensor {
        /// The shards, in (cube, pe) order (`tensor._handle.shards`).
        pub fn shards(&self) -> Vec<ShardSpec> {
            self.0.shards()
        }
        /// The virtual base address on the device (the kernel's `t_ptr`).
        pub fn data_ptr(&self) -> u64 {
            self.0.data_ptr()
        }
        pub fn shape(&self) -> Vec<u32> {
            self.0.shape()
        }
        pub fn dtype(&self) -> Dtype {
            self.0.dtype().into()
        }
        pub fn numel(&self) -> u64 {
            self.0.numel()
        }
        pub fn nbytes(&self) -> u64 {
            self.0.nbytes()
        }
        pub fn device(&self) -> u32 {
            self.0.device()
        }
        /// `tensor.copy_(...)` from raw little-endian element bytes.
        pub fn copy_from_bytes(&self, data: &[u8]) -> Result<(), String> {
            self.0.copy_from_bytes(data)
        }
        /// `tensor.copy_(...)` from values, converted to the tensor's dtype.
        pub fn copy_from_f64(&self, data: &[f64]) -> Result<(), String> {
            self.0.copy_from_f64(data)
        }
        pub fn to_bytes(&self) -> Vec<u8> {
            self.0.to_bytes()
        }
        /// `tensor.numpy()`, as f64 values.
        pub fn to_f64(&self) -> Vec<f64> {
            self.0.to_f64()
        }
        /// Overwrite elements `offset..offset + data.len()` (fill a large
        /// tensor in pieces without holding it whole).
        pub fn copy_from_f64_at(&self, offset: u64, data: &[f64]) -> Result<(), String> {
            self.0.copy_from_f64_at(offset, data)
        }
        /// Elements `offset..offset + count` as f64 (read a large tensor in
        /// pieces).
        pub fn to_f64_range(&self, offset: u64, count: u64) -> Result<Vec<f64>, String> {
            self.0.to_f64_range(offset, count)
        }
    }
}

/// `torch.distributed` (seed ADR-0047 D8).
pub mod dist {
    use super::raw::distributed as d;
    use super::torch::Tensor;
    use std::fmt;

    /// The Python exception the seed raises, with its message.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum DistError {
        ValueError(String),
        RuntimeError(String),
        NotImplementedError(String),
    }

    impl fmt::Display for DistError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                DistError::ValueError(m) => write!(f, "ValueError: {m}"),
                DistError::RuntimeError(m) => write!(f, "RuntimeError: {m}"),
                DistError::NotImplementedError(m) => write!(f, "NotImplementedError: {m}"),
            }
        }
    }

    impl std::error::Error for DistError {}

    impl From<DistError> for String {
        fn from(e: DistError) -> String {
            e.to_string()
        }
    }

    fn conv(e: d::DistError) -> DistError {
        match e {
            d::DistError::ValueError(m) => DistError::ValueError(m),
            d::DistError::RuntimeError(m) => DistError::RuntimeError(m),
            d::DistError::NotImplemented(m) => DistError::NotImplementedError(m),
        }
    }

    /// `init_process_group(backend="ahbm")`. `world_size`/`rank` are
    /// accepted and ignored, as in the seed (D2).
    pub fn init_process_group(backend: &str) -> Result<(), DistError> {
        d::init_process_group(backend, None, None, None).map_err(conv)
    }
    pub fn init_process_group_with(
        backend: &str,
        world_size: Option<u32>,
        rank: Option<u32>,
    ) -> Result<(), DistError> {
        d::init_process_group(backend, world_size, rank, None).map_err(conv)
    }
    /// `init_process_group` for a bench that needs the ccl.yaml algorithm
    /// entry `algorithm` (the command line's `--algorithm` still wins).
    pub fn init_process_group_with_algorithm(
        backend: &str,
        algorithm: &str,
    ) -> Result<(), DistError> {
        let options = d::PgOptions {
            algorithm: Some(algorithm.to_string()),
        };
        d::init_process_group(backend, None, None, Some(&options)).map_err(conv)
    }
    pub fn is_initialized() -> bool {
        d::is_initialized()
    }
    pub fn get_rank() -> Result<u32, DistError> {
        d::get_rank().map_err(conv)
    }
    pub fn get_world_size() -> Result<u32, DistError> {
        d::get_world_size().map_err(conv)
    }
    pub fn get_backend() -> Result<String, DistError> {
        d::get_backend().map_err(conv)
    }
    /// `all_reduce(tensor, op="sum")`, in place.
    pub fn all_reduce(t: &Tensor, op: &str) -> Result<(), DistError> {
        d::all_reduce(&t.0, op).map_err(conv)
    }
    /// `broadcast(tensor, src)`, in place: every rank ends with `src`'s.
    pub fn broadcast(t: &Tensor, src: u32) -> Result<(), DistError> {
        d::broadcast(&t.0, src).map_err(conv)
    }
    /// `reduce(tensor, dst, op)`, in place: `dst` ends with the reduction
    /// (the other ranks' tensors are unspecified, as in PyTorch).
    pub fn reduce(t: &Tensor, dst: u32, op: &str) -> Result<(), DistError> {
        d::reduce(&t.0, dst, op).map_err(conv)
    }
    /// `all_gather_into_tensor(output, input)`: `output` holds world size
    /// × `input`'s elements, every rank's input in rank order.
    pub fn all_gather_into_tensor(output: &Tensor, input: &Tensor) -> Result<(), DistError> {
        d::all_gather_into_tensor(&output.0, &input.0).map_err(conv)
    }
    /// `all_gather(tensor_list, tensor)`: entry i ends with rank i's input
    /// (through a staging buffer and timed copies, as PyTorch's NCCL
    /// backend does).
    pub fn all_gather(outputs: &[Tensor], input: &Tensor) -> Result<(), DistError> {
        let outs: Vec<&super::raw::torch::Tensor> = outputs.iter().map(|t| &t.0).collect();
        d::all_gather(&outs, &input.0).map_err(conv)
    }
    /// `reduce_scatter_tensor(output, input, op)`: `output` ends with
    /// block `rank` of the reduction of every rank's `input`.
    pub fn reduce_scatter_tensor(
        output: &Tensor,
        input: &Tensor,
        op: &str,
    ) -> Result<(), DistError> {
        d::reduce_scatter_tensor(&output.0, &input.0, op).map_err(conv)
    }
    /// `reduce_scatter(output, input_list, op)`.
    pub fn reduce_scatter(output: &Tensor, inputs: &[Tensor], op: &str) -> Result<(), DistError> {
        let ins: Vec<&super::raw::torch::Tensor> = inputs.iter().map(|t| &t.0).collect();
        d::reduce_scatter(&output.0, &ins, op).map_err(conv)
    }
    /// `all_to_all_single(output, input)` with equal splits.
    pub fn all_to_all_single(output: &Tensor, input: &Tensor) -> Result<(), DistError> {
        d::all_to_all_single(&output.0, &input.0).map_err(conv)
    }
    /// `send(tensor, dst)`: returns when `dst`'s matching `recv` has it.
    pub fn send(t: &Tensor, dst: u32) -> Result<(), DistError> {
        d::send(&t.0, dst).map_err(conv)
    }
    /// `recv(tensor, src)`: blocks until `src`'s matching `send` landed.
    pub fn recv(t: &Tensor, src: u32) -> Result<(), DistError> {
        d::recv(&t.0, src).map_err(conv)
    }
    pub fn barrier() -> Result<(), DistError> {
        d::barrier().map_err(conv)
    }
    /// The shards per SIP a tensor must have for the algorithm that runs
    /// `collective` (e.g. "all_reduce"), as its ccl.yaml validator wants
    /// (`one_shard_per_cube`: the cubes of a SIP); None: any placement.
    pub fn shards_wanted(collective: &str) -> Result<Option<u32>, DistError> {
        d::shards_wanted(collective).map_err(conv)
    }
    /// nccl-tests' out-of-place form of `collective` (a KernBench
    /// extension): `output` gets the result, `input` is kept. All-reduce,
    /// broadcast and reduce take an output the input's size and need an
    /// algorithm that lists them in [`crate::Algorithm::out_of_place`]
    /// (else `NotImplementedError`, naming ones that do). `op` is read by
    /// the reducing collectives, `root` by broadcast (src) and reduce
    /// (dst).
    pub fn collective_out_of_place(
        collective: &str,
        output: &Tensor,
        input: &Tensor,
        op: &str,
        root: u32,
    ) -> Result<(), DistError> {
        d::collective_out_of_place(collective, &output.0, &input.0, op, root).map_err(conv)
    }
    /// nccl-tests' in-place form of `collective` on the one buffer `t` (a
    /// KernBench extension): all-gather's input is this rank's block of
    /// `t` (the output), reduce-scatter's output this rank's block of `t`
    /// (the input), all-to-all sends from and receives into `t`; the others
    /// are their torch calls. All-gather and reduce-scatter take a
    /// single-shard `t` and a caller that is one rank.
    pub fn collective_in_place(
        collective: &str,
        t: &Tensor,
        op: &str,
        root: u32,
    ) -> Result<(), DistError> {
        d::collective_in_place(collective, &t.0, op, root).map_err(conv)
    }

    /// PyTorch's `Work`: a call made with `async_op=True` (the `_async`
    /// methods of [`ProcessGroup`], [`isend`], [`irecv`]). Each rank's
    /// calls on one group run in its issue order; different groups' run
    /// at once. Dropping it does not cancel the call (its tensors live
    /// until it ends); a call nobody waited for that fails fails the
    /// bench when it returns.
    pub struct Work(d::Work);

    impl Work {
        /// Wait until the call has ended on every rank of its group: its
        /// error, as the blocking call would have returned it.
        pub fn wait(&self) -> Result<(), DistError> {
            self.0.wait().map_err(conv)
        }
        /// Whether it has ended; a `false` costs 100 ns of simulated time.
        pub fn is_completed(&self) -> bool {
            self.0.is_completed()
        }
    }

    /// `all_reduce(tensor, op, async_op=True)` on the default group.
    pub fn all_reduce_async(t: &Tensor, op: &str) -> Result<Work, DistError> {
        ProcessGroup::default_group().all_reduce_async(t, op)
    }
    /// `isend(tensor, dst)` on the default group.
    pub fn isend(t: &Tensor, dst: u32) -> Result<Work, DistError> {
        ProcessGroup::default_group().isend(t, dst)
    }
    /// `irecv(tensor, src)` on the default group.
    pub fn irecv(t: &Tensor, src: u32) -> Result<Work, DistError> {
        ProcessGroup::default_group().irecv(t, src)
    }

    /// A process group: `new_group`'s, or the default group
    /// ([`ProcessGroup::world`], PyTorch's `group.WORLD`). Its collectives
    /// are PyTorch's with `group=`: they run over its ranks, with its rank
    /// and size; `src` / `dst` are world ranks, as in PyTorch; on a rank
    /// outside the group they return at once, its tensors untouched.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ProcessGroup {
        id: u32,
        ranks: Vec<u32>,
    }

    /// `new_group(ranks)`: every rank calls it, members or not, in the
    /// same order with the same ranks. The group's rank g is the g-th
    /// smallest of `ranks` (PyTorch sorts them); it has IPCQ of its own.
    pub fn new_group(ranks: &[u32]) -> Result<ProcessGroup, DistError> {
        let id = d::new_group(ranks, None).map_err(conv)?;
        ProcessGroup::of(id)
    }

    /// [`new_group`] served by the ccl.yaml algorithm entry `algorithm`
    /// (PyTorch's `pg_options`; `--algorithm` still wins).
    pub fn new_group_with_algorithm(
        ranks: &[u32],
        algorithm: &str,
    ) -> Result<ProcessGroup, DistError> {
        let options = d::PgOptions {
            algorithm: Some(algorithm.to_string()),
        };
        let id = d::new_group(ranks, Some(&options)).map_err(conv)?;
        ProcessGroup::of(id)
    }

    /// `new_subgroups(group_size)`: the world cut into consecutive groups
    /// of `group_size` ranks; (this rank's group, every group).
    pub fn new_subgroups(
        group_size: u32,
    ) -> Result<(Option<ProcessGroup>, Vec<ProcessGroup>), DistError> {
        let world = get_world_size()?;
        if group_size == 0 || world % group_size != 0 {
            return Err(DistError::ValueError(format!(
                "new_subgroups: the world size ({world}) must be divisible by group_size \
                 ({group_size})"
            )));
        }
        let lists: Vec<Vec<u32>> = (0..world / group_size)
            .map(|g| (g * group_size..(g + 1) * group_size).collect())
            .collect();
        new_subgroups_by_enumeration(&lists)
    }

    /// `new_subgroups_by_enumeration(ranks_per_subgroup_list)`: a group
    /// of each list (no rank in two); (this rank's group, every group).
    pub fn new_subgroups_by_enumeration(
        lists: &[Vec<u32>],
    ) -> Result<(Option<ProcessGroup>, Vec<ProcessGroup>), DistError> {
        let mut seen = std::collections::BTreeSet::new();
        for r in lists.iter().flatten() {
            if !seen.insert(*r) {
                return Err(DistError::ValueError(format!(
                    "new_subgroups_by_enumeration: rank {r} is in more than one subgroup"
                )));
            }
        }
        let mut mine = None;
        let mut groups = Vec::with_capacity(lists.len());
        for list in lists {
            let g = new_group(list)?;
            if g.rank().is_some() {
                mine = Some(g.clone());
            }
            groups.push(g);
        }
        Ok((mine, groups))
    }

    impl ProcessGroup {
        /// The default group: every rank.
        pub fn world() -> Result<ProcessGroup, DistError> {
            ProcessGroup::of(0)
        }

        /// The default group's handle for its calls (its ranks not asked).
        fn default_group() -> ProcessGroup {
            ProcessGroup {
                id: 0,
                ranks: Vec::new(),
            }
        }

        fn of(id: u32) -> Result<ProcessGroup, DistError> {
            let ranks = d::group_ranks(id).map_err(conv)?;
            Ok(ProcessGroup { id, ranks })
        }

        /// Its id (0: the default group), the same on every rank.
        pub fn id(&self) -> u32 {
            self.id
        }

        /// `get_process_group_ranks(group)`: its world ranks in group order.
        pub fn ranks(&self) -> &[u32] {
            &self.ranks
        }

        /// `get_rank(group)`: this rank's rank in it; None when this rank is
        /// not a member (PyTorch: -1).
        pub fn rank(&self) -> Option<u32> {
            let me = get_rank().ok()?;
            self.ranks.iter().position(|&r| r == me).map(|g| g as u32)
        }

        /// `get_world_size(group)`: its number of ranks.
        pub fn size(&self) -> u32 {
            self.ranks.len() as u32
        }

        /// `get_global_rank(group, group_rank)`.
        pub fn global_rank(&self, group_rank: u32) -> Result<u32, DistError> {
            self.ranks.get(group_rank as usize).copied().ok_or_else(|| {
                DistError::ValueError(format!(
                    "Group rank {group_rank} is not part of group {} (size {})",
                    self.id,
                    self.size()
                ))
            })
        }

        /// `get_group_rank(group, global_rank)`.
        pub fn group_rank(&self, global_rank: u32) -> Result<u32, DistError> {
            self.ranks
                .iter()
                .position(|&r| r == global_rank)
                .map(|g| g as u32)
                .ok_or_else(|| {
                    DistError::ValueError(format!(
                        "Global rank {global_rank} is not part of group {} (ranks {:?})",
                        self.id, self.ranks
                    ))
                })
        }

        fn call(
            &self,
            call: &str,
            tensors: &[&Tensor],
            op: &str,
            peer: u32,
        ) -> Result<(), DistError> {
            let raw: Vec<&super::raw::torch::Tensor> = tensors.iter().map(|t| &t.0).collect();
            d::group_call(self.id, call, &raw, op, peer).map_err(conv)
        }

        /// The torch call `call` on this group with `async_op=True`, its
        /// tensors and arguments as [`ProcessGroup::call_async`]'s
        /// siblings pass them (the WIT's `group-call` table): returns at
        /// once with its [`Work`]. Errors in the call itself are returned
        /// here, all others by [`Work::wait`].
        pub fn call_async(
            &self,
            call: &str,
            tensors: &[&Tensor],
            op: &str,
            peer: u32,
        ) -> Result<Work, DistError> {
            let raw: Vec<&super::raw::torch::Tensor> = tensors.iter().map(|t| &t.0).collect();
            d::group_call_async(self.id, call, &raw, op, peer)
                .map(Work)
                .map_err(conv)
        }

        /// `all_reduce(tensor, op, group=self, async_op=True)`.
        pub fn all_reduce_async(&self, t: &Tensor, op: &str) -> Result<Work, DistError> {
            self.call_async("all_reduce", &[t], op, 0)
        }
        /// `broadcast(tensor, src, group=self, async_op=True)`.
        pub fn broadcast_async(&self, t: &Tensor, src: u32) -> Result<Work, DistError> {
            self.call_async("broadcast", &[t], "sum", src)
        }
        /// `all_gather_into_tensor(output, input, group=self, async_op=True)`.
        pub fn all_gather_into_tensor_async(
            &self,
            output: &Tensor,
            input: &Tensor,
        ) -> Result<Work, DistError> {
            self.call_async("all_gather_into_tensor", &[output, input], "sum", 0)
        }
        /// `reduce_scatter_tensor(output, input, op, group=self, async_op=True)`.
        pub fn reduce_scatter_tensor_async(
            &self,
            output: &Tensor,
            input: &Tensor,
            op: &str,
        ) -> Result<Work, DistError> {
            self.call_async("reduce_scatter_tensor", &[output, input], op, 0)
        }
        /// `all_to_all_single(output, input, group=self, async_op=True)`.
        pub fn all_to_all_single_async(
            &self,
            output: &Tensor,
            input: &Tensor,
        ) -> Result<Work, DistError> {
            self.call_async("all_to_all_single", &[output, input], "sum", 0)
        }
        /// `isend(tensor, dst, group=self)`: `dst` a world rank.
        pub fn isend(&self, t: &Tensor, dst: u32) -> Result<Work, DistError> {
            self.call_async("send", &[t], "sum", dst)
        }
        /// `irecv(tensor, src, group=self)`: `src` a world rank.
        pub fn irecv(&self, t: &Tensor, src: u32) -> Result<Work, DistError> {
            self.call_async("recv", &[t], "sum", src)
        }

        /// `all_reduce(tensor, op, group=self)`.
        pub fn all_reduce(&self, t: &Tensor, op: &str) -> Result<(), DistError> {
            self.call("all_reduce", &[t], op, 0)
        }
        /// `broadcast(tensor, src, group=self)`: `src` a world rank.
        pub fn broadcast(&self, t: &Tensor, src: u32) -> Result<(), DistError> {
            self.call("broadcast", &[t], "sum", src)
        }
        /// `reduce(tensor, dst, op, group=self)`: `dst` a world rank.
        pub fn reduce(&self, t: &Tensor, dst: u32, op: &str) -> Result<(), DistError> {
            self.call("reduce", &[t], op, dst)
        }
        /// `all_gather_into_tensor(output, input, group=self)`.
        pub fn all_gather_into_tensor(
            &self,
            output: &Tensor,
            input: &Tensor,
        ) -> Result<(), DistError> {
            self.call("all_gather_into_tensor", &[output, input], "sum", 0)
        }
        /// `all_gather(tensor_list, tensor, group=self)`.
        pub fn all_gather(&self, outputs: &[Tensor], input: &Tensor) -> Result<(), DistError> {
            let mut all = vec![input];
            all.extend(outputs.iter());
            self.call("all_gather", &all, "sum", 0)
        }
        /// `reduce_scatter_tensor(output, input, op, group=self)`.
        pub fn reduce_scatter_tensor(
            &self,
            output: &Tensor,
            input: &Tensor,
            op: &str,
        ) -> Result<(), DistError> {
            self.call("reduce_scatter_tensor", &[output, input], op, 0)
        }
        /// `reduce_scatter(output, input_list, op, group=self)`.
        pub fn reduce_scatter(
            &self,
            output: &Tensor,
            inputs: &[Tensor],
            op: &str,
        ) -> Result<(), DistError> {
            let mut all = vec![output];
            all.extend(inputs.iter());
            self.call("reduce_scatter", &all, op, 0)
        }
        /// `all_to_all_single(output, input, group=self)`, equal splits.
        pub fn all_to_all_single(&self, output: &Tensor, input: &Tensor) -> Result<(), DistError> {
            self.call("all_to_all_single", &[output, input], "sum", 0)
        }
        /// `send(tensor, dst, group=self)`: `dst` a world rank.
        pub fn send(&self, t: &Tensor, dst: u32) -> Result<(), DistError> {
            self.call("send", &[t], "sum", dst)
        }
        /// `recv(tensor, src, group=self)`: `src` a world rank.
        pub fn recv(&self, t: &Tensor, src: u32) -> Result<(), DistError> {
            self.call("recv", &[t], "sum", src)
        }
        /// `barrier(group=self)` (a no-op, as the default group's).
        pub fn barrier(&self) -> Result<(), DistError> {
            self.call("barrier", &[], "sum", 0)
        }
        /// nccl-tests' out-of-place form of `collective` on this group (see
        /// [`collective_out_of_place`]); `root` a world rank.
        pub fn collective_out_of_place(
            &self,
            collective: &str,
            output: &Tensor,
            input: &Tensor,
            op: &str,
            root: u32,
        ) -> Result<(), DistError> {
            self.call(
                &format!("out_of_place:{collective}"),
                &[output, input],
                op,
                root,
            )
        }
        /// nccl-tests' in-place form of `collective` on this group (see
        /// [`collective_in_place`]); `root` a world rank.
        pub fn collective_in_place(
            &self,
            collective: &str,
            t: &Tensor,
            op: &str,
            root: u32,
        ) -> Result<(), DistError> {
            self.call(&format!("in_place:{collective}"), &[t], op, root)
        }
    }
}

/// `torch.multiprocessing`.
pub mod mp {
    /// Run this bench's `worker` export for ranks `0..nprocs` concurrently;
    /// returns when all have finished.
    pub fn spawn(nprocs: u32, args: &[String]) -> Result<(), String> {
        super::raw::multiprocessing::spawn(nprocs, args)
    }
}

/// `torch.ahbm`: SIP binding and simulated time.
pub mod ahbm {
    use super::raw::ahbm as a;
    pub use a::DeviceProperties;
    pub fn set_device(device: u32) -> Result<(), String> {
        a::set_device(device)
    }
    /// `torch.cuda.get_device_properties(device)`: the cube mesh, PEs per
    /// cube and HBM of SIP `device`.
    pub fn get_device_properties(device: u32) -> Result<DeviceProperties, String> {
        a::get_device_properties(device)
    }
    pub fn current_device() -> Option<u32> {
        a::current_device()
    }
    pub fn device_count() -> u32 {
        a::device_count()
    }
    /// Simulated time in picoseconds.
    pub fn now_ps() -> u64 {
        a::now_ps()
    }
    /// An `[m, k] x [k, n]` GEMM of `dtype` charged to every matrix unit
    /// of the current device by the roofline (no data moves), after the
    /// rank's launches in flight: the picoseconds it took. Collectives in
    /// flight go on meanwhile.
    pub fn gemm(m: u32, n: u32, k: u32, dtype: crate::Dtype) -> Result<u64, String> {
        a::gemm(m, n, k, dtype.into())
    }
    /// Keep every matrix unit of the current device busy for `ns`
    /// nanoseconds (as [`gemm`]): the picoseconds it took.
    pub fn busy(ns: u64) -> Result<u64, String> {
        a::busy(ns)
    }
}

/// `torch.accelerator` (PyTorch 2.x device-agnostic alias of `torch.ahbm`).
pub mod accelerator {
    use super::raw::accelerator as a;
    pub fn set_device_index(device: u32) -> Result<(), String> {
        a::set_device_index(device)
    }
    pub fn current_device_index() -> Option<u32> {
        a::current_device_index()
    }
}

/// Rows for the host's nccl-tests-style report.
pub mod report {
    use super::raw::report as r;
    use crate::Dtype;

    /// One measured collective.
    #[derive(Debug, Clone)]
    pub struct Row {
        pub size_bytes: u64,
        pub count: u64,
        pub dtype: Dtype,
        pub redop: String,
        pub time_ps: u64,
        pub wrong: u64,
    }

    /// One measured kernel launch of a compute bench; the host adds the
    /// achieved FLOP/s, the peak of `pes` matrix units for `dtype` and the
    /// efficiency.
    #[derive(Debug, Clone)]
    pub struct KernelRow {
        pub name: String,
        pub shape: String,
        pub dtype: Dtype,
        pub pes: u32,
        pub flops: u64,
        pub time_ps: u64,
        /// Elements compared with the reference, and those off by more
        /// than `tolerance` (relative).
        pub checked: u64,
        pub wrong: u64,
        pub max_rel_err: f64,
        pub tolerance: f64,
    }

    /// Add a row to the compute table.
    pub fn record_kernel(row: &KernelRow) {
        r::record_kernel(&r::KernelRow {
            name: row.name.clone(),
            shape: row.shape.clone(),
            dtype: row.dtype.into(),
            pes: row.pes,
            flops: row.flops,
            time_ps: row.time_ps,
            checked: row.checked,
            wrong: row.wrong,
            max_rel_err: row.max_rel_err,
            tolerance: row.tolerance,
        })
    }

    /// False in a `--timing-only` run: the host keeps no bytes, so
    /// filling inputs and checking outputs would be wasted work.
    pub fn data_kept() -> bool {
        r::data_kept()
    }

    pub fn record(collective: &str, row: &Row) {
        r::record_result(
            collective,
            &r::ResultRow {
                size_bytes: row.size_bytes,
                count: row.count,
                dtype: row.dtype.into(),
                redop: row.redop.clone(),
                time_ps: row.time_ps,
                wrong: row.wrong,
            },
        )
    }

    /// One variant of a collective in a [`PerfRow`]: nccl-tests'
    /// out-of-place or in-place block.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Block {
        pub time_ps: u64,
        /// Wrong elements of this rank's output; None: not checked.
        pub wrong: Option<u64>,
    }

    /// How the host combines the ranks' times of a row (nccl-tests'
    /// `-a`: 0 rank 0, 1 mean, 2 min, 3 max).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Aggregation {
        Rank0,
        Mean,
        Min,
        Max,
    }

    /// One row of a collective bench in nccl-tests' layout.
    #[derive(Debug, Clone)]
    pub struct PerfRow {
        pub size_bytes: u64,
        pub count: u64,
        pub dtype: Dtype,
        /// The op; "none" for a collective that does not reduce.
        pub redop: String,
        /// broadcast / reduce: the root.
        pub root: Option<u32>,
        pub out_of_place: Option<Block>,
        pub in_place: Option<Block>,
        pub aggregation: Aggregation,
    }

    /// Add this rank's row for `collective`; the host merges the ranks'.
    pub fn record_perf(collective: &str, row: &PerfRow) {
        let block = |b: &Block| r::PerfBlock {
            time_ps: b.time_ps,
            wrong: b.wrong,
        };
        r::record_perf(
            collective,
            &r::PerfRow {
                size_bytes: row.size_bytes,
                count: row.count,
                dtype: row.dtype.into(),
                redop: row.redop.clone(),
                root: row.root,
                out_of_place: row.out_of_place.as_ref().map(block),
                in_place: row.in_place.as_ref().map(block),
                aggregation: match row.aggregation {
                    Aggregation::Rank0 => r::TimeAggregation::Rank0,
                    Aggregation::Mean => r::TimeAggregation::Mean,
                    Aggregation::Min => r::TimeAggregation::Min,
                    Aggregation::Max => r::TimeAggregation::Max,
                },
            },
        )
    }

    /// A line for the report's header (`# <text>`, once).
    pub fn note(text: &str) {
        r::note(text)
    }
}

/// Export a type implementing [`Bench`] as the component's `bench` world.
#[macro_export]
macro_rules! export_bench {
    ($ty:ty) => {
        $crate::__component_metadata!(bench);
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct __KernbenchBench;
            impl $crate::__bench::Guest for __KernbenchBench {
                fn run(
                    args: ::std::vec::Vec<::std::string::String>,
                ) -> ::std::result::Result<(), ::std::string::String> {
                    <$ty as $crate::Bench>::run(args)
                }
                fn worker(
                    rank: u32,
                    world_size: u32,
                    args: ::std::vec::Vec<::std::string::String>,
                ) -> ::std::result::Result<(), ::std::string::String> {
                    <$ty as $crate::Bench>::worker(rank, world_size, args)
                }
            }
            $crate::__bench::__export_bench_world!(__KernbenchBench);
        };
        #[cfg(not(target_arch = "wasm32"))]
        const _: (
            fn(
                ::std::vec::Vec<::std::string::String>,
            ) -> ::std::result::Result<(), ::std::string::String>,
            fn(
                u32,
                u32,
                ::std::vec::Vec<::std::string::String>,
            ) -> ::std::result::Result<(), ::std::string::String>,
        ) = (<$ty as $crate::Bench>::run, <$ty as $crate::Bench>::worker);
    };
}
