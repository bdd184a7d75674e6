//! Executor core: task slab, ready queue, timer heap, thread-local handle,
//! and the callbacks ([`Call`]) it runs in place of polling a task.

use super::keyed::{KeyedTimers, OrderKey};
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

/// Who a timer wakes: one of our tasks directly (no waker call), a
/// callback, or a foreign waker kept in a side table.
#[derive(Clone, Copy)]
enum Target {
    Task(u32),
    Call(Call),
    Foreign(u32),
}

/// A callback the executor runs where it would poll a task: handler
/// `handler` (see [`register`]) called with `arg`. It takes the ready
/// queue's and the timers' order exactly as a task woken at the same
/// moment would, with no future, no allocation and no poll: a hardware
/// unit that serves its commands from a queue of records needs nothing
/// else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    pub handler: HandlerId,
    pub arg: u32,
}

/// A handler registered on the running executor (see [`register`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HandlerId(u32);

impl HandlerId {
    /// Its index among the executor's handlers (to keep it in an atomic).
    pub fn index(self) -> u32 {
        self.0
    }

    /// The handler of index `i` (one [`HandlerId::index`] gave).
    pub fn from_index(i: u32) -> HandlerId {
        HandlerId(i)
    }
}

/// What a [`Call`] runs; it is given the call (its own handler id too).
pub type Handler = Rc<dyn Fn(Call)>;

/// A ready-queue entry: a task id, or a call with this bit set (handler
/// in bits 32..63, argument in 0..32; task ids are below 2^32).
const CALL_BIT: usize = 1 << 63;
const _: () = assert!(
    usize::BITS == 64,
    "the ready queue packs calls into 64 bits"
);

impl Call {
    fn pack(self) -> usize {
        CALL_BIT | ((self.handler.0 as usize) << 32) | self.arg as usize
    }

    fn unpack(word: usize) -> Call {
        Call {
            handler: HandlerId(((word & !CALL_BIT) >> 32) as u32),
            arg: word as u32,
        }
    }
}

struct Slot {
    fut: Option<BoxFuture>,
    queued: bool,
    live: bool,
}

impl Slot {
    /// A wake would make it runnable: it has not finished and is not in
    /// the ready queue already.
    fn wakeable(&self) -> bool {
        self.live && !self.queued
    }
}

struct Core {
    /// Unique in the process (see [`executor_id`]).
    id: usize,
    now: Cell<Ps>,
    events: Cell<u64>,
    /// Pending timers, fired in (time, creation) order.
    timers: RefCell<TimerWheel<Target>>,
    /// Pending keyed timers (see [`super::keyed`]): fired in (time, key)
    /// order, each before the plain timers of its time.
    keyed: RefCell<KeyedTimers<Target>>,
    /// The earliest keyed timer's time (`None`: none), kept here so that
    /// a run without keyed timers reads one cell per timer for them.
    keyed_next: Cell<Option<Ps>>,
    foreign: RefCell<Vec<Option<Waker>>>,
    foreign_free: RefCell<Vec<u32>>,
    /// Task ids and packed calls, in the order they became runnable.
    ready: RefCell<VecDeque<usize>>,
    handlers: RefCell<Vec<Handler>>,
    slots: RefCell<Vec<Slot>>,
    free: RefCell<Vec<usize>>,
    live: Cell<usize>,
    /// Whether a windowed run ([`Executor::run_until`]) has begun.
    started: Cell<bool>,
    /// The partition of a windowed run it runs (see [`partition`]).
    partition: Cell<usize>,
}

impl Default for Core {
    fn default() -> Self {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);
        Core {
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            now: Cell::new(0),
            events: Cell::new(0),
            timers: RefCell::default(),
            keyed: RefCell::default(),
            keyed_next: Cell::new(None),
            foreign: RefCell::default(),
            foreign_free: RefCell::default(),
            ready: RefCell::default(),
            handlers: RefCell::default(),
            slots: RefCell::default(),
            free: RefCell::default(),
            live: Cell::new(0),
            partition: Cell::new(0),
            started: Cell::new(false),
        }
    }
}

