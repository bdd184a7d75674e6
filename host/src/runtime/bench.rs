//! The bench side: `torch.*`, `torch.distributed`, `torch.multiprocessing`,
//! `torch.ahbm`, `torch.accelerator` and the result reporter, for one bench
//! instance (the driver or one spawned rank).

use super::bindings::bench::kernbench::sim::{
    accelerator, ahbm, distributed, multiprocessing, report, torch,
};
use super::bindings::bench::BenchPre;
use super::kernel::dtype_in;
use super::limits::{Guarded, InstanceGuard};
use super::session::{CollectiveTensor, Measured, ReportRecord, Session, TimeAggregation};
use crate::hw::dtype::Dtype;
use crate::hw::vmap::PlacedTensor;
use crate::hw::Machine;
use crate::placement::{self, DpMode, DpPolicy};
use std::sync::Arc;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::fail::{to_wit, DistFail, DistResult, MsgResult};
use distributed::DistError;

/// The host object behind a guest `torch.tensor`: its shards in their
/// cubes' HBM on its device (SIP), mapped as one virtual range; freed when
/// the guest drops it.
pub struct BenchTensor {
    pub placed: PlacedTensor,
    pub shape: Vec<u32>,
    pub dtype: Dtype,
    pub name: String,
}

impl BenchTensor {
    pub fn numel(&self) -> u64 {
        self.shape.iter().map(|&d| d as u64).product()
    }

    pub fn nbytes(&self) -> u64 {
        self.numel() * self.dtype.itemsize()
    }

    /// The SIP the tensor lives on.
    pub fn sip(&self) -> u32 {
        self.placed.sip
    }

    /// Width of the tensor seen as 2-D (its last dimension).
    fn cols(&self) -> u32 {
        self.shape.last().copied().unwrap_or(1)
    }

    /// What a collective needs to know of the tensor.
    fn collective_view(&self) -> CollectiveTensor {
        CollectiveTensor::of_placed(&self.placed, self.dtype, self.numel())
    }

    /// Host-side write of element bytes from element `first`, to every
    /// shard that holds them.
    fn write(&self, machine: &Machine, first: u64, bytes: &[u8]) -> Result<(), String> {
        let item = self.dtype.itemsize();
        let count = bytes.len() as u64 / item;
        let specs = &self.placed.specs;
        for p in placement::pieces(specs, self.cols(), (first, count), true) {
            let block = &self.placed.blocks[p.shard];
            let at = ((p.tensor_elem - first) * item) as usize;
            machine
                .host_write(
                    block.space,
                    block.offset + p.shard_elem * item,
                    &bytes[at..at + (p.count * item) as usize],
                )
                .map_err(|e| format!("tensor '{}': {e}", self.name))?;
        }
        Ok(())
    }

    /// Host-side read of `count` elements from element `first`, each from
    /// the first shard holding it.
    fn read(&self, machine: &Machine, first: u64, count: u64) -> Vec<u8> {
        let item = self.dtype.itemsize();
        let mut out = Vec::with_capacity((count * item) as usize);
        for p in placement::pieces(&self.placed.specs, self.cols(), (first, count), false) {
            let block = &self.placed.blocks[p.shard];
            out.extend(machine.host_read(
                block.space,
                block.offset + p.shard_elem * item,
                p.count * item,
            ));
        }
        out
    }
}

/// A loaded bench component, ready to instantiate.
#[derive(Clone)]
pub struct BenchComponent {
    pub name: String,
    /// The earlier snapshot of the interface it was built against, served
    /// by adapters ([`super::shapes`]); none for today's.
    pub snapshot: Option<&'static str>,
    pub pre: BenchPre<BenchHost>,
}

/// Store data of one bench instance.
pub struct BenchHost {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) session: Arc<Session>,
    /// `Some(rank)` inside a spawned worker; `None` in the driver (rank 0).
    pub(crate) rank: Option<u32>,
    pub(crate) device: Option<u32>,
    pub(crate) guard: InstanceGuard,
}

