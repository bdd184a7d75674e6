//! What each WIT interface of the bench world may touch of its instance:
//! one context per capability, lent by [`BenchHost`] for the length of a
//! call (wasmtime's `HasData` pattern, as its WASI lends
//! `WasiFilesystemCtxView` to the filesystem interfaces). `report` cannot
//! allocate a tensor, `torch` cannot join a collective, `ahbm` sees only
//! the device: a host function's signature says what it may change.
//!
//! | interface | context | it may touch |
//! |---|---|---|
//! | `torch` | [`TensorCtx`] | the instance's tensors, its device, its compute stream, the session (memory, limits, launches) |
//! | `distributed` | [`DistCtx`] | the instance's tensors (as collective arguments), its rank, the run's [`Comms`] |
//! | `multiprocessing` | [`SpawnCtx`] | its rank, the session |
//! | `ahbm`, `accelerator` | [`DeviceCtx`] | its current device, its compute stream, the machine (shape, clock, matrix units) |
//! | `report` | [`ReportCtx`] | its rank and name, the session's rows |

use super::{BenchHost, BenchTensor};
use crate::hw::Machine;
use crate::runtime::comms::{CollectiveTensor, Comms};
use crate::runtime::session::Session;
use crate::runtime::works::{ComputeStream, LaunchState};
use std::sync::Arc;
use wasmtime::component::{HasData, Resource, ResourceTable};

/// `torch`: tensors and kernel launches.
pub struct TensorCtx<'a> {
    pub(super) table: &'a mut ResourceTable,
    pub(super) session: &'a Arc<Session>,
    pub(super) device: Option<u32>,
    pub(super) rank: Option<u32>,
    /// The instance's compute stream and its launches in flight.
    pub(super) compute: &'a mut ComputeStream,
    pub(super) launches: &'a mut Vec<Arc<LaunchState>>,
}

/// `torch.distributed`: the process group and its collectives.
pub struct DistCtx<'a> {
    pub(super) table: &'a mut ResourceTable,
    pub(super) comms: &'a Arc<Comms>,
    /// `Some(rank)` inside a spawned worker; `None` in the driver.
    pub(super) rank: Option<u32>,
    /// The instance's asynchronous calls.
    pub(super) works: &'a mut Vec<Arc<crate::runtime::works::WorkState>>,
}

/// `torch.multiprocessing`: `spawn`.
pub struct SpawnCtx<'a> {
    pub(super) session: &'a Arc<Session>,
    pub(super) rank: Option<u32>,
}

/// `torch.ahbm` and `torch.accelerator`: the current device.
pub struct DeviceCtx<'a> {
    pub(super) device: &'a mut Option<u32>,
    pub(super) machine: &'a Arc<Machine>,
    /// The instance's compute stream (`gemm` and `busy` join it) and
    /// rank (its trace track).
    pub(super) compute: &'a mut ComputeStream,
    pub(super) rank: Option<u32>,
    pub(super) timelines: &'a crate::runtime::timeline::Timelines,
}

/// The result reporter.
pub struct ReportCtx<'a> {
    pub(super) session: &'a Session,
    pub(super) rank: Option<u32>,
    /// How errors name the instance (`bench`, `rank N`).
    pub(super) who: &'a str,
}

/// The `HasData` marker of each context, named for its capability.
pub struct Tensors;
pub struct Dist;
pub struct Spawn;
pub struct Devices;
pub struct Reports;

impl HasData for Tensors {
    type Data<'a> = TensorCtx<'a>;
}
impl HasData for Dist {
    type Data<'a> = DistCtx<'a>;
}
impl HasData for Spawn {
    type Data<'a> = SpawnCtx<'a>;
}
impl HasData for Devices {
    type Data<'a> = DeviceCtx<'a>;
}
impl HasData for Reports {
    type Data<'a> = ReportCtx<'a>;
}

