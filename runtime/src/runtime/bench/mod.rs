//! The bench side: `torch.*`, `torch.distributed`, `torch.multiprocessing`,
//! `torch.ahbm`, `torch.accelerator` and the result reporter, for one bench
//! instance (the driver or one spawned rank). This module holds the
//! instance's state ([`BenchHost`]) and its tensors; each WIT interface's
//! host functions are a file of their own, as wasmtime's WASI keeps them.

mod interfaces;

use super::bindings::bench::kernbench::sim::distributed;
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