impl Guarded for BenchHost {
    fn guard(&mut self) -> &mut InstanceGuard {
        &mut self.guard
    }
}

impl WasiView for BenchHost {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl BenchHost {
    fn tensor(&self, r: &Resource<BenchTensor>) -> wasmtime::Result<&BenchTensor> {
        Ok(self.table.get(r)?)
    }

    /// The tensor `r` as a collective's argument.
    fn view(&self, r: &Resource<BenchTensor>) -> wasmtime::Result<CollectiveTensor> {
        Ok(self.tensor(r)?.collective_view())
    }

    /// `tensor.copy_(...)`: write `bytes` if the guest gave `got` of the
    /// `want` units (bytes or elements) the tensor holds.
    fn write_checked(
        &self,
        r: &Resource<BenchTensor>,
        bytes: &[u8],
        got: u64,
        want: u64,
        unit: &str,
    ) -> MsgResult<()> {
        let bt = self.table.get(r)?;
        if got != want {
            let e = format!("copy_: tensor '{}' has {want} {unit}, got {got}", bt.name);
            return Err(e.into());
        }
        bt.write(&self.session.machine, 0, bytes)
            .map_err(|e| format!("copy_: {e}"))?;
        Ok(())
    }

    /// Read elements `[first, first + count)` of a tensor for the guest,
    /// refusing (a trap naming the tensor) what could never fit the guest's
    /// memory: `per_elem` is the size of one element as the guest receives
    /// it.
    fn read_for_guest(
        &self,
        r: &Resource<BenchTensor>,
        call: &str,
        (first, count): (u64, u64),
        per_elem: u64,
    ) -> wasmtime::Result<Vec<u8>> {
        let bt = self.table.get(r)?;
        let cap = self.session.limits.instance.max_memory;
        let size = count.saturating_mul(per_elem);
        if size > cap {
            return Err(wasmtime::Error::msg(format!(
                "{call} of tensor '{}' ({count} elements) would return {}, more than the {} of guest memory an instance may have; \
                 read it in pieces (tensor.to_f64_range) or raise --max-guest-memory",
                bt.name,
                crate::budget::human_bytes(size),
                crate::budget::human_bytes(cap)
            )));
        }
        Ok(bt.read(&self.session.machine, first, count))
    }

    /// `Err` naming the tensor unless `[offset, offset + count)` lies
    /// within its elements.
    fn element_range(
        &self,
        r: &Resource<BenchTensor>,
        call: &str,
        offset: u64,
        count: u64,
    ) -> MsgResult<()> {
        let bt = self.table.get(r)?;
        let numel = bt.numel();
        match offset.checked_add(count) {
            Some(end) if end <= numel => Ok(()),
            _ => Err(format!(
                "{call}: elements {offset}..{offset}+{count} are outside tensor '{}' ({numel} elements)",
                bt.name
            )
            .into()),
        }
    }

