//! Synchronisation primitives for simulated tasks: a one-shot [`Event`]
//! latch, a repeating [`Signal`] and [`JoinHandle`]. All are `Send +
//! Sync` so that they can be held across awaits in wasm host functions
//! (whose futures must be `Send`); they are only ever touched from the
//! executor's thread.

use crate::engine::lock::Mutex;
use smallvec::SmallVec;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
struct EventState {
    /// Set once, never cleared: read without the lock (most reads find
    /// an event already set or not yet, and need nothing else).
    set: AtomicBool,
    /// Most events have one waiter (a command's completion awaited by the
    /// next command or the kernel): no allocation for it.
    waiters: Mutex<SmallVec<[Waker; 1]>>,
}

/// A one-shot latch: once set, every present and future waiter proceeds.
#[derive(Clone, Default)]
pub struct Event(Arc<EventState>);

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Event(set={})", self.is_set())
    }
}

impl Event {
    pub fn new() -> Self {
        Self::default()
    }

    /// An event that is already set.
    pub fn done() -> Self {
        let e = Self::new();
        e.set();
        e
    }

    /// A number that identifies this event (and its clones) while it is
    /// alive.
    pub fn identity(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    pub fn is_set(&self) -> bool {
        self.0.set.load(Ordering::Acquire)
    }

    /// Set the latch and wake all waiters (in the order they started waiting).
    pub fn set(&self) {
        let waiters = {
            let mut w = self.0.waiters.lock();
            // Under the lock: a waiter that saw it unset has registered.
            self.0.set.store(true, Ordering::Release);
            std::mem::take(&mut *w)
        };
        for w in waiters {
            w.wake();
        }
    }

    /// `true` if set; else `waker` is woken when it is (as a task waiting
    /// on it would be, in the order waiting started): for a waiter that
    /// is not a future (an engine [`crate::engine::Call`]).
    pub fn is_set_or_wake(&self, waker: &Waker) -> bool {
        if self.is_set() {
            return true;
        }
        let mut w = self.0.waiters.lock();
        if self.0.set.load(Ordering::Acquire) {
            return true;
        }
        w.push(waker.clone());
        false
    }

    /// Completes once the event is set. It borrows the event (no count
    /// change of a shared event per wait: a ring step waits ~5 times).
    pub fn wait(&self) -> EventWait<'_> {
        EventWait {
            ev: self,
            registered: false,
        }
    }
}

/// Future of [`Event::wait`].
pub struct EventWait<'a> {
    ev: &'a Event,
    registered: bool,
}

impl Future for EventWait<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.ev.is_set() {
            return Poll::Ready(());
        }
        let mut w = self.ev.0.waiters.lock();
        // Set between the check and the lock: `set` took the waiters
        // before we could register.
        if self.ev.0.set.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        if !self.registered {
            w.push(cx.waker().clone());
            drop(w);
            self.registered = true;
        }
        Poll::Pending
    }
}

/// A notification that may fire any number of times: a waiter observes
/// the current generation, then waits until a later `notify`. Unlike an
/// [`Event`] replaced after each firing, nothing is allocated per
/// notification.
#[derive(Clone, Default)]
pub struct Signal(Arc<Mutex<SignalState>>);

#[derive(Default)]
struct SignalState {
    generation: u64,
    waiters: SmallVec<[Waker; 1]>,
}

impl Signal {
    pub fn new() -> Self {
        Self::default()
    }

    /// Notifications so far.
    pub fn generation(&self) -> u64 {
        self.0.lock().generation
    }

    /// Fire: wake every waiter (in the order they started waiting).
    pub fn notify(&self) {
        let waiters = {
            let mut s = self.0.lock();
            s.generation += 1;
            std::mem::take(&mut s.waiters)
        };
        for w in waiters {
            w.wake();
        }
    }

    /// Completes once the signal has fired after `generation` (at once if
    /// it already has).
    pub fn wait_past(&self, generation: u64) -> SignalWait {
        SignalWait {
            signal: self.clone(),
            generation,
            registered: false,
        }
    }
}

impl std::fmt::Debug for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Signal(generation={})", self.generation())
    }
}

/// Future of [`Signal::wait_past`].
pub struct SignalWait {
    signal: Signal,
    generation: u64,
    registered: bool,
}

impl Future for SignalWait {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.signal.0.lock();
        if s.generation > self.generation {
            return Poll::Ready(());
        }
        if !self.registered {
            s.waiters.push(cx.waker().clone());
            drop(s);
            self.registered = true;
        }
        Poll::Pending
    }
}

struct JoinState<T> {
    value: Option<T>,
    done: Event,
}

/// The result of a spawned task; await it or [`JoinHandle::try_take`].
pub struct JoinHandle<T>(Arc<Mutex<JoinState<T>>>);

pub(super) struct JoinSender<T>(Arc<Mutex<JoinState<T>>>);

pub(super) fn join_pair<T>() -> (JoinSender<T>, JoinHandle<T>) {
    let s = Arc::new(Mutex::new(JoinState {
        value: None,
        done: Event::new(),
    }));
    (JoinSender(s.clone()), JoinHandle(s))
}

impl<T> JoinSender<T> {
    pub(super) fn complete(self, v: T) {
        let done = {
            let mut s = self.0.lock();
            s.value = Some(v);
            s.done.clone()
        };
        done.set();
    }
}

impl<T> JoinHandle<T> {
    /// The task's output, if it has finished and was not taken yet.
    pub fn try_take(&self) -> Option<T> {
        self.0.lock().value.take()
    }

    /// An event set when the task finishes.
    pub fn finished(&self) -> Event {
        self.0.lock().done.clone()
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut s = self.0.lock();
        if let Some(v) = s.value.take() {
            return Poll::Ready(v);
        }
        let done = s.done.clone();
        drop(s);
        // Register on the completion event; re-check after registering.
        let mut w = done.wait();
        match Pin::new(&mut w).poll(cx) {
            Poll::Ready(()) => match self.0.lock().value.take() {
                Some(v) => Poll::Ready(v),
                None => panic!("JoinHandle polled after its value was taken"),
            },
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{now, sleep, Executor, RunOutcome};

    #[test]
    fn a_signal_wakes_those_waiting_past_what_they_saw_and_fires_again() {
        let ex = Executor::new();
        let sig = Signal::new();
        let log = Arc::new(Mutex::new(Vec::new()));
        for name in ["a", "b"] {
            let (sig, log) = (sig.clone(), log.clone());
            ex.spawn(async move {
                for _ in 0..2 {
                    let g = sig.generation();
                    sig.wait_past(g).await;
                    log.lock().push((name, now()));
                }
            });
        }
        let s = sig.clone();
        ex.spawn(async move {
            for _ in 0..2 {
                sleep(10).await;
                s.notify();
            }
        });
        assert_eq!(ex.run(), RunOutcome::Finished);
        assert_eq!(
            *log.lock(),
            vec![("a", 10), ("b", 10), ("a", 20), ("b", 20)]
        );
        // A generation already past completes at once.
        let late = Executor::new();
        let s2 = sig.clone();
        late.spawn(async move { s2.wait_past(0).await });
        assert_eq!(late.run(), RunOutcome::Finished);
        assert_eq!(sig.generation(), 2);
    }
}
