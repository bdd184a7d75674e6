//! The guest sandbox (DESIGN §7): no filesystem, no network, no
//! environment, no arguments; simulated clocks; deterministic random;
//! stdout/stderr captured and later printed with the guest's name.

use crate::engine;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::time::Duration;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder};

/// Captured output is truncated past this many bytes per instance.
const OUTPUT_CAP: usize = 16 << 20;

/// Monotonic clock = simulated time (ns).
struct SimMonotonic;
impl HostMonotonicClock for SimMonotonic {
    fn resolution(&self) -> u64 {
        1
    }
    fn now(&self) -> u64 {
        engine::try_now().unwrap_or(0) / crate::units::PS_PER_NS
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
            + Duration::from_nanos(engine::try_now().unwrap_or(0) / crate::units::PS_PER_NS)
    }
}

/// The pipes holding a guest's captured output.
#[derive(Clone)]
pub struct Output {
    pub stdout: MemoryOutputPipe,
    pub stderr: MemoryOutputPipe,
}

/// A sandboxed WASI context and its output pipes.
pub struct Sandbox {
    pub ctx: WasiCtx,
    pub output: Output,
}

/// Build the sandbox of one guest instance; `seed` makes its random
/// stream distinct but reproducible.
pub fn sandbox(seed: u64) -> Sandbox {
    let stdout = MemoryOutputPipe::new(OUTPUT_CAP);
    let stderr = MemoryOutputPipe::new(OUTPUT_CAP);
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
        output: Output { stdout, stderr },
    }
}

/// Print captured output to stderr, each line prefixed with `[who]`.
pub fn flush_output(who: &str, out: &Output) {
    for pipe in [&out.stdout, &out.stderr] {
        let bytes = pipe.contents();
        if bytes.is_empty() {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        for line in text.lines() {
            eprintln!("[{who}] {line}");
        }
    }
}

/// Prints an instance's captured output when dropped: when the instance
/// ends, and also when a stalled run is torn down, so that what a
/// deadlocked kernel printed is not lost.
pub struct FlushOnDrop {
    who: String,
    out: Output,
}

impl FlushOnDrop {
    pub fn new(who: String, out: Output) -> Self {
        FlushOnDrop { who, out }
    }
}

impl Drop for FlushOnDrop {
    fn drop(&mut self) {
        flush_output(&self.who, &self.out);
    }
}