    fn set_device_checked(&mut self, device: u32) -> Result<(), String> {
        let n = self.session.machine.topo.spec.n_sips();
        if device >= n {
            return Err(format!(
                "device {device} does not exist: the topology has {n} SIPs (devices 0..{})",
                n - 1
            ));
        }
        self.device = Some(device);
        Ok(())
    }
}

impl super::bindings::algorithm::kernbench::sim::types::Host for BenchHost {}

impl torch::HostTensor for BenchHost {
    async fn shards(
        &mut self,
        r: Resource<BenchTensor>,
    ) -> wasmtime::Result<Vec<torch::ShardSpec>> {
        Ok(self
            .tensor(&r)?
            .placed
            .specs
            .iter()
            .map(|s| torch::ShardSpec {
                sip: s.sip,
                cube: s.cube,
                pe: s.pe,
                row_start: s.rows.start,
                rows: s.rows.len() as u32,
                col_start: s.cols.start,
                cols: s.cols.len() as u32,
                offset_bytes: s.offset_bytes,
                nbytes: s.nbytes,
            })
            .collect())
    }
    async fn data_ptr(&mut self, r: Resource<BenchTensor>) -> wasmtime::Result<u64> {
        Ok(self.tensor(&r)?.placed.addr())
    }
    async fn shape(&mut self, r: Resource<BenchTensor>) -> wasmtime::Result<Vec<u32>> {
        Ok(self.tensor(&r)?.shape.clone())
    }
    async fn dtype(&mut self, r: Resource<BenchTensor>) -> wasmtime::Result<torch::Dtype> {
        Ok(super::kernel::dtype_out(self.tensor(&r)?.dtype))
    }
    async fn numel(&mut self, r: Resource<BenchTensor>) -> wasmtime::Result<u64> {
        Ok(self.tensor(&r)?.numel())
    }
    async fn nbytes(&mut self, r: Resource<BenchTensor>) -> wasmtime::Result<u64> {
        Ok(self.tensor(&r)?.nbytes())
    }
    async fn device(&mut self, r: Resource<BenchTensor>) -> wasmtime::Result<u32> {
        Ok(self.tensor(&r)?.sip())
    }
    async fn copy_from_bytes(
        &mut self,
        r: Resource<BenchTensor>,
        data: Vec<u8>,
    ) -> wasmtime::Result<Result<(), String>> {
        let want = self.tensor(&r)?.nbytes();
        to_wit(self.write_checked(&r, &data, data.len() as u64, want, "bytes"))
    }
    async fn copy_from_f64(
        &mut self,
        r: Resource<BenchTensor>,
        data: Vec<f64>,
    ) -> wasmtime::Result<Result<(), String>> {
        let t = self.tensor(&r)?;
        let (bytes, want) = (t.dtype.from_f64(&data), t.numel());
        to_wit(self.write_checked(&r, &bytes, data.len() as u64, want, "elements"))
    }
    async fn to_bytes(&mut self, r: Resource<BenchTensor>) -> wasmtime::Result<Vec<u8>> {
        let t = self.tensor(&r)?;
        let (all, item) = ((0, t.numel()), t.dtype.itemsize());
        self.read_for_guest(&r, "tensor.to_bytes()", all, item)
    }
    async fn to_f64(&mut self, r: Resource<BenchTensor>) -> wasmtime::Result<Vec<f64>> {
        let t = self.tensor(&r)?;
        let (all, dtype) = ((0, t.numel()), t.dtype);
        Ok(dtype.to_f64(&self.read_for_guest(&r, "tensor.to_f64()", all, 8)?))
    }
    async fn copy_from_f64_at(
        &mut self,
        r: Resource<BenchTensor>,
        offset: u64,
        data: Vec<f64>,
    ) -> wasmtime::Result<Result<(), String>> {
        let call = "copy_from_f64_at";
        to_wit((|| {
            self.element_range(&r, call, offset, data.len() as u64)?;
            let bt = self.table.get(&r)?;
            bt.write(&self.session.machine, offset, &bt.dtype.from_f64(&data))
                .map_err(|e| format!("{call}: {e}"))?;
            Ok(())
        })())
    }
    async fn to_f64_range(
        &mut self,
        r: Resource<BenchTensor>,
        offset: u64,
        count: u64,
    ) -> wasmtime::Result<Result<Vec<f64>, String>> {
        let call = "tensor.to_f64_range()";
        to_wit((|| {
            self.element_range(&r, call, offset, count)?;
            let dtype = self.tensor(&r)?.dtype;
            let bytes = self.read_for_guest(&r, call, (offset, count), 8)?;
            Ok(dtype.to_f64(&bytes))
        })())
    }
    async fn drop(&mut self, r: Resource<BenchTensor>) -> wasmtime::Result<()> {
        self.table.delete(r)?;
        Ok(())
    }
}

fn dp_mode_in(m: torch::DpMode) -> DpMode {
    match m {
        torch::DpMode::Replicate => DpMode::Replicate,
        torch::DpMode::RowWise => DpMode::RowWise,
        torch::DpMode::ColumnWise => DpMode::ColumnWise,
        torch::DpMode::Tiled => DpMode::Tiled,
    }
}

impl torch::Host for BenchHost {
    async fn launch(
        &mut self,
        kernel: String,
        t: Resource<BenchTensor>,
        args: Vec<i64>,
    ) -> wasmtime::Result<Result<u64, String>> {
        let t = self.tensor(&t)?;
        let target = super::launch::LaunchTarget {
            sip: t.sip(),
            t_ptr: t.placed.addr(),
            shard_pes: t.placed.specs.iter().map(|s| (s.cube, s.pe)).collect(),
        };
        let s = self.session.clone();
        Ok(s.launch(self.device, &kernel, target, args).await)
    }

