//! The deterministic virtual-time executor (DESIGN §3).
//!
//! A single-threaded discrete-event core: timers fired in `(time, sequence
//! number)` order from a hierarchical timing wheel (O(1), see `wheel`), a
//! FIFO ready queue of tasks, and wakers that push task ids onto it. Time
//! only advances when no task is runnable. It
//! knows nothing of wasm: tasks are plain Rust futures, so native test
//! processes drive it directly (see `benches/engine_phold.rs`). A
//! [`Call`] (a registered handler and an argument) runs where a task
//! would be polled, in the same order, without a future: the machine's
//! engines serve their command records with them.
//!
//! Inside a running task, the free functions [`now`], [`sleep_until`],
//! [`sleep`] and [`spawn`] reach the executor that is polling it (a
//! thread-local set for the duration of [`Executor::run`], as tokio does).
//!
//! [`windows`] runs a model split into partitions, an executor each, on
//! several threads in conservative windows of simulated time
//! ([`Executor::run_until`] runs one window of one partition). Keyed
//! timers ([`call_keyed_at`], [`sleep_keyed_until`], module `keyed`) fire
//! before the plain timers of their picosecond, in the order of a key the
//! setter gives: what one partition sets for another is set later than
//! on one executor, and a key keeps its place the same on both.

mod executor;
mod keyed;
pub mod lock;
mod sync;
mod wheel;
pub mod windows;

pub use executor::{
    call_at, call_keyed_at, call_soon, call_waker, executor_id, now, partition, register, sleep,
    sleep_keyed_until, sleep_until, spawn, spawn_detached, try_now, Call, Executor, Handler,
    HandlerId, RunOutcome, Sleep,
};
pub use keyed::OrderKey;
pub use sync::{Event, JoinHandle, Signal, SignalWait};