impl BenchHost {
    /// `torch`'s view of this instance.
    pub fn tensors(&mut self) -> TensorCtx<'_> {
        TensorCtx {
            table: &mut self.table,
            session: &self.session,
            device: self.device,
            rank: self.rank,
            compute: &mut self.compute,
            launches: &mut self.launches,
        }
    }

    /// `torch.distributed`'s view.
    pub fn dist(&mut self) -> DistCtx<'_> {
        DistCtx {
            table: &mut self.table,
            comms: &self.session.comms,
            rank: self.rank,
            works: &mut self.works,
        }
    }

    /// `torch.multiprocessing`'s view.
    pub fn spawner(&mut self) -> SpawnCtx<'_> {
        SpawnCtx {
            session: &self.session,
            rank: self.rank,
        }
    }

    /// `torch.ahbm`'s and `torch.accelerator`'s view.
    pub fn devices(&mut self) -> DeviceCtx<'_> {
        DeviceCtx {
            device: &mut self.device,
            machine: &self.session.machine,
            compute: &mut self.compute,
            rank: self.rank,
            timelines: &self.session.timelines,
        }
    }

    /// The reporter's view.
    pub fn reports(&mut self) -> ReportCtx<'_> {
        ReportCtx {
            session: &self.session,
            rank: self.rank,
            who: self.guard.who(),
        }
    }
}

/// The tensor behind `r` in `table`.
pub(super) fn tensor<'t>(
    table: &'t ResourceTable,
    r: &Resource<BenchTensor>,
) -> wasmtime::Result<&'t BenchTensor> {
    Ok(table.get(r)?)
}

impl DistCtx<'_> {
    /// The tensor `r` as a collective's argument.
    pub(super) fn view(&self, r: &Resource<BenchTensor>) -> wasmtime::Result<CollectiveTensor> {
        Ok(tensor(self.table, r)?.collective_view())
    }

    /// The tensors of a list argument (`all_gather`'s outputs,
    /// `reduce_scatter`'s inputs), in order.
    pub(super) fn views(
        &self,
        list: &[Resource<BenchTensor>],
    ) -> wasmtime::Result<Vec<CollectiveTensor>> {
        list.iter().map(|r| self.view(r)).collect()
    }

    /// The memory of `list`'s tensors, kept by an asynchronous call until
    /// it ends.
    pub(super) fn keep(
        &self,
        list: &[Resource<BenchTensor>],
    ) -> wasmtime::Result<Vec<Arc<crate::hw::vmap::PlacedTensor>>> {
        list.iter()
            .map(|r| Ok(tensor(self.table, r)?.placed.clone()))
            .collect()
    }
}

impl DeviceCtx<'_> {
    /// `set_device`: refused, naming the devices there are, past the last
    /// SIP.
    pub(super) fn set_checked(&mut self, device: u32) -> Result<(), String> {
        let n = self.machine.topo.spec.n_sips();
        if device >= n {
            return Err(format!(
                "device {device} does not exist: the topology has {n} SIPs (devices 0..{})",
                n - 1
            ));
        }
        *self.device = Some(device);
        Ok(())
    }
}

/// Every interface of the bench world into `l`, each on its capability's
/// context (today's names; [`crate::runtime::shapes`] adds the earlier
/// ones the same way).
pub(crate) fn add_to_linker(
    l: &mut wasmtime::component::Linker<BenchHost>,
) -> wasmtime::Result<()> {
    use crate::runtime::bindings::bench::kernbench::sim::{
        accelerator, ahbm, distributed, multiprocessing, report, torch, types,
    };
    use wasmtime::component::HasSelf;
    types::add_to_linker::<BenchHost, HasSelf<BenchHost>>(l, |s| s)?;
    torch::add_to_linker::<BenchHost, Tensors>(l, BenchHost::tensors)?;
    distributed::add_to_linker::<BenchHost, Dist>(l, BenchHost::dist)?;
    multiprocessing::add_to_linker::<BenchHost, Spawn>(l, BenchHost::spawner)?;
    ahbm::add_to_linker::<BenchHost, Devices>(l, BenchHost::devices)?;
    accelerator::add_to_linker::<BenchHost, Devices>(l, BenchHost::devices)?;
    report::add_to_linker::<BenchHost, Reports>(l, BenchHost::reports)?;
    Ok(())
}