    async fn zeros(
        &mut self,
        shape: Vec<u32>,
        dtype: torch::Dtype,
        dp: Option<torch::DpPolicy>,
        name: String,
    ) -> wasmtime::Result<Result<Resource<BenchTensor>, String>> {
        // ADR-0024 D4: the current device, or SIP 0 (single-driver fallback).
        let sip = self.device.unwrap_or(0);
        let dtype = dtype_in(dtype);
        let dp = dp.map_or(DpPolicy::SINGLE, |p| DpPolicy {
            cube: dp_mode_in(p.cube),
            pe: dp_mode_in(p.pe),
            num_cubes: p.num_cubes,
            num_pes: p.num_pes,
        });
        let call = || {
            format!(
                "torch.zeros({shape:?}, dtype={}, name='{name}')",
                dtype.name()
            )
        };
        let machine = &self.session.machine;
        let placed = (|| -> MsgResult<_> {
            dtype
                .nbytes(&shape)
                .map_err(|e| format!("{}: {e}", call()))?;
            let specs = placement::resolve(&dp, &shape, dtype.itemsize(), sip, &machine.topo.spec)
                .map_err(|e| format!("{}: ValueError: {e}", call()))?;
            // Allocated memory reads as zero and costs nothing until written.
            Ok(machine
                .place_tensor(specs, dtype, &name)
                .map_err(|e| format!("{}: {e}", call()))?)
        })();
        to_wit(placed.and_then(|placed| {
            let tensor = BenchTensor {
                placed,
                shape,
                dtype,
                name,
            };
            Ok(self.table.push(tensor)?)
        }))
    }

