//! The bench side: `torch.*`, `torch.distributed`, `torch.multiprocessing`,
//! `torch.ahbm`, `torch.accelerator` and the result reporter, for one bench
//! instance (the driver or one spawned rank). This module holds the
//! instance's state ([`BenchHost`]) and its tensors; each WIT interface's
//! host functions are a file of their own, as wasmtime's WASI keeps them,
//! on the context of its capability ([`capabilities`]).

pub mod capabilities;
mod interfaces;

pub(crate) use capabilities::add_to_linker;

use super::bindings::bench::kernbench::sim::distributed;
use super::bindings::bench::BenchPre;
use super::comms::CollectiveTensor;
use super::kernel::dtype_in;
use super::limits::{Guarded, InstanceGuard};
use super::session::{Measured, ReportRecord, Session, TimeAggregation};
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
    /// Shared with the asynchronous calls that use it: a tensor the guest
    /// drops while a call is in flight is freed when the call ends.
    pub placed: Arc<PlacedTensor>,
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
    /// Every asynchronous call the instance made, in issue order: awaited
    /// when it returns (see [`super::works`]).
    pub(crate) works: Vec<Arc<super::works::WorkState>>,
    /// Every `launch-async` it made, in issue order (awaited likewise).
    pub(crate) launches: Vec<Arc<super::works::LaunchState>>,
    /// Its compute stream.
    pub(crate) compute: super::works::ComputeStream,
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

impl super::bindings::algorithm::kernbench::sim::types::Host for BenchHost {}
