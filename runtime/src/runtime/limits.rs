//! Budgets that bound every guest instance (DESIGN §7), enforced in the
//! mechanism rather than case by case:
//!
//! * **fuel**: wasm instructions per instance (wasmtime fuel), *plus* a
//!   fixed charge for every host call, so a guest looping on a cheap host
//!   call (`tl.now-ps`, `ahbm.now-ps`, a clock read) burns fuel too;
//! * **host calls**: a cap on host calls per instance;
//! * **wall clock**: a deadline for the whole run (wasmtime epoch
//!   interruption, ticked by one thread per [`Ticker`]), checked in wasm
//!   code and at every host call;
//! * **linear memory**: a cap per instance, and every byte charged to the
//!   run's [`MemoryBudget`].
//!
//! One [`InstanceGuard`] lives in each Store's data; [`guard_store`] wires
//! it into the Store. What ran out is a [`BudgetRanOut`] error, which names
//! the budget and the flag that changes it; the caller adds the guest, PE or
//! rank.

use crate::budget::{MemoryBudget, MemoryUse};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wasmtime::{CallHook, Engine, ResourceLimiter, Store, StoreContextMut};

/// WebAssembly instances a run of `ranks` ranks can hold at once: a bench
/// and a kernel instance per rank, the driver, and a kernel-args query.
pub fn instances_needed(ranks: u32) -> u32 {
    ranks.saturating_mul(2).saturating_add(2)
}

/// Host memory one instance costs besides its linear memory (the touched
/// part of its async fiber stack, its Store, VM context and tables), charged
/// with its first linear memory. Measured: a 4096-rank `hello_send` run
/// holds 1.9 GB resident for 8194 instances (and a 1.7 M-node topology),
/// ~160 KiB per instance of which the linear memory is ~100 KiB.
pub const INSTANCE_HOST_OVERHEAD: u64 = 64 << 10;

/// How often the epoch ticks.
pub const TICK: Duration = Duration::from_millis(10);

/// Per-instance figures, from the command line (see `LoaderOptions`).
#[derive(Debug, Clone, Copy)]
pub struct InstanceLimits {
    /// Fuel per instance (≈ wasm instructions).
    pub fuel: u64,
    /// Fuel charged for each call into the host.
    pub host_call_fuel: u64,
    /// Host calls per instance.
    pub max_host_calls: u64,
    /// Linear-memory cap per instance, bytes.
    pub max_memory: u64,
}

/// A budget a guest exhausted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetRanOut {
    #[error("its host-call budget of {limit} calls ran out (a loop around a host call?); raise it with --max-host-calls")]
    HostCalls { limit: u64 },
    #[error("its fuel budget of {limit} ran out inside a host call ({per_call} fuel per host call); raise it with --fuel")]
    FuelInHostCall { limit: u64, per_call: u64 },
    #[error(
        "the run's wall-clock deadline of {secs} s passed; raise it with --deadline (0 = none)"
    )]
    WallClock { secs: u64 },
    #[error("its linear memory would grow to {} MiB, over the per-instance cap of {} MiB; raise it with --max-guest-memory", desired >> 20, cap >> 20)]
    MemoryCap { desired: u64, cap: u64 },
}

