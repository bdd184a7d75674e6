//! `torch`: tensors (`torch.zeros`, the tensor resource's methods) and kernel launches (`torch.launch`).

use crate::runtime::bench::capabilities::{tensor, TensorCtx};
use crate::runtime::bench::*;
use crate::runtime::bindings::bench::kernbench::sim::torch;
use crate::runtime::works::{LaunchState, Launched};

impl TensorCtx<'_> {
    fn tensor(&self, r: &Resource<BenchTensor>) -> wasmtime::Result<&BenchTensor> {
        tensor(self.table, r)
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
        let bt = self.tensor(r)?;
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
        let bt = self.tensor(r)?;
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
        let bt = self.tensor(r)?;
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
}

impl torch::HostLaunched for TensorCtx<'_> {
    async fn wait(&mut self, l: Resource<Launched>) -> wasmtime::Result<Result<u64, String>> {
        let state = self.table.get(&l)?.0.clone();
        Ok(state.outcome().await)
    }
    async fn is_completed(&mut self, l: Resource<Launched>) -> wasmtime::Result<bool> {
        let state = self.table.get(&l)?.0.clone();
        Ok(state.is_completed() || {
            crate::engine::sleep(crate::runtime::works::POLL_NS * 1000).await;
            false
        })
    }
    async fn drop(&mut self, l: Resource<Launched>) -> wasmtime::Result<()> {
        // The launch runs on; the instance's list keeps its state.
        self.table.delete(l)?;
        Ok(())
    }
}

impl TensorCtx<'_> {
    /// Where a launch on `t` runs.
    fn launch_target(
        &self,
        t: &Resource<BenchTensor>,
    ) -> wasmtime::Result<crate::runtime::launch::LaunchTarget> {
        let t = self.tensor(t)?;
        Ok(crate::runtime::launch::LaunchTarget {
            sip: t.sip(),
            t_ptr: t.placed.addr(),
            shard_pes: t.placed.specs.iter().map(|s| (s.cube, s.pe)).collect(),
        })
    }
}

impl torch::HostTensor for TensorCtx<'_> {
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
        Ok(crate::runtime::kernel::dtype_out(self.tensor(&r)?.dtype))
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

impl torch::Host for TensorCtx<'_> {
    async fn launch(
        &mut self,
        kernel: String,
        t: Resource<BenchTensor>,
        args: Vec<i64>,
    ) -> wasmtime::Result<Result<u64, String>> {
        let target = self.launch_target(&t)?;
        let s = self.session.clone();
        if let Some(e) = self.compute.pending() {
            // After the launches in flight on the rank's compute stream.
            e.wait().await;
        }
        Ok(s.launch((self.rank, self.device), &kernel, target, args)
            .await)
    }

    async fn launch_async(
        &mut self,
        kernel: String,
        t: Resource<BenchTensor>,
        args: Vec<i64>,
    ) -> wasmtime::Result<Result<Resource<Launched>, String>> {
        let target = self.launch_target(&t)?;
        let keep = self.tensor(&t)?.placed.clone();
        let s = self.session.clone();
        let prepared = match s.prepare_launch((self.rank, self.device), &kernel, target) {
            Ok(p) => p,
            Err(e) => return Ok(Err(e)),
        };
        if s.machine.partitions() > 1 {
            let why = "torch.launch-async overlaps kernels with the rank's other work".to_string();
            s.machine.give_up_split(why.clone());
            return Ok(Err(format!("split run given up: {why}")));
        }
        let state = LaunchState::new(format!("launch of '{kernel}'"));
        let after = self.compute.enqueue(state.done());
        let st = state.clone();
        crate::engine::spawn_detached(async move {
            if let Some(e) = after {
                e.wait().await;
            }
            let r = s.run_launch(prepared, args).await;
            drop(keep);
            st.end(r);
        });
        self.launches.push(state.clone());
        Ok(Ok(self.table.push(Launched(state))?))
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
                placed: Arc::new(placed),
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
