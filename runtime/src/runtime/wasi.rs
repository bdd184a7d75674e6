//! The guest sandbox (DESIGN §7): no filesystem, no network, no
//! environment, no arguments; deterministic random; simulated clocks for
//! reading *and* for waiting (a sleep, a `monotonic-clock` subscription or a
//! `poll` on one advances that guest's simulated time); stdout/stderr
//! captured up to a cap, for [`super::console`] to print with the
//! guest's name.

use crate::budget::{MemoryBudget, MemoryUse};
use crate::engine;
use crate::units::{Ps, PS_PER_NS};
use bytes::Bytes;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use wasmtime::component::{Linker, Resource};
use wasmtime::StoreContextMut;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{DynPollable, OutputStream, Pollable, StreamError};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiView};

/// Captured output is truncated past this many bytes per instance.
pub const OUTPUT_CAP: usize = 16 << 20;

/// Monotonic clock = simulated time (ns).
struct SimMonotonic;
impl HostMonotonicClock for SimMonotonic {
    fn resolution(&self) -> u64 {
        1
    }
    fn now(&self) -> u64 {
        engine::try_now().unwrap_or(0) / PS_PER_NS
    }
}

/// Wall clock = a fixed epoch (2026-01-01T00:00:00Z) + simulated time.
struct SimWall;
impl HostWallClock for SimWall {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }
    fn now(&self) -> Duration {
        Duration::from_secs(1_767_225_600)
            + Duration::from_nanos(engine::try_now().unwrap_or(0) / PS_PER_NS)
    }
}

/// A deadline in simulated time, as a `wasi:io/poll` pollable.
struct SimDeadline {
    at: Ps,
}

#[wasmtime_wasi::async_trait]
impl Pollable for SimDeadline {
    async fn ready(&mut self) {
        engine::sleep_until(self.at).await
    }
}

/// A sleep that would pass the simulated clock's horizon.
#[derive(Debug, thiserror::Error)]
#[error("a sleep until {ns} ns (simulated) passes the simulated clock's horizon of 2^64 ps")]
struct SleepTooLong {
    ns: u128,
}

fn subscribe_at<T: WasiView>(
    mut store: StoreContextMut<'_, T>,
    at_ns: u128,
) -> wasmtime::Result<(Resource<DynPollable>,)> {
    let at = u64::try_from(at_ns * PS_PER_NS as u128).map_err(|_| SleepTooLong { ns: at_ns })?;
    let table = store.data_mut().ctx().table;
    let deadline = table.push(SimDeadline { at })?;
    Ok((wasmtime_wasi::p2::subscribe(table, deadline)?,))
}

/// The `wasi:clocks/monotonic-clock` version wasmtime-wasi registers.
const MONOTONIC_CLOCK: &str = "wasi:clocks/monotonic-clock@0.2.12";

/// Replace wasmtime-wasi's `monotonic-clock` subscriptions (which need a
/// tokio reactor and measure real time) by deadlines in simulated time.
/// Everything that waits on a clock (`std::thread::sleep`, `poll`,
/// `pollable.block`) then waits in simulated time, deterministically.
pub fn add_simulated_waiting<T: WasiView + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut clock = linker.instance(MONOTONIC_CLOCK)?;
    clock.func_wrap(
        "subscribe-duration",
        |store: StoreContextMut<'_, T>, (ns,): (u64,)| {
            let now = engine::try_now().unwrap_or(0) / PS_PER_NS;
            subscribe_at(store, now as u128 + ns as u128)
        },
    )?;
    clock.func_wrap(
        "subscribe-instant",
        |store: StoreContextMut<'_, T>, (when,): (u64,)| subscribe_at(store, when as u128),
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// The `wasi:clocks/wall-clock` version wasmtime-wasi registers.
const WALL_CLOCK: &str = "wasi:clocks/wall-clock@0.2.12";

/// For a kernel recorded ahead of simulated time: reading a clock or
/// waiting on one stops the recording (the kernel then runs in step with
/// simulated time, where clocks mean something).
pub fn refuse_clocks<T: WasiView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    fn refuse<R>(what: &'static str) -> wasmtime::Result<R> {
        Err(wasmtime::Error::new(super::eager::NeedsSimulatedTime {
            what,
        }))
    }
    linker.allow_shadowing(true);
    let mut clock = linker.instance(MONOTONIC_CLOCK)?;
    clock.func_wrap("now", |_: StoreContextMut<'_, T>, (): ()| {
        refuse::<(u64,)>("the monotonic clock")
    })?;
    clock.func_wrap(
        "subscribe-duration",
        |_: StoreContextMut<'_, T>, (_,): (u64,)| refuse::<(Resource<DynPollable>,)>("a sleep"),
    )?;
    clock.func_wrap(
        "subscribe-instant",
        |_: StoreContextMut<'_, T>, (_,): (u64,)| refuse::<(Resource<DynPollable>,)>("a sleep"),
    )?;
    let mut wall = linker.instance(WALL_CLOCK)?;
    wall.func_wrap("now", |_: StoreContextMut<'_, T>, (): ()| {
        refuse::<(wasmtime_wasi::p2::bindings::clocks::wall_clock::Datetime,)>("the wall clock")
    })?;
    linker.allow_shadowing(false);
    Ok(())
}