/// Increments an engine's epoch every [`TICK`] on a thread of its own,
/// and counts the ticks so that deadlines can be set in ticks.
pub struct Ticker {
    ticks: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Ticker {
    pub fn start(engine: &Engine) -> Ticker {
        let ticks = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (t, s, e) = (ticks.clone(), stop.clone(), engine.weak());
        std::thread::Builder::new()
            .name("kernbench-epoch".into())
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    std::thread::sleep(TICK);
                    match e.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                    t.fetch_add(1, Ordering::Relaxed);
                }
            })
            .ok();
        Ticker { ticks, stop }
    }

    pub fn now(&self) -> u64 {
        self.ticks.load(Ordering::Relaxed)
    }

    /// A deadline `d` from now (None: no deadline).
    pub fn deadline(&self, d: Option<Duration>) -> Deadline {
        Deadline {
            ticks: self.ticks.clone(),
            at: d.map(|d| {
                (
                    self.now() + (d.as_millis() / TICK.as_millis()).max(1) as u64,
                    d.as_secs().max(1),
                )
            }),
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A run's wall-clock deadline, in ticks.
#[derive(Clone)]
pub struct Deadline {
    ticks: Arc<AtomicU64>,
    /// (tick, seconds as given).
    at: Option<(u64, u64)>,
}

impl Deadline {
    pub fn none() -> Deadline {
        Deadline {
            ticks: Arc::new(AtomicU64::new(0)),
            at: None,
        }
    }

    /// Error when the deadline has passed.
    pub fn check(&self) -> Result<(), BudgetRanOut> {
        match self.at {
            Some((at, secs)) if self.ticks.load(Ordering::Relaxed) >= at => {
                Err(BudgetRanOut::WallClock { secs })
            }
            _ => Ok(()),
        }
    }

    /// Ticks left (at least 1), or None without a deadline.
    fn ticks_left(&self) -> Option<u64> {
        self.at
            .map(|(at, _)| at.saturating_sub(self.ticks.load(Ordering::Relaxed)).max(1))
    }

    pub fn secs(&self) -> Option<u64> {
        self.at.map(|(_, s)| s)
    }
}

/// The budgets of one guest instance; lives in its Store's data.
pub struct InstanceGuard {
    limits: InstanceLimits,
    budget: Arc<MemoryBudget>,
    deadline: Deadline,
    who: String,
    host_calls: u64,
    /// Linear-memory bytes charged to the budget (given back on drop).
    charged: u64,
}

impl InstanceGuard {
    pub fn new(
        limits: InstanceLimits,
        budget: Arc<MemoryBudget>,
        deadline: Deadline,
        who: String,
    ) -> Self {
        InstanceGuard {
            limits,
            budget,
            deadline,
            who,
            host_calls: 0,
            charged: 0,
        }
    }

    /// Charge one host call; `fuel` is what the instance has left.
    fn host_call(&mut self, fuel: u64) -> Result<u64, BudgetRanOut> {
        self.deadline.check()?;
        self.host_calls += 1;
        if self.host_calls > self.limits.max_host_calls {
            return Err(BudgetRanOut::HostCalls {
                limit: self.limits.max_host_calls,
            });
        }
        fuel.checked_sub(self.limits.host_call_fuel)
            .ok_or(BudgetRanOut::FuelInHostCall {
                limit: self.limits.fuel,
                per_call: self.limits.host_call_fuel,
            })
    }

    pub fn host_calls(&self) -> u64 {
        self.host_calls
    }

    /// Charge the calls of a `tl.submit` batch beyond the one host call
    /// the batch itself was (so `--max-host-calls` counts `tl` calls
    /// however they are handed over).
    pub fn batched_calls(&mut self, calls: usize) -> Result<(), BudgetRanOut> {
        self.host_calls = self
            .host_calls
            .saturating_add((calls as u64).saturating_sub(1));
        if self.host_calls > self.limits.max_host_calls {
            return Err(BudgetRanOut::HostCalls {
                limit: self.limits.max_host_calls,
            });
        }
        Ok(())
    }

    /// The instance's name in errors (a PE, `bench` or `rank N`).
    pub fn who(&self) -> &str {
        &self.who
    }
}

impl Drop for InstanceGuard {
    fn drop(&mut self) {
        self.budget.release(MemoryUse::GuestMemory, self.charged);
    }
}

impl ResourceLimiter for InstanceGuard {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let desired = desired as u64;
        if desired > self.limits.max_memory {
            return Err(BudgetRanOut::MemoryCap {
                desired,
                cap: self.limits.max_memory,
            }
            .into());
        }
        let mut grow = desired.saturating_sub(current as u64);
        if self.charged == 0 {
            grow += INSTANCE_HOST_OVERHEAD;
        }
        self.budget
            .charge(MemoryUse::GuestMemory, grow, &self.who)?;
        self.charged += grow;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Tables hold 8-byte references; cap them like memory.
        Ok((desired as u64).saturating_mul(8) <= self.limits.max_memory)
    }
}

/// Store data that carries an [`InstanceGuard`].
pub trait Guarded: Send + 'static {
    fn guard(&mut self) -> &mut InstanceGuard;
}

/// Wire the guard of `store`'s data into the Store: fuel, per-host-call
/// charge, memory limiter and wall-clock deadline.
pub fn guard_store<T: Guarded>(store: &mut Store<T>) -> wasmtime::Result<()> {
    let (fuel, ticks_left, max_memory) = {
        let g = store.data_mut().guard();
        (g.limits.fuel, g.deadline.ticks_left(), g.limits.max_memory)
    };
    store.set_fuel(fuel)?;
    // What one host call may pass (wasmtime's default: 128 MiB): as much
    // as a guest's memory may hold, so a bench can hand over any tensor it
    // can make (a 200 MB `copy-from-bytes` failed "too much data is being
    // copied"); the host memory it takes is bounded by the budget.
    store.set_hostcall_fuel(usize::try_from(max_memory).unwrap_or(usize::MAX));
    store.limiter(|d| d.guard());
    store.call_hook(|mut ctx: StoreContextMut<'_, T>, hook| {
        if !matches!(hook, CallHook::CallingHost) {
            return Ok(());
        }
        let fuel = ctx.get_fuel()?;
        let left = ctx.data_mut().guard().host_call(fuel)?;
        ctx.set_fuel(left)?;
        Ok(())
    });
    store.epoch_deadline_trap();
    // Without a deadline the epoch check never fires.
    store.set_epoch_deadline(ticks_left.unwrap_or(u64::MAX / 2));
    Ok(())
}

/// The budgets of one run: per-instance figures, the host-memory budget
/// and the wall-clock deadline. Every Store of the run is guarded by it.
#[derive(Clone)]
pub struct RunLimits {
    pub instance: InstanceLimits,
    pub budget: Arc<MemoryBudget>,
    pub deadline: Deadline,
    /// Where the guests' captured output goes.
    pub console: super::console::Console,
}

impl RunLimits {
    /// The guard of one instance, named `who` in errors.
    pub fn guard(&self, who: &str) -> InstanceGuard {
        InstanceGuard::new(
            self.instance,
            self.budget.clone(),
            self.deadline.clone(),
            who.to_string(),
        )
    }

    /// Limits nothing runs into (unit tests).
    pub fn unlimited() -> Self {
        RunLimits {
            instance: InstanceLimits {
                fuel: u64::MAX / 2,
                host_call_fuel: 0,
                max_host_calls: u64::MAX,
                max_memory: u64::MAX,
            },
            budget: Arc::new(MemoryBudget::unlimited()),
            deadline: Deadline::none(),
            console: Default::default(),
        }
    }
}
