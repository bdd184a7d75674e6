//! Executor core: task slab, ready queue, timer heap, thread-local handle.

use super::sync::{join_pair, JoinHandle};
use super::wheel::TimerWheel;
use crate::units::Ps;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

type BoxFuture = Pin<Box<dyn Future<Output = ()>>>;

/// Who a timer wakes: one of our tasks directly (no waker call), or a
/// foreign waker kept in a side table.
#[derive(Clone, Copy)]
enum Target {
    Task(u32),
    Foreign(u32),
}

struct Slot {
    fut: Option<BoxFuture>,
    queued: bool,
    live: bool,
}

struct Core {
    now: Cell<Ps>,
    events: Cell<u64>,
    /// Pending timers, fired in (time, creation) order.
    timers: RefCell<TimerWheel<Target>>,
    foreign: RefCell<Vec<Option<Waker>>>,
    foreign_free: RefCell<Vec<u32>>,
    ready: RefCell<VecDeque<usize>>,
    slots: RefCell<Vec<Slot>>,
    free: RefCell<Vec<usize>>,
    live: Cell<usize>,
}

impl Default for Core {
    fn default() -> Self {
        Core {
            now: Cell::new(0),
            events: Cell::new(0),
            timers: RefCell::default(),
            foreign: RefCell::default(),
            foreign_free: RefCell::default(),
            ready: RefCell::default(),
            slots: RefCell::default(),
            free: RefCell::default(),
            live: Cell::new(0),
        }
    }
}

impl Core {
    fn add_timer(&self, at: Ps, waker: &Waker) {
        let target = if waker.vtable() == &VTABLE {
            Target::Task(waker.data() as usize as u32)
        } else {
            let mut f = self.foreign.borrow_mut();
            let idx = match self.foreign_free.borrow_mut().pop() {
                Some(i) => {
                    f[i as usize] = Some(waker.clone());
                    i
                }
                None => {
                    f.push(Some(waker.clone()));
                    (f.len() - 1) as u32
                }
            };
            Target::Foreign(idx)
        };
        self.timers.borrow_mut().push(at, target);
    }

    fn fire(&self, target: Target) {
        match target {
            Target::Task(id) => self.schedule(id as usize),
            Target::Foreign(i) => {
                let w = self.foreign.borrow_mut()[i as usize].take();
                self.foreign_free.borrow_mut().push(i);
                if let Some(w) = w {
                    w.wake();
                }
            }
        }
    }

    fn schedule(&self, id: usize) {
        let mut slots = self.slots.borrow_mut();
        if let Some(slot) = slots.get_mut(id) {
            if slot.live && !slot.queued {
                slot.queued = true;
                self.ready.borrow_mut().push_back(id);
            }
        }
    }

    fn spawn_boxed(&self, fut: BoxFuture) {
        let id = {
            let mut slots = self.slots.borrow_mut();
            assert!(slots.len() < u32::MAX as usize, "engine: too many tasks");
            let slot = Slot {
                fut: Some(fut),
                queued: true,
                live: true,
            };
            match self.free.borrow_mut().pop() {
                Some(id) => {
                    slots[id] = slot;
                    id
                }
                None => {
                    slots.push(slot);
                    slots.len() - 1
                }
            }
        };
        self.live.set(self.live.get() + 1);
        self.ready.borrow_mut().push_back(id);
    }
}

thread_local! {
    /// The core of the executor running on this thread, or null. Set only
    /// by [`Executor::run`] (which keeps the core alive for its duration)
    /// and restored when it returns.
    static CURRENT: Cell<*const Core> = const { Cell::new(std::ptr::null()) };
}

fn current() -> Option<&'static Core> {
    let p = CURRENT.with(|c| c.get());
    // SAFETY: non-null only while `Executor::run` holds an `Rc<Core>` on
    // this thread; callers use the reference within that call.
    unsafe { p.as_ref() }
}