impl Core {
    fn add_timer(&self, at: Ps, waker: &Waker) {
        let target = self.target_of(waker);
        self.timers.borrow_mut().push(at, target);
    }

    /// A keyed timer (see [`super::keyed`]) that wakes `target` at `at`.
    fn add_keyed(&self, at: Ps, key: OrderKey, target: Target) {
        debug_assert!(at >= self.now.get(), "a keyed timer in the past");
        self.keyed.borrow_mut().push(at, key, target);
        if self.keyed_next.get().is_none_or(|t| at < t) {
            self.keyed_next.set(Some(at));
        }
    }

    /// The next timer to fire, before `end` if given: the keyed ones of a
    /// picosecond before its plain ones.
    #[inline(always)]
    fn next_timer(&self, end: Option<Ps>) -> Option<(Ps, Target)> {
        let Some(keyed_at) = self.keyed_next.get() else {
            let mut wheel = self.timers.borrow_mut();
            return match end {
                None => wheel.pop(),
                Some(end) => wheel.pop_before(end),
            };
        };
        let bound = end.map_or(keyed_at, |end| end.min(keyed_at));
        if let Some(plain) = self.timers.borrow_mut().pop_before(bound) {
            return Some(plain);
        }
        if end.is_some_and(|end| keyed_at >= end) {
            return None;
        }
        let mut keyed = self.keyed.borrow_mut();
        let next = keyed.pop();
        self.keyed_next.set(keyed.next_at());
        next
    }

    /// Who a timer set with `waker` wakes.
    fn target_of(&self, waker: &Waker) -> Target {
        if waker.vtable() == &VTABLE {
            Target::Task(waker.data() as usize as u32)
        } else if waker.vtable() == &CALL_VTABLE {
            Target::Call(Call::unpack(waker.data() as usize))
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
        }
    }

    /// Wake the foreign waker a timer kept at `i`.
    fn wake_foreign(&self, i: u32) {
        let w = self.foreign.borrow_mut()[i as usize].take();
        self.foreign_free.borrow_mut().push(i);
        if let Some(w) = w {
            w.wake();
        }
    }

    fn schedule(&self, id: usize) {
        let mut slots = self.slots.borrow_mut();
        if let Some(slot) = slots.get_mut(id) {
            if slot.wakeable() {
                slot.queued = true;
                self.ready.borrow_mut().push_back(id);
            }
        }
    }

    /// Run a ready-queue entry: a packed call or a task id.
    ///
    /// This, `run_call` and `poll_task` are forced inline: since `drive`
    /// has two instances (`run` and `run_until`), the compiler made them
    /// calls, and `run` took ~6 M more instructions in a 256-rank
    /// `ring_native` of 65 536 steps (+0.9 %; `TimerWheel::file` too).
    #[inline(always)]
    fn run_ready(&self, entry: usize) {
        if entry & CALL_BIT != 0 {
            self.run_call(Call::unpack(entry));
        } else {
            self.poll_task(entry);
        }
    }

    /// Run `call`'s handler.
    #[inline(always)]
    fn run_call(&self, call: Call) {
        // A call of another executor's handler (a waker left on an event
        // by a run that ended) has no handler here.
        let handler = self.handlers.borrow().get(call.handler.0 as usize).cloned();
        if let Some(handler) = handler {
            self.events.set(self.events.get() + 1);
            handler(call);
        }
    }

    /// Poll task `id` (a task queued twice, or finished meanwhile, has no
    /// future to poll).
    #[inline(always)]
    fn poll_task(&self, id: usize) {
        let fut = {
            let mut slots = self.slots.borrow_mut();
            let slot = &mut slots[id];
            slot.queued = false;
            slot.fut.take()
        };
        let Some(mut fut) = fut else { return };
        self.events.set(self.events.get() + 1);
        let waker = task_waker(id);
        let mut cx = Context::from_waker(&waker);
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(()) => {
                let mut slots = self.slots.borrow_mut();
                slots[id] = Slot {
                    fut: None,
                    queued: false,
                    live: false,
                };
                self.free.borrow_mut().push(id);
                self.live.set(self.live.get() - 1);
            }
            Poll::Pending => self.slots.borrow_mut()[id].fut = Some(fut),
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

// Call wakers carry the packed call in the data pointer.
static CALL_VTABLE: RawWakerVTable = RawWakerVTable::new(
    |p| RawWaker::new(p, &CALL_VTABLE),
    |p| wake_call(p as usize),
    |p| wake_call(p as usize),
    |_| {},
);

fn wake_call(word: usize) {
    if let Some(core) = current() {
        core.ready.borrow_mut().push_back(word);
    }
}

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
        self.core.timers.borrow().len() + self.core.keyed.borrow().len()
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
        let _current = self.make_current();
        self.core.poll_every_live_task();
        self.core.drive(|c| c.next_timer(None));
        self.outcome()
    }