/// The bytes an instance wrote to one stream, up to its cap; what is over
/// the cap (or over the run's memory budget) is counted, not kept.
struct Capture {
    bytes: Vec<u8>,
    dropped: u64,
    cap: usize,
    budget: Arc<MemoryBudget>,
    who: String,
}

impl Capture {
    fn push(&mut self, data: &[u8]) {
        let room = self.cap.saturating_sub(self.bytes.len()).min(data.len());
        if room > 0
            && self
                .budget
                .charge(MemoryUse::GuestOutput, room as u64, &self.who)
                .is_ok()
        {
            self.bytes.extend_from_slice(&data[..room]);
            self.dropped += (data.len() - room) as u64;
        } else {
            self.dropped += data.len() as u64;
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.budget
            .release(MemoryUse::GuestOutput, self.bytes.len() as u64);
    }
}

/// A captured output stream (stdout, stderr or `tl.log`) of one instance.
#[derive(Clone)]
pub struct CapturePipe(Arc<Mutex<Capture>>);

impl CapturePipe {
    pub fn new(cap: usize, budget: Arc<MemoryBudget>, who: &str) -> Self {
        CapturePipe(Arc::new(Mutex::new(Capture {
            bytes: Vec::new(),
            dropped: 0,
            cap,
            budget,
            who: who.to_string(),
        })))
    }

    pub fn write(&self, data: &[u8]) {
        self.0.lock().unwrap().push(data)
    }

    /// What was kept, and how many bytes were not.
    pub fn contents(&self) -> (Vec<u8>, u64) {
        let c = self.0.lock().unwrap();
        (c.bytes.clone(), c.dropped)
    }
}

impl IsTerminal for CapturePipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CapturePipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for CapturePipe {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        CapturePipe::write(self, &bytes);
        Ok(())
    }
    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }
    fn check_write(&mut self) -> Result<usize, StreamError> {
        // Always accepting: output over the cap is dropped and counted, so
        // a chatty guest is told nothing and never traps on a full pipe.
        Ok(64 * 1024)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CapturePipe {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for CapturePipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        CapturePipe::write(&self, buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// The pipes holding a guest's captured output, and where it goes.
#[derive(Clone)]
pub struct Output {
    pub stdout: CapturePipe,
    pub stderr: CapturePipe,
    pub console: super::console::Console,
}

impl Output {
    /// Nothing was written to either pipe (not even what was cut).
    pub fn is_empty(&self) -> bool {
        [&self.stdout, &self.stderr].iter().all(|p| {
            let (kept, dropped) = p.contents();
            kept.is_empty() && dropped == 0
        })
    }
}

/// A sandboxed WASI context and its output pipes.
pub struct Sandbox {
    pub ctx: WasiCtx,
    pub output: Output,
}

/// Build the sandbox of one guest instance (`who` names it); `seed` makes
/// its random stream distinct but reproducible. Captured output is charged
/// to `budget`.
pub fn sandbox(
    seed: u64,
    who: &str,
    (budget, console): (&Arc<MemoryBudget>, &super::console::Console),
) -> Sandbox {
    let stdout = CapturePipe::new(OUTPUT_CAP, budget.clone(), who);
    let stderr = CapturePipe::new(OUTPUT_CAP, budget.clone(), who);
    let ctx = WasiCtxBuilder::new()
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .wall_clock(SimWall)
        .monotonic_clock(SimMonotonic)
        .secure_random(StdRng::seed_from_u64(0x9E37_79B9_7F4A_7C15 ^ seed))
        .insecure_random(StdRng::seed_from_u64(0x2545_F491_4F6C_DD1D ^ seed))
        .insecure_random_seed(seed as u128)
        .build();
    Sandbox {
        ctx,
        output: Output {
            stdout,
            stderr,
            console: console.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_up_to_its_cap_and_counts_the_rest() {
        let budget = Arc::new(MemoryBudget::new(1 << 20));
        let p = CapturePipe::new(10, budget.clone(), "t");
        p.write(b"hello ");
        p.write(b"world, again");
        let (kept, dropped) = p.contents();
        assert_eq!(kept, b"hello worl");
        assert_eq!(dropped, 8);
        assert_eq!(budget.used_by(MemoryUse::GuestOutput), 10);
        drop(p);
        assert_eq!(budget.in_use(), 0);
        // Over the run's budget: dropped too.
        let small = Arc::new(MemoryBudget::new(4));
        let p = CapturePipe::new(100, small, "t");
        p.write(b"12345678");
        assert_eq!(p.contents(), (Vec::new(), 8));
    }
}
