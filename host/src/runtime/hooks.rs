//! The setup-time exports of an algorithm component, called on one
//! instance of it outside any kernel: `collectives` and `kernel-args-for`
//! (which collectives it implements, and its arguments for one call),
//! `kernel-args` / `kernel-args-with` (seed 004 D4), `topo-name-to-kind`
//! (ADR-0050 D1), `entry-defaults` and `neighbors` (seed 003 §3). Each optional export falls back to what the
//! WIT says when a component does not export it.

use super::bindings::algorithm::kernbench::sim::ccl;
use super::bindings::algorithm::Algorithm;
use super::console::FlushOnDrop;
use super::describe_guest_error;
use super::kernel::{AlgorithmComponent, KernelHost};
use super::limits::RunLimits;
use super::wasi::Output;
use crate::ccl::collective::{Call, Collective, RedOp};
use crate::ccl::tables::Link;
use crate::config::ccl::{EntryDefaultNames, EntryDefaults, ParamValue};
use crate::error::SimError;
use crate::hw::Machine;
use crate::topology::PeCoord;
use std::sync::Arc;
use wasmtime::component::Instance;
use wasmtime::Store;

/// The optional export mapping SIP topology names to kinds.
const TOPO_EXPORT: &str = "topo-name-to-kind";
const ARGS_WITH_EXPORT: &str = "kernel-args-with";
const DEFAULTS_EXPORT: &str = "entry-defaults";
const NEIGHBORS_EXPORT: &str = "neighbors";
const COLLECTIVES_EXPORT: &str = "collectives";
const ARGS_FOR_EXPORT: &str = "kernel-args-for";

fn collective_in(c: ccl::Collective) -> Collective {
    match c {
        ccl::Collective::AllReduce => Collective::AllReduce,
        ccl::Collective::Broadcast => Collective::Broadcast,
        ccl::Collective::Reduce => Collective::Reduce,
        ccl::Collective::AllGather => Collective::AllGather,
        ccl::Collective::ReduceScatter => Collective::ReduceScatter,
        ccl::Collective::AllToAll => Collective::AllToAll,
    }
}

fn collective_out(c: Collective) -> ccl::Collective {
    match c {
        Collective::AllReduce => ccl::Collective::AllReduce,
        Collective::Broadcast => ccl::Collective::Broadcast,
        Collective::Reduce => ccl::Collective::Reduce,
        Collective::AllGather => ccl::Collective::AllGather,
        Collective::ReduceScatter => ccl::Collective::ReduceScatter,
        Collective::AllToAll => ccl::Collective::AllToAll,
    }
}

fn red_op_out(o: RedOp) -> ccl::RedOp {
    match o {
        RedOp::Sum => ccl::RedOp::Sum,
        RedOp::Prod => ccl::RedOp::Prod,
        RedOp::Max => ccl::RedOp::Max,
        RedOp::Min => ccl::RedOp::Min,
        RedOp::Avg => ccl::RedOp::Avg,
    }
}

/// One instance of an algorithm, for its setup-time exports.
pub struct AlgorithmHooks {
    name: String,
    store: Store<KernelHost>,
    instance: Instance,
    algo: Algorithm,
    out: Output,
    _flush: FlushOnDrop,
}

impl AlgorithmComponent {
    /// A fresh instance for the setup-time exports (it runs no kernel: a
    /// `tl` call from it fails as a call of PE sip0.cube0.pe0).
    pub async fn hooks(
        &self,
        machine: &Arc<Machine>,
        limits: &RunLimits,
    ) -> Result<AlgorithmHooks, SimError> {
        let pe = PeCoord {
            sip: 0,
            cube: 0,
            pe: 0,
        };
        let (mut store, out) = self
            .store(machine, limits, pe, u64::MAX)
            .map_err(|e| self.failed("(setup)", pe, &e, None))?;
        let flush = FlushOnDrop::new(format!("{} setup", self.name), out.clone());
        let made = async {
            let instance = self
                .pre
                .instance_pre()
                .instantiate_async(&mut store)
                .await?;
            let algo = Algorithm::new(&mut store, &instance)?;
            wasmtime::Result::Ok((instance, algo))
        }
        .await;
        let (instance, algo) = made.map_err(|e| SimError::Component {
            name: self.name.clone(),
            message: describe_guest_error(&e, &out),
        })?;
        Ok(AlgorithmHooks {
            name: self.name.clone(),
            store,
            instance,
            algo,
            out,
            _flush: flush,
        })
    }
}