    /// Run what happens before simulated time `end` — the runnable tasks
    /// and calls, and the timers before `end`, in the order [`Executor::run`]
    /// would — and keep the timers at `end` or later (a window of a
    /// partitioned run, see [`super::windows`]). Returns the earliest kept
    /// timer's time (`None`: none). The first call polls every live task
    /// once, as `run` does; later ones only what was woken.
    pub fn run_until(&self, end: Ps) -> Option<Ps> {
        let _current = self.make_current();
        if !self.core.started.replace(true) {
            self.core.poll_every_live_task();
        }
        self.core.drive(|c| c.next_timer(Some(end)));
        let plain = self.core.timers.borrow().next_at();
        plain.into_iter().chain(self.core.keyed_next.get()).min()
    }

    /// Run `f` as if inside this executor's run, at its current time: what
    /// it spawns, wakes or schedules (`call_at`, `spawn`) goes to this
    /// executor (e.g. a message from another partition, delivered between
    /// two windows).
    pub fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        let _current = self.make_current();
        f()
    }

    /// Make it run partition `p` of a windowed run (see [`partition`]).
    pub fn set_partition(&self, p: usize) {
        self.core.partition.set(p);
    }

    /// How a run stands now: finished, or stalled with tasks that cannot
    /// go on (once no timer is pending and nothing is runnable; before,
    /// the tasks counted may only be waiting).
    pub fn outcome(&self) -> RunOutcome {
        match self.core.live.get() {
            0 => RunOutcome::Finished,
            blocked => RunOutcome::Stalled { blocked },
        }
    }

    /// This executor as the thread's current one until the guard drops.
    fn make_current(&self) -> Restore {
        Restore(CURRENT.with(|c| c.replace(Rc::as_ptr(&self.core))))
    }
}

impl Core {
    /// Wakes that happened while no executor was running were dropped
    /// (there was nowhere to queue them): poll every live task once.
    fn poll_every_live_task(&self) {
        let live: Vec<usize> = {
            let slots = self.slots.borrow();
            (0..slots.len()).filter(|&i| slots[i].wakeable()).collect()
        };
        for id in live {
            self.schedule(id);
        }
    }