fn with_current<R>(f: impl FnOnce(&Core) -> R) -> R {
    f(current().expect("engine: called outside a running Executor (no simulated time here)"))
}

// Wakers carry the task id in the data pointer: no allocation, no refcount.
static VTABLE: RawWakerVTable = RawWakerVTable::new(
    |p| RawWaker::new(p, &VTABLE),
    |p| wake_id(p as usize),
    |p| wake_id(p as usize),
    |_| {},
);

fn wake_id(id: usize) {
    if let Some(core) = current() {
        core.schedule(id);
    }
}

fn task_waker(id: usize) -> Waker {
    // SAFETY: the vtable functions never dereference the data pointer; it
    // is only a task index.
    unsafe { Waker::from_raw(RawWaker::new(id as *const (), &VTABLE)) }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// Every task finished.
    Finished,
    /// No task can make progress and no timer is pending, but `blocked`
    /// tasks have not finished: they wait on something that will never
    /// happen (a deadlock).
    Stalled { blocked: usize },
}

/// A deterministic single-threaded virtual-time executor.
pub struct Executor {
    core: Rc<Core>,
}

impl Default for Executor {
    fn default() -> Self {
        Self::new()
    }
}

impl Executor {
    pub fn new() -> Self {
        Executor {
            core: Rc::new(Core::default()),
        }
    }

    /// Current simulated time.
    pub fn now(&self) -> Ps {
        self.core.now.get()
    }

    /// Timers not yet fired.
    pub fn pending_timers(&self) -> usize {
        self.core.timers.borrow().len()
    }

    /// Timer events fired and task polls made so far.
    pub fn events_processed(&self) -> u64 {
        self.core.events.get()
    }

    /// Add a task; it first runs at the current simulated time.
    pub fn spawn<F>(&self, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: Send + 'static,
    {
        let (tx, handle) = join_pair();
        self.core
            .spawn_boxed(Box::pin(async move { tx.complete(fut.await) }));
        handle
    }

    /// Run until no task is runnable and no timer is pending.
    pub fn run(&self) -> RunOutcome {
        let prev = CURRENT.with(|c| c.replace(Rc::as_ptr(&self.core)));
        let _restore = Restore(prev);
        let core = &*self.core;
        // Wakes that happened while no executor was running were dropped
        // (there was nowhere to queue them): poll every live task once.
        let live: Vec<usize> = {
            let slots = core.slots.borrow();
            (0..slots.len())
                .filter(|&i| slots[i].live && !slots[i].queued)
                .collect()
        };
        for id in live {
            core.schedule(id);
        }
        loop {
            loop {
                let next = core.ready.borrow_mut().pop_front();
                let Some(id) = next else { break };
                let fut = {
                    let mut slots = core.slots.borrow_mut();
                    let slot = &mut slots[id];
                    slot.queued = false;
                    slot.fut.take()
                };
                let Some(mut fut) = fut else { continue };
                core.events.set(core.events.get() + 1);
                let waker = task_waker(id);
                let mut cx = Context::from_waker(&waker);
                match fut.as_mut().poll(&mut cx) {
                    Poll::Ready(()) => {
                        let mut slots = core.slots.borrow_mut();
                        slots[id] = Slot {
                            fut: None,
                            queued: false,
                            live: false,
                        };
                        core.free.borrow_mut().push(id);
                        core.live.set(core.live.get() - 1);
                    }
                    Poll::Pending => core.slots.borrow_mut()[id].fut = Some(fut),
                }
            }
            // Fire the earliest timer, then run what it woke.
            let next = core.timers.borrow_mut().pop();
            let Some((at, target)) = next else { break };
            debug_assert!(at >= core.now.get(), "time went backwards");
            core.now.set(at);
            core.fire(target);
        }
        match core.live.get() {
            0 => RunOutcome::Finished,
            blocked => RunOutcome::Stalled { blocked },
        }
    }
}

struct Restore(*const Core);
impl Drop for Restore {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.0));
    }
}