/// A parameter as the WIT carries it.
fn param_out((name, value): &(String, ParamValue)) -> ccl::Param {
    ccl::Param {
        name: name.clone(),
        value: match value {
            ParamValue::Int(v) => ccl::ParamValue::Int(*v),
            ParamValue::Float(v) => ccl::ParamValue::Float(*v),
            ParamValue::Text(v) => ccl::ParamValue::Text(v.clone()),
            ParamValue::Flag(v) => ccl::ParamValue::Flag(*v),
        },
    }
}

impl AlgorithmHooks {
    fn guest_error(&self, e: wasmtime::Error) -> SimError {
        SimError::Component {
            name: self.name.clone(),
            message: describe_guest_error(&e, &self.out),
        }
    }

    /// The algorithm's own refusal (an `Err` its export returned).
    fn refused(&self, export: &str, message: String) -> SimError {
        SimError::Component {
            name: self.name.clone(),
            message: format!("{export}: {message}"),
        }
    }

    fn exports(&mut self, name: &str) -> bool {
        self.instance
            .get_export_index(&mut self.store, None, name)
            .is_some()
    }

    /// The kernel's positional arguments for `params` (ccl.yaml's). A
    /// component without `kernel-args-with` takes no parameters.
    pub async fn kernel_args(
        &mut self,
        world_size: u32,
        n_elem: u64,
        (cube_w, cube_h): (u32, u32),
        params: &[(String, ParamValue)],
    ) -> Result<Vec<i64>, ArgsError> {
        if !self.exports(ARGS_WITH_EXPORT) {
            if let Some((name, _)) = params.first() {
                return Err(ArgsError::Refused(self.refused(
                    "kernel-args",
                    format!(
                        "ccl.yaml gives the parameter {name}, but this algorithm takes none \
                         (it does not export {ARGS_WITH_EXPORT})"
                    ),
                )));
            }
            return self
                .algo
                .call_kernel_args(&mut self.store, world_size, n_elem, cube_w, cube_h)
                .await
                .map_err(|e| ArgsError::Failed(self.guest_error(e)));
        }
        let wit: Vec<ccl::Param> = params.iter().map(param_out).collect();
        type Args<'a> = (u32, u64, u32, u32, &'a [ccl::Param]);
        let called = async {
            let f = self
                .instance
                .get_typed_func::<Args, (Result<Vec<i64>, String>,)>(
                    &mut self.store,
                    ARGS_WITH_EXPORT,
                )?;
            let (r,) = f
                .call_async(&mut self.store, (world_size, n_elem, cube_w, cube_h, &wit))
                .await?;
            wasmtime::Result::Ok(r)
        }
        .await;
        match called {
            Ok(Ok(args)) => Ok(args),
            Ok(Err(message)) => Err(ArgsError::Refused(self.refused(ARGS_WITH_EXPORT, message))),
            Err(e) => Err(ArgsError::Failed(self.guest_error(e))),
        }
    }

    /// The collectives the component implements: its `collectives`
    /// export (deduplicated, in [`Collective::ALL`] order), only
    /// all-reduce when it has none.
    pub async fn collectives(&mut self) -> Result<Vec<Collective>, SimError> {
        if !self.exports(COLLECTIVES_EXPORT) {
            return Ok(vec![Collective::AllReduce]);
        }
        let called = async {
            let f = self
                .instance
                .get_typed_func::<(), (Vec<ccl::Collective>,)>(
                    &mut self.store,
                    COLLECTIVES_EXPORT,
                )?;
            let (r,) = f.call_async(&mut self.store, ()).await?;
            wasmtime::Result::Ok(r)
        }
        .await;
        let got = called.map_err(|e| self.guest_error(e))?;
        let got: Vec<Collective> = got.into_iter().map(collective_in).collect();
        Ok(Collective::ALL
            .into_iter()
            .filter(|c| got.contains(c))
            .collect())
    }

    /// The kernel's positional arguments for one `call`: its
    /// `kernel-args-for` export; without one, the seed's ABI for the one
    /// call it can express (an f16 sum all-reduce), a refusal for others.
    pub async fn kernel_args_for(
        &mut self,
        call: &Call,
        cube: (u32, u32),
        params: &[(String, ParamValue)],
    ) -> Result<Vec<i64>, ArgsError> {
        if !self.exports(ARGS_FOR_EXPORT) {
            if call.is_seed_form() {
                return self
                    .kernel_args(call.world_size, call.block, cube, params)
                    .await;
            }
            return Err(ArgsError::Refused(self.refused(
                ARGS_FOR_EXPORT,
                format!(
                    "not exported: the algorithm speaks only the seed's ABI (an f16 sum all_reduce), not {}",
                    call.describe()
                ),
            )));
        }
        let wit_call = ccl::Call {
            collective: collective_out(call.collective),
            dtype: super::kernel::dtype_out(call.dtype),
            op: red_op_out(call.op),
            root: call.root,
            block: call.block,
            world_size: call.world_size,
            cube_w: cube.0,
            cube_h: cube.1,
        };
        let wit: Vec<ccl::Param> = params.iter().map(param_out).collect();
        type Args<'a> = (ccl::Call, &'a [ccl::Param]);
        let called = async {
            let f = self
                .instance
                .get_typed_func::<Args, (Result<Vec<i64>, String>,)>(
                    &mut self.store,
                    ARGS_FOR_EXPORT,
                )?;
            let (r,) = f.call_async(&mut self.store, (wit_call, &wit)).await?;
            wasmtime::Result::Ok(r)
        }
        .await;
        match called {
            Ok(Ok(args)) => Ok(args),
            Ok(Err(message)) => Err(ArgsError::Refused(self.refused(ARGS_FOR_EXPORT, message))),
            Err(e) => Err(ArgsError::Failed(self.guest_error(e))),
        }
    }

    /// `topo-name-to-kind(name)`, 0 when not exported or unknown.
    pub async fn topo_kind(&mut self, name: &str) -> Result<i32, SimError> {
        if !self.exports(TOPO_EXPORT) {
            return Ok(0);
        }
        let called = async {
            let f = self
                .instance
                .get_typed_func::<(&str,), (Option<i32>,)>(&mut self.store, TOPO_EXPORT)?;
            let (k,) = f.call_async(&mut self.store, (name,)).await?;
            wasmtime::Result::Ok(k)
        }
        .await;
        called
            .map(|k| k.unwrap_or(0))
            .map_err(|e| self.guest_error(e))
    }

    /// `entry-defaults()`, checked; none when not exported.
    pub async fn entry_defaults(&mut self) -> Result<EntryDefaults, SimError> {
        if !self.exports(DEFAULTS_EXPORT) {
            return Ok(EntryDefaults::default());
        }
        let called = async {
            let f = self
                .instance
                .get_typed_func::<(), (ccl::EntryDefaults,)>(&mut self.store, DEFAULTS_EXPORT)?;
            let (d,) = f.call_async(&mut self.store, ()).await?;
            wasmtime::Result::Ok(d)
        }
        .await;
        let d = called.map_err(|e| self.guest_error(e))?;
        EntryDefaults::parse(&EntryDefaultNames {
            topology: d.topology.as_deref(),
            mapper: d.mapper.as_deref(),
            buffer_kind: d.buffer_kind.as_deref(),
            n_slots: d.n_slots,
            slot_size: d.slot_size,
            validator: d.validator.as_deref(),
        })
        .map_err(|m| self.refused(DEFAULTS_EXPORT, m))
    }

    /// Whether the component rewrites neighbour rows.
    pub fn has_neighbors(&mut self) -> bool {
        self.exports(NEIGHBORS_EXPORT)
    }

    /// `neighbors(rank, world_size, row)`: the row to install instead, or
    /// none to keep it. Only call it when [`Self::has_neighbors`].
    pub async fn neighbors(
        &mut self,
        rank: u32,
        world_size: u32,
        row: Vec<Link>,
    ) -> Result<Option<Vec<Link>>, SimError> {
        let wit: Vec<ccl::Link> = row
            .into_iter()
            .map(|l| ccl::Link {
                dir: l.dir,
                peer: l.peer,
                peer_dir: l.peer_dir,
            })
            .collect();
        type Args<'a> = (u32, u32, &'a [ccl::Link]);
        let called = async {
            let f = self
                .instance
                .get_typed_func::<Args, (Option<Vec<ccl::Link>>,)>(
                    &mut self.store,
                    NEIGHBORS_EXPORT,
                )?;
            let (r,) = f
                .call_async(&mut self.store, (rank, world_size, &wit))
                .await?;
            wasmtime::Result::Ok(r)
        }
        .await;
        let row = called.map_err(|e| self.guest_error(e))?;
        Ok(row.map(|links| {
            links
                .into_iter()
                .map(|l| Link {
                    dir: l.dir,
                    peer: l.peer,
                    peer_dir: l.peer_dir,
                })
                .collect()
        }))
    }
}

/// Why an algorithm gave no kernel arguments for a call.
#[derive(Debug)]
pub enum ArgsError {
    /// It refused the call: an `Err` its export returned, or an export
    /// (or parameter) it lacks. Another algorithm may serve the call.
    Refused(SimError),
    /// It failed: trapped, panicked, ran out of a budget. Its fault, not
    /// the call's.
    Failed(SimError),
}

impl From<ArgsError> for SimError {
    fn from(e: ArgsError) -> SimError {
        match e {
            ArgsError::Refused(e) | ArgsError::Failed(e) => e,
        }
    }
}

impl std::fmt::Display for ArgsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArgsError::Refused(e) | ArgsError::Failed(e) => e.fmt(f),
        }
    }
}