    /// Run ready work and fire the timers `next_timer` hands out, until
    /// it hands out none and nothing is runnable.
    #[inline(always)]
    fn drive(&self, mut next_timer: impl FnMut(&Core) -> Option<(Ps, Target)>) {
        loop {
            loop {
                let next = self.ready.borrow_mut().pop_front();
                let Some(id) = next else { break };
                self.run_ready(id);
            }
            // Fire the earliest timer, then run what it woke. The ready
            // queue is empty here, so a timer that wakes one of our tasks
            // or a call runs it at once: what the queue would run next,
            // without passing through it (three times a ring step).
            let next = next_timer(self);
            let Some((at, target)) = next else { break };
            debug_assert!(at >= self.now.get(), "time went backwards");
            self.now.set(at);
            match target {
                Target::Task(id) => {
                    let runnable = self
                        .slots
                        .borrow()
                        .get(id as usize)
                        .is_some_and(Slot::wakeable);
                    if runnable {
                        self.poll_task(id as usize);
                    }
                }
                Target::Call(call) => self.run_call(call),
                Target::Foreign(i) => self.wake_foreign(i),
            }
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

/// Register `handler` on the running executor, for [`Call`]s to it.
pub fn register(handler: Handler) -> HandlerId {
    with_current(|c| {
        let mut h = c.handlers.borrow_mut();
        assert!(h.len() < (1 << 31), "engine: too many handlers");
        h.push(handler);
        HandlerId((h.len() - 1) as u32)
    })
}

/// An identity of the running executor, unique in the process: a
/// [`HandlerId`] is valid on the executor that registered it.
pub fn executor_id() -> usize {
    with_current(|c| c.id)
}

/// The partition of a windowed run (see [`super::windows`]) that the
/// running executor runs; 0 outside one, or outside any executor. A
/// model split into partitions finds its partition's state by it.
#[inline]
pub fn partition() -> usize {
    current().map_or(0, |c| c.partition.get())
}

/// Run `call` once every task and call runnable now has run, as a task
/// spawned now would first run.
pub fn call_soon(call: Call) {
    with_current(|c| c.ready.borrow_mut().push_back(call.pack()));
}

/// Run `call` at simulated time `at` (never before now), as a task
/// sleeping until `at` would be woken then.
pub fn call_at(at: Ps, call: Call) {
    with_current(|c| {
        debug_assert!(at >= c.now.get(), "a call in the past");
        c.timers.borrow_mut().push(at, Target::Call(call));
    });
}

/// Run `call` at simulated time `at`, at the place of `key` among the
/// keyed timers of that picosecond, before its plain timers (see
/// [`super::keyed`]).
pub fn call_keyed_at(at: Ps, key: OrderKey, call: Call) {
    with_current(|c| c.add_keyed(at, key, Target::Call(call)));
}

/// A future that completes at simulated time `at`, at the place of `key`
/// among the keyed timers of that picosecond (see [`super::keyed`]); at
/// once if `at` is past.
pub fn sleep_keyed_until(at: Ps, key: OrderKey) -> Sleep {
    Sleep {
        at,
        key: Some(key),
        armed: false,
    }
}

/// A waker that runs `call` when woken (e.g. left on an [`super::Event`]).
pub fn call_waker(call: Call) -> Waker {
    // SAFETY: the vtable functions never dereference the data pointer; it
    // is only the packed call.
    unsafe { Waker::from_raw(RawWaker::new(call.pack() as *const (), &CALL_VTABLE)) }
}

/// A future that completes at simulated time `at` (at once if past).
pub fn sleep_until(at: Ps) -> Sleep {
    Sleep {
        at,
        key: None,
        armed: false,
    }
}

/// A future that completes `d` picoseconds from now. Callers that add
/// untrusted durations compute the deadline with [`crate::units::add`] and
/// use [`sleep_until`]; this one never wraps (past the horizon it waits
/// forever, which the run reports as a stall).
pub fn sleep(d: Ps) -> Sleep {
    sleep_until(now().checked_add(d).unwrap_or(Ps::MAX))
}

/// See [`sleep_until`] and [`sleep_keyed_until`].
#[derive(Debug)]
pub struct Sleep {
    at: Ps,
    /// Its place among the keyed timers of `at` (`None`: a plain timer).
    key: Option<OrderKey>,
    armed: bool,
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let (at, key) = (self.at, self.key);
        with_current(|c| {
            let now = c.now.get();
            // A keyed sleep polled at `at` before its turn waits for it
            // (a later poll at `at`, once armed, is its timer: the engine
            // makes no stray wakes within a run).
            if now > at || (now == at && (key.is_none() || self.armed)) {
                Poll::Ready(())
            } else {
                if !self.armed {
                    self.armed = true;
                    match key {
                        None => c.add_timer(at, cx.waker()),
                        Some(key) => c.add_keyed(at, key, c.target_of(cx.waker())),
                    }
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

    /// Keyed timers fire before the plain ones of their picosecond, in key
    /// order, whatever order they were set in; a window's run keeps them
    /// past its end and reports the earliest.
    #[test]
    fn keyed_timers_fire_first_in_their_picosecond_by_key() {
        for windowed in [false, true] {
            let ex = Executor::new();
            let log = Arc::new(Mutex::new(Vec::new()));
            let mut tasks = Vec::new();
            // Set in this order: plain 50, keyed (9) 50, plain 20, keyed
            // (2) 50, keyed (5) 20.
            for (name, at, key) in [
                ("p50", 50u64, None),
                ("k9", 50, Some(9)),
                ("p20", 20, None),
                ("k2", 50, Some(2)),
                ("k5", 20, Some(5)),
            ] {
                let log = log.clone();
                tasks.push(ex.spawn(async move {
                    match key {
                        Some(k) => sleep_keyed_until(at, k).await,
                        None => sleep_until(at).await,
                    }
                    log.lock().unwrap().push((name, now()));
                }));
            }
            if windowed {
                assert_eq!(ex.run_until(20), Some(20));
                assert!(log.lock().unwrap().is_empty());
                assert_eq!(ex.run_until(21), Some(50));
                assert_eq!(ex.pending_timers(), 3);
                assert_eq!(ex.run_until(100), None);
            } else {
                assert_eq!(ex.run(), RunOutcome::Finished);
            }
            assert_eq!(
                *log.lock().unwrap(),
                [("k5", 20), ("p20", 20), ("k2", 50), ("k9", 50), ("p50", 50)],
                "windowed {windowed}"
            );
        }
    }

    /// A keyed sleep for a time already past ends at once; one for now
    /// waits for its turn among the keyed timers of now.
    #[test]
    fn a_keyed_sleep_for_now_takes_its_turn_and_one_for_the_past_ends_at_once() {
        let ex = Executor::new();
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        ex.spawn(async move {
            sleep(10).await;
            let l2 = l.clone();
            spawn(async move {
                sleep_keyed_until(10, 1).await;
                l2.lock().unwrap().push("keyed now");
            });
            sleep_keyed_until(3, 0).await;
            l.lock().unwrap().push("keyed past");
        });
        assert_eq!(ex.run(), RunOutcome::Finished);
        assert_eq!(*log.lock().unwrap(), ["keyed past", "keyed now"]);
        assert_eq!(ex.now(), 10);
    }

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
    fn calls_take_their_turn_with_tasks_in_the_ready_queue_and_the_timers() {
        let ex = Executor::new();
        let log = Rc::new(RefCell::new(Vec::new()));
        let ev = Event::new();
        let (l, e) = (log.clone(), ev.clone());
        ex.spawn(async move {
            let l2 = l.clone();
            let h = register(Rc::new(move |c: Call| l2.borrow_mut().push((c.arg, now()))));
            // Runnable now, after the task spawned before it.
            let later = spawn({
                let l = l.clone();
                async move { l.borrow_mut().push((100, now())) }
            });
            call_soon(Call { handler: h, arg: 1 });
            // Timers: the task's and the call's at 5 fire in creation order.
            call_at(5, Call { handler: h, arg: 2 });
            // Woken by an event, in the order waiting started.
            assert!(!e.is_set_or_wake(&call_waker(Call { handler: h, arg: 3 })));
            sleep(5).await;
            l.borrow_mut().push((200, now()));
            e.set();
            sleep(1).await;
            later.await;
        });
        assert_eq!(ex.run(), RunOutcome::Finished);
        assert_eq!(
            *log.borrow(),
            vec![(100, 0), (1, 0), (2, 5), (200, 5), (3, 5)]
        );
        // A call is an event of the executor, as a poll is.
        assert!(ex.events_processed() >= 3);
    }

    #[test]
    fn a_call_left_by_an_ended_run_is_dropped_by_the_next_executor() {
        let ev = Event::new();
        let first = Executor::new();
        let e = ev.clone();
        first.spawn(async move {
            let h = register(Rc::new(|_: Call| panic!("not on this executor")));
            assert!(!e.is_set_or_wake(&call_waker(Call { handler: h, arg: 0 })));
        });
        assert_eq!(first.run(), RunOutcome::Finished);
        let second = Executor::new();
        second.spawn(async move { ev.set() });
        assert_eq!(second.run(), RunOutcome::Finished);
    }

    #[test]
    fn handlers_belong_to_the_executor_that_registered_them() {
        let ids: Vec<usize> = (0..2)
            .map(|_| {
                let ex = Executor::new();
                let h = ex.spawn(async { executor_id() });
                ex.run();
                h.try_take().unwrap()
            })
            .collect();
        assert_ne!(ids[0], ids[1]);
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