/// Simulated time of the running executor.
pub fn now() -> Ps {
    with_current(|c| c.now.get())
}

/// Simulated time if called inside a running executor.
pub fn try_now() -> Option<Ps> {
    current().map(|c| c.now.get())
}

/// Spawn a task on the running executor.
pub fn spawn<F>(fut: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: Send + 'static,
{
    let (tx, handle) = join_pair();
    with_current(|c| c.spawn_boxed(Box::pin(async move { tx.complete(fut.await) })));
    handle
}

/// Spawn a task whose result nobody awaits (a hardware command that
/// signals its completion itself): no join state is allocated.
pub fn spawn_detached(fut: impl Future<Output = ()> + 'static) {
    with_current(|c| c.spawn_boxed(Box::pin(fut)));
}

/// A future that completes at simulated time `at` (at once if past).
pub fn sleep_until(at: Ps) -> Sleep {
    Sleep { at, armed: false }
}

/// A future that completes `d` picoseconds from now. Callers that add
/// untrusted durations compute the deadline with [`crate::units::add`] and
/// use [`sleep_until`]; this one never wraps (past the horizon it waits
/// forever, which the run reports as a stall).
pub fn sleep(d: Ps) -> Sleep {
    sleep_until(now().checked_add(d).unwrap_or(Ps::MAX))
}

/// See [`sleep_until`].
#[derive(Debug)]
pub struct Sleep {
    at: Ps,
    armed: bool,
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let at = self.at;
        with_current(|c| {
            if c.now.get() >= at {
                Poll::Ready(())
            } else {
                if !self.armed {
                    self.armed = true;
                    c.add_timer(at, cx.waker());
                }
                Poll::Pending
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Event;
    use std::sync::{Arc, Mutex};

    #[test]
    fn timers_fire_in_time_then_fifo_order() {
        let ex = Executor::new();
        let log = Arc::new(Mutex::new(Vec::new()));
        for (name, d) in [("a", 30u64), ("b", 10), ("c", 30), ("d", 0)] {
            let log = log.clone();
            ex.spawn(async move {
                sleep(d).await;
                log.lock().unwrap().push((name, now()));
            });
        }
        assert_eq!(ex.run(), RunOutcome::Finished);
        assert_eq!(
            *log.lock().unwrap(),
            vec![("d", 0), ("b", 10), ("a", 30), ("c", 30)]
        );
        assert_eq!(ex.now(), 30);
    }

    #[test]
    fn join_handles_and_nested_spawn() {
        let ex = Executor::new();
        let h = ex.spawn(async {
            let inner = spawn(async {
                sleep(5).await;
                7u32
            });
            sleep(1).await;
            inner.await + now() as u32
        });
        assert_eq!(ex.run(), RunOutcome::Finished);
        assert_eq!(h.try_take(), Some(12));
    }

    #[test]
    fn a_task_waiting_forever_is_reported_as_stalled() {
        let ex = Executor::new();
        let ev = Event::new();
        let ev2 = ev.clone();
        ex.spawn(async move { ev2.wait().await });
        ex.spawn(async { sleep(100).await });
        assert_eq!(ex.run(), RunOutcome::Stalled { blocked: 1 });
        assert_eq!(ex.now(), 100);
        assert_eq!(ex.pending_timers(), 0);
        ev.set();
        assert_eq!(ex.run(), RunOutcome::Finished);
    }

    #[test]
    fn same_program_same_trace() {
        fn trace() -> Vec<(u32, Ps)> {
            let ex = Executor::new();
            let log = Arc::new(Mutex::new(Vec::new()));
            for i in 0..50u32 {
                let log = log.clone();
                ex.spawn(async move {
                    for k in 0..5u64 {
                        sleep(((i as u64 * 7919 + k * 104729) % 97) + 1).await;
                        log.lock().unwrap().push((i, now()));
                    }
                });
            }
            ex.run();
            let v = log.lock().unwrap().clone();
            v
        }
        assert_eq!(trace(), trace());
    }
}