    async fn version(&mut self) -> wasmtime::Result<String> {
        Ok(crate::components::compat::host_description())
    }
}

impl distributed::Host for BenchHost {
    fn convert_dist_error(&mut self, err: DistFail) -> wasmtime::Result<DistError> {
        err.into_wit()
    }
    async fn init_process_group(
        &mut self,
        backend: String,
        _world_size: Option<u32>,
        _rank: Option<u32>,
        options: Option<distributed::PgOptions>,
    ) -> DistResult {
        // D2: world_size / rank arguments are accepted and ignored.
        let s = self.session.clone();
        let wanted = options.and_then(|o| o.algorithm);
        Ok(s.init_process_group(&backend, wanted.as_deref()).await?)
    }
    async fn is_initialized(&mut self) -> wasmtime::Result<bool> {
        Ok(self.session.process_group().is_ok())
    }
    async fn get_rank(&mut self) -> DistResult<u32> {
        self.session.process_group()?;
        Ok(self.rank.unwrap_or(0))
    }
    async fn get_world_size(&mut self) -> DistResult<u32> {
        Ok(self.session.process_group()?.world_size)
    }
    async fn get_backend(&mut self) -> DistResult<String> {
        self.session.process_group()?;
        Ok("ahbm".to_string())
    }
    async fn all_reduce(&mut self, t: Resource<BenchTensor>, op: String) -> DistResult {
        let tensor = self.view(&t)?;
        let s = self.session.clone();
        s.all_reduce(self.rank, tensor, &op).await
    }
    async fn broadcast(&mut self, t: Resource<BenchTensor>, src: u32) -> DistResult {
        let tensor = self.view(&t)?;
        let s = self.session.clone();
        s.broadcast(self.rank, tensor, src).await
    }
    async fn reduce(&mut self, t: Resource<BenchTensor>, dst: u32, op: String) -> DistResult {
        let tensor = self.view(&t)?;
        let s = self.session.clone();
        s.reduce(self.rank, tensor, dst, &op).await
    }
    async fn all_gather_into_tensor(
        &mut self,
        output: Resource<BenchTensor>,
        input: Resource<BenchTensor>,
    ) -> DistResult {
        let (o, i) = (self.view(&output)?, self.view(&input)?);
        let s = self.session.clone();
        s.all_gather_into_tensor(self.rank, o, i).await
    }
    async fn all_gather(
        &mut self,
        outputs: Vec<Resource<BenchTensor>>,
        input: Resource<BenchTensor>,
    ) -> DistResult {
        let outs = outputs
            .iter()
            .map(|o| self.view(o))
            .collect::<wasmtime::Result<Vec<_>>>()?;
        let i = self.view(&input)?;
        let s = self.session.clone();
        s.all_gather_list(self.rank, outs, i).await
    }
    async fn reduce_scatter_tensor(
        &mut self,
        output: Resource<BenchTensor>,
        input: Resource<BenchTensor>,
        op: String,
    ) -> DistResult {
        let (o, i) = (self.view(&output)?, self.view(&input)?);
        let s = self.session.clone();
        s.reduce_scatter_tensor(self.rank, o, i, &op).await
    }
    async fn reduce_scatter(
        &mut self,
        output: Resource<BenchTensor>,
        inputs: Vec<Resource<BenchTensor>>,
        op: String,
    ) -> DistResult {
        let o = self.view(&output)?;
        let ins = inputs
            .iter()
            .map(|i| self.view(i))
            .collect::<wasmtime::Result<Vec<_>>>()?;
        let s = self.session.clone();
        s.reduce_scatter_list(self.rank, o, ins, &op).await
    }
    async fn all_to_all_single(
        &mut self,
        output: Resource<BenchTensor>,
        input: Resource<BenchTensor>,
    ) -> DistResult {
        let (o, i) = (self.view(&output)?, self.view(&input)?);
        let s = self.session.clone();
        s.all_to_all_single(self.rank, o, i).await
    }
    async fn send(&mut self, t: Resource<BenchTensor>, dst: u32) -> DistResult {
        let tensor = self.view(&t)?;
        let s = self.session.clone();
        s.send(self.rank, tensor, dst).await
    }
    async fn recv(&mut self, t: Resource<BenchTensor>, src: u32) -> DistResult {
        let tensor = self.view(&t)?;
        let s = self.session.clone();
        s.recv(self.rank, tensor, src).await
    }
    async fn barrier(&mut self) -> DistResult {
        // D6: a no-op once initialised (all ranks share one simulator).
        self.session.process_group()?;
        Ok(())
    }
    async fn shards_wanted(&mut self, collective: String) -> DistResult<Option<u32>> {
        let s = self.session.clone();
        Ok(s.shards_wanted(&collective).await?)
    }
    async fn collective_out_of_place(
        &mut self,
        collective: String,
        output: Resource<BenchTensor>,
        input: Resource<BenchTensor>,
        op: String,
        root: u32,
    ) -> DistResult {
        let (o, i) = (self.view(&output)?, self.view(&input)?);
        let s = self.session.clone();
        s.collective_out_of_place(self.rank, &collective, o, i, &op, root)
            .await
    }
    async fn collective_in_place(
        &mut self,
        collective: String,
        t: Resource<BenchTensor>,
        op: String,
        root: u32,
    ) -> DistResult {
        let tensor = self.view(&t)?;
        let s = self.session.clone();
        s.collective_in_place(self.rank, &collective, tensor, &op, root)
            .await
    }
}

impl multiprocessing::Host for BenchHost {
    async fn spawn(
        &mut self,
        nprocs: u32,
        args: Vec<String>,
    ) -> wasmtime::Result<Result<(), String>> {
        if self.rank.is_some() {
            let e = "multiprocessing.spawn called from inside a spawned worker";
            return to_wit(Err(e.to_string().into()));
        }
        let s = self.session.clone();
        Ok(s.spawn_workers(nprocs, args).await)
    }
}

impl ahbm::Host for BenchHost {
    async fn set_device(&mut self, device: u32) -> wasmtime::Result<Result<(), String>> {
        Ok(self.set_device_checked(device))
    }
    async fn current_device(&mut self) -> wasmtime::Result<Option<u32>> {
        Ok(self.device)
    }
    async fn device_count(&mut self) -> wasmtime::Result<u32> {
        Ok(self.session.machine.topo.spec.n_sips())
    }
    async fn get_device_properties(
        &mut self,
        device: u32,
    ) -> wasmtime::Result<Result<ahbm::DeviceProperties, String>> {
        let spec = &self.session.machine.topo.spec;
        if device >= spec.n_sips() {
            let e = format!(
                "invalid device {device}: this machine has {} SIPs (0..{})",
                spec.n_sips(),
                spec.n_sips()
            );
            return to_wit(Err(e.into()));
        }
        Ok(Ok(ahbm::DeviceProperties {
            name: format!("sip{device}"),
            cube_w: spec.sip.cube_mesh.w,
            cube_h: spec.sip.cube_mesh.h,
            pes_per_cube: spec.pes_per_cube(),
            hbm_bytes_per_cube: spec.hbm_stack_bytes() * spec.cube.hbm.stacks as u64,
        }))
    }
    async fn now_ps(&mut self) -> wasmtime::Result<u64> {
        Ok(crate::engine::now())
    }
}

impl accelerator::Host for BenchHost {
    async fn set_device_index(&mut self, device: u32) -> wasmtime::Result<Result<(), String>> {
        Ok(self.set_device_checked(device))
    }
    async fn current_device_index(&mut self) -> wasmtime::Result<Option<u32>> {
        Ok(self.device)
    }
}

impl report::Host for BenchHost {
    async fn record_result(
        &mut self,
        collective: String,
        row: report::ResultRow,
    ) -> wasmtime::Result<()> {
        let what = (
            collective,
            row.size_bytes,
            row.count,
            dtype_in(row.dtype),
            row.redop,
        );
        let rec = ReportRecord::one_block(what, self.rank, row.time_ps, row.wrong);
        self.session
            .record(rec, self.guard.who())
            .map_err(wasmtime::Error::msg)
    }

