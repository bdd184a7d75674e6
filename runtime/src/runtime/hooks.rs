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
use crate::ccl::collective::{Call, Collective};
use crate::ccl::tables::Link;
use crate::config::ccl::{EntryDefaultNames, EntryDefaults, ParamValue};
use crate::error::SimError;
use crate::hw::machine::CommId;
use crate::hw::Machine;
use crate::topology::PeCoord;
use std::sync::Arc;
use wasmtime::component::{Instance, Val};
use wasmtime::Store;

/// The optional export mapping SIP topology names to kinds.
const TOPO_EXPORT: &str = "topo-name-to-kind";
const ARGS_WITH_EXPORT: &str = "kernel-args-with";
const DEFAULTS_EXPORT: &str = "entry-defaults";
const NEIGHBORS_EXPORT: &str = "neighbors";
const COLLECTIVES_EXPORT: &str = "collectives";
const ARGS_FOR_EXPORT: &str = "kernel-args-for";
const OUT_OF_PLACE_EXPORT: &str = "out-of-place";

// The exports whose types changed under the label 0.1.0 (`collectives`
// and `kernel-args-for` lost `send-recv` from `collective`, the record of
// `entry-defaults` gained `validator`) are called by value, so that the
// components of every snapshot serve (see `super::shapes`).

/// The `record` fields of `v`, or what it is instead.
fn as_record<'a>(v: &'a Val, what: &str) -> Result<&'a [(String, Val)], String> {
    match v {
        Val::Record(fields) => Ok(fields),
        other => Err(format!(
            "returned {other:?} where the record {what} belongs"
        )),
    }
}

fn as_string(v: &Val) -> Option<&str> {
    match v {
        Val::String(s) => Some(s),
        _ => None,
    }
}

/// Optional field `name` of a record: none when the record has no such
/// field (an earlier snapshot's) or it is `none`; an error when it holds
/// a value `get` does not take.
fn opt_field<'a, T>(
    fields: &'a [(String, Val)],
    name: &str,
    get: impl Fn(&'a Val) -> Option<T>,
) -> Result<Option<T>, String> {
    match fields.iter().find(|(n, _)| n == name).map(|(_, v)| v) {
        None | Some(Val::Option(None)) => Ok(None),
        Some(Val::Option(Some(v))) => get(v)
            .map(Some)
            .ok_or_else(|| format!("field `{name}` holds {v:?}, not the WIT's type")),
        Some(other) => Err(format!("field `{name}` holds {other:?}, not an option")),
    }
}

/// A `list<collective>` as the collectives this host knows; a case it
/// does not (an earlier snapshot's `send-recv`: point-to-point calls go
/// by host DMA, never to an algorithm) is left out.
fn collectives_in(v: &Val) -> Result<Vec<Collective>, String> {
    let Val::List(items) = v else {
        return Err(format!("returned {v:?}, not a list of collectives"));
    };
    items
        .iter()
        .filter_map(|item| match item {
            Val::Enum(name) => Collective::from_name(name).map(Ok),
            other => Some(Err(format!("listed {other:?}, not a collective"))),
        })
        .collect()
}

/// A [`Call`] as the WIT's `call` record.
fn call_value(call: &Call, (cube_w, cube_h): (u32, u32)) -> Val {
    let field = |name: &str, v: Val| (name.to_string(), v);
    Val::Record(vec![
        field(
            "collective",
            Val::Enum(call.collective.wit_name().to_string()),
        ),
        field("dtype", Val::Enum(call.dtype.name().to_string())),
        field("op", Val::Enum(call.op.wit_name().to_string())),
        field("root", Val::U32(call.root)),
        field("block", Val::U64(call.block)),
        field("world-size", Val::U32(call.world_size)),
        field("cube-w", Val::U32(cube_w)),
        field("cube-h", Val::U32(cube_h)),
    ])
}

/// ccl.yaml's parameters as the WIT's `list<param>`.
fn params_value(params: &[(String, ParamValue)]) -> Val {
    Val::List(
        params
            .iter()
            .map(|(name, value)| {
                let (case, v) = match value {
                    ParamValue::Int(v) => ("int", Val::S64(*v)),
                    ParamValue::Float(v) => ("float", Val::Float64(*v)),
                    ParamValue::Text(v) => ("text", Val::String(v.clone())),
                    ParamValue::Flag(v) => ("flag", Val::Bool(*v)),
                };
                Val::Record(vec![
                    ("name".to_string(), Val::String(name.clone())),
                    (
                        "value".to_string(),
                        Val::Variant(case.to_string(), Some(Box::new(v))),
                    ),
                ])
            })
            .collect(),
    )
}