    async fn record_perf(
        &mut self,
        collective: String,
        row: report::PerfRow,
    ) -> wasmtime::Result<()> {
        let block = |b: report::PerfBlock| Measured {
            time_ps: b.time_ps,
            wrong: b.wrong,
        };
        let aggregation = match row.aggregation {
            report::TimeAggregation::Rank0 => TimeAggregation::Rank0,
            report::TimeAggregation::Mean => TimeAggregation::Mean,
            report::TimeAggregation::Min => TimeAggregation::Min,
            report::TimeAggregation::Max => TimeAggregation::Max,
        };
        let rec = ReportRecord::new(
            (
                collective,
                row.size_bytes,
                row.count,
                dtype_in(row.dtype),
                row.redop,
            ),
            row.root,
            self.rank,
            row.out_of_place.map(block),
            row.in_place.map(block),
            aggregation,
        );
        self.session
            .record(rec, self.guard.who())
            .map_err(wasmtime::Error::msg)
    }

    async fn note(&mut self, text: String) -> wasmtime::Result<()> {
        self.session
            .note(text, self.guard.who())
            .map_err(wasmtime::Error::msg)
    }

    async fn data_kept(&mut self) -> wasmtime::Result<bool> {
        Ok(self.session.machine.keeps_bytes())
    }

    async fn record_kernel(&mut self, row: report::KernelRow) -> wasmtime::Result<()> {
        let dtype = dtype_in(row.dtype);
        let make = |unit_peak| {
            crate::kernel_report::KernelRow::new(
                (row.name, row.shape, dtype),
                row.pes,
                row.flops,
                row.time_ps,
                (row.checked, row.wrong, row.max_rel_err, row.tolerance),
                unit_peak,
            )
        };
        self.session
            .record_kernel(make, dtype, self.guard.who())
            .map_err(wasmtime::Error::msg)
    }
}