/// A `result<list<s64>, string>`: the arguments, or the algorithm's
/// message (its refusal, or what it returned instead of the WIT's type).
fn args_result_in(v: &Val) -> Result<Vec<i64>, String> {
    let unexpected = || format!("returned {v:?}, not result<list<s64>, string>");
    match v {
        Val::Result(Ok(Some(list))) => match list.as_ref() {
            Val::List(items) => items
                .iter()
                .map(|i| match i {
                    Val::S64(n) => Ok(*n),
                    _ => Err(unexpected()),
                })
                .collect(),
            _ => Err(unexpected()),
        },
        Val::Result(Err(Some(message))) => match message.as_ref() {
            Val::String(m) => Err(m.clone()),
            _ => Err(unexpected()),
        },
        _ => Err(unexpected()),
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
            .store(machine, limits, (pe, CommId::WORLD), u64::MAX)
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

    /// Call export `name` with `params`, by value: its one result.
    async fn call_by_value(&mut self, name: &str, params: &[Val]) -> wasmtime::Result<Val> {
        let f = self
            .instance
            .get_func(&mut self.store, name)
            .ok_or_else(|| wasmtime::format_err!("export `{name}` is not a function"))?;
        let mut results = [Val::Bool(false)];
        f.call_async(&mut self.store, params, &mut results).await?;
        let [result] = results;
        Ok(result)
    }

    /// Call `export`, which returns `result<list<s64>, string>`: the
    /// kernel's arguments, or the algorithm's refusal.
    async fn args_export(&mut self, export: &str, args: &[Val]) -> Result<Vec<i64>, ArgsError> {
        let called = self
            .call_by_value(export, args)
            .await
            .map_err(|e| ArgsError::Failed(self.guest_error(e)))?;
        args_result_in(&called).map_err(|message| ArgsError::Refused(self.refused(export, message)))
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
        let args = [
            Val::U32(world_size),
            Val::U64(n_elem),
            Val::U32(cube_w),
            Val::U32(cube_h),
            params_value(params),
        ];
        self.args_export(ARGS_WITH_EXPORT, &args).await
    }
    /// The collectives the component implements: its `collectives`
    /// export (deduplicated, in [`Collective::ALL`] order), only
    /// all-reduce when it has none.
    pub async fn collectives(&mut self) -> Result<Vec<Collective>, SimError> {
        Ok(self
            .listed(COLLECTIVES_EXPORT)
            .await?
            .unwrap_or_else(|| vec![Collective::AllReduce]))
    }

    /// The collectives among all-reduce, broadcast and reduce whose
    /// kernels take an output apart from the input: its `out-of-place`
    /// export (since 0.6.5; the others it lists always have one), none
    /// when it has none.
    pub async fn out_of_place(&mut self) -> Result<Vec<Collective>, SimError> {
        let listed = self.listed(OUT_OF_PLACE_EXPORT).await?.unwrap_or_default();
        Ok(listed.into_iter().filter(|c| c.in_place()).collect())
    }

    /// The collectives a `list<collective>` export returns (deduplicated,
    /// in [`Collective::ALL`] order), None when it is not exported.
    async fn listed(&mut self, export: &str) -> Result<Option<Vec<Collective>>, SimError> {
        if !self.exports(export) {
            return Ok(None);
        }
        let got = self
            .call_by_value(export, &[])
            .await
            .map_err(|e| self.guest_error(e))?;
        let got = collectives_in(&got).map_err(|m| self.refused(export, m))?;
        Ok(Some(
            Collective::ALL
                .into_iter()
                .filter(|c| got.contains(c))
                .collect(),
        ))
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
        // A case the component's `call` cannot name (an op or dtype of a
        // later release) is refused by name.
        let wanted = [
            ("op", "ops", call.op.wit_name(), call.op.name()),
            ("dtype", "dtypes", call.dtype.name(), call.dtype.name()),
        ];
        for (field, plural, case, name) in wanted {
            let Some(known) = self.cases_known(ARGS_FOR_EXPORT, field) else {
                continue;
            };
            if !known.iter().any(|k| k == case) {
                return Err(ArgsError::Refused(self.refused(
                    ARGS_FOR_EXPORT,
                    format!(
                        "built against an earlier kernbench:sim, whose {plural} are {} only, so \
                         it cannot be asked for {}: rebuild it against this release's guest SDK \
                         (kernbench:sim@{}) to run {name}",
                        known.join(", "),
                        call.describe(),
                        crate::components::compat::WIT_VERSION,
                    ),
                )));
            }
        }
        let args = [call_value(call, cube), params_value(params)];
        self.args_export(ARGS_FOR_EXPORT, &args).await
    }

    /// The cases of the enum field `field` of the `call` parameter of
    /// `export`: the dtypes (a component built before 0.7.0 knows four)
    /// or the ops (before 0.8.0, five). None when its type is not the
    /// WIT's `call` record.
    fn cases_known(&mut self, export: &str, field: &str) -> Option<Vec<String>> {
        use wasmtime::component::types::Type;
        let f = self.instance.get_func(&mut self.store, export)?;
        let ty = f.ty(&self.store);
        let (_, Type::Record(call)) = ty.params().next()? else {
            return None;
        };
        let field = call.fields().find(|f| f.name == field)?;
        let Type::Enum(cases) = field.ty else {
            return None;
        };
        Some(cases.names().map(str::to_string).collect())
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
        let d = self
            .call_by_value(DEFAULTS_EXPORT, &[])
            .await
            .map_err(|e| self.guest_error(e))?;
        let record = |d: &Val| -> Result<EntryDefaults, String> {
            let fields = as_record(d, "entry-defaults")?;
            let text = |name| opt_field(fields, name, as_string);
            EntryDefaults::parse(&EntryDefaultNames {
                topology: text("topology")?,
                mapper: text("mapper")?,
                buffer_kind: text("buffer-kind")?,
                n_slots: opt_field(fields, "n-slots", |v| match v {
                    Val::U32(n) => Some(*n),
                    _ => None,
                })?,
                slot_size: opt_field(fields, "slot-size", |v| match v {
                    Val::U64(n) => Some(*n),
                    _ => None,
                })?,
                // Snapshots before 616f16e return no validator.
                validator: text("validator")?,
            })
        };
        record(&d).map_err(|m| self.refused(DEFAULTS_EXPORT, m))
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
