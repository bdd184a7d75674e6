//! The locks of simulator state. [`Mutex`]: the pieces the engine thread
//! touches all the time and the kernel-recording thread now and then
//! ([`crate::runtime`]'s prerecording: the IPCQ ports, the address map,
//! events), never for long. [`OneThread`]: the pieces only the engine
//! thread touches (the PE engines' queues, the IPCQ rings, the command
//! tables, the link calendars).
//!
//! A ring step took ~46 [`Mutex`] locks (about ten are left: events,
//! signals, the IPCQ ports; the rest are [`OneThread`]). `std::sync::Mutex`
//! releases with an atomic swap (it must see whether a thread sleeps on
//! the lock), so each lock and unlock was two locked instructions, each a
//! full memory barrier: a tenth of a native ring step. This one (the
//! `spin` crate's) releases with a plain store; a thread that finds it
//! taken yields to the holder instead of sleeping, which costs nothing
//! here because the two threads almost never want the same lock. There
//! is no poisoning: a panic while a lock is held (a caught recording
//! panic) releases it as it unwinds.

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU32, Ordering};

/// See the module doc.
#[derive(Default)]
pub struct Mutex<T: ?Sized>(spin::mutex::SpinMutex<T, spin::relax::Yield>);

/// What [`Mutex::lock`] holds.
pub type MutexGuard<'a, T> = spin::mutex::SpinMutexGuard<'a, T>;

impl<T> Mutex<T> {
    pub const fn new(t: T) -> Self {
        Mutex(spin::mutex::SpinMutex::new(t))
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Wait for the lock (yielding the thread while another holds it).
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock()
    }
}

impl<T: ?Sized> std::fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Mutex { .. }")
    }
}

/// The lock of state that only one thread ever touches: the engine
/// thread's own (the DMA and compute queues of a PE, its routes and
/// blocked state, the IPCQ rings, the command tables, the link calendars).
///
/// A [`Mutex`] takes and gives back with a locked instruction each, a full
/// barrier that lets no cache miss overlap it; a ring step took ~46 locks.
/// This one binds to the first thread that locks it and from then on
/// takes and gives back with plain loads and stores of its state word (an
/// experiment with no locked instruction in any lock ran 10–11 % faster on
/// one core, at 256 and 1024 ranks; the ~36 of a step's locks that are
/// these took a 256-rank x 16 B run with 9 all-reduces from 0.84 to 0.76 s,
/// interleaved runs). Any other thread that locks it
/// panics before it touches the value (so the value is never shared, and
/// `Sync` holds); so does the owner locking it twice (where a [`Mutex`]
/// would spin forever). The kernel-recording helper thread touches only
/// the installed tables (the IPCQ ports, where each sending entry keeps
/// a copy of its ring's slot size, and the address map), which stay
/// behind a [`Mutex`].
pub struct OneThread<T: ?Sized> {
    /// The owner's [`thread_token`] (0: none yet), [`HELD`] while locked.
    state: AtomicU32,
    value: UnsafeCell<T>,
}

/// The bit of [`OneThread::state`] set while its owner holds it.
const HELD: u32 = 1;

// SAFETY: `value` is only reached through a guard, which only the owner
// thread gets (every other thread panics in `lock` before it reads or
// writes anything but the state word, and it only ever writes that word
// with a compare-exchange from 0, which fails once an owner is bound).
// The value may be dropped on another thread (it is moved, not shared,
// then), hence `T: Send`.
unsafe impl<T: ?Sized + Send> Sync for OneThread<T> {}

impl<T> OneThread<T> {
    pub const fn new(t: T) -> Self {
        OneThread {
            state: AtomicU32::new(0),
            value: UnsafeCell::new(t),
        }
    }

    /// Its value (no lock: it is owned).
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

impl<T: Default> Default for OneThread<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T: ?Sized> OneThread<T> {
    /// Hold it: its thread's alone. Binds it to this thread on first use.
    ///
    /// # Panics
    ///
    /// On a thread other than the one it is bound to, and when this
    /// thread holds it already.
    #[inline]
    #[track_caller]
    pub fn lock(&self) -> OneThreadGuard<'_, T> {
        let me = thread_token();
        let state = self.state.load(Ordering::Relaxed);
        if state != me {
            self.bind(state, me);
        }
        self.state.store(me | HELD, Ordering::Relaxed);
        OneThreadGuard {
            cell: self,
            owner: me,
            _not_send: PhantomData,
        }
    }

    #[cold]
    #[inline(never)]
    #[track_caller]
    fn bind(&self, state: u32, me: u32) {
        if state == me | HELD {
            panic!("engine state locked twice by its own thread");
        }
        if !(state == 0 || may_take_over(state, me))
            || self
                .state
                .compare_exchange(state, me, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            panic!("engine state locked by a second thread (it is the engine thread's alone)");
        }
    }
}

impl<T: ?Sized> std::fmt::Debug for OneThread<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OneThread { .. }")
    }
}

/// What [`OneThread::lock`] holds; it stays on its thread.
pub struct OneThreadGuard<'a, T: ?Sized> {
    cell: &'a OneThread<T>,
    owner: u32,
    _not_send: PhantomData<*const ()>,
}

impl<T: ?Sized> Deref for OneThreadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only on the owner thread, and only one
        // at a time (`lock` refuses a second).
        unsafe { &*self.cell.value.get() }
    }
}

impl<T: ?Sized> DerefMut for OneThreadGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this borrow unique.
        unsafe { &mut *self.cell.value.get() }
    }
}

impl<T: ?Sized> Drop for OneThreadGuard<'_, T> {
    fn drop(&mut self) {
        self.cell.state.store(self.owner, Ordering::Relaxed);
    }
}

/// The bit of a [`thread_token`] that marks a thread of a windowed run
/// (see [`windows_phase`]).
const WINDOWS_THREAD: u32 = 2;

/// The next thread token (see [`thread_token`]).
static NEXT_TOKEN: AtomicU32 = AtomicU32::new(4);

/// A windowed run: its threads' tokens (`first..end`, given out by
/// [`windows_phase`] before its threads start) and the thread that ran it
/// (blocked in it while they ran).
struct Run {
    first: u32,
    end: u32,
    serial: u32,
    live: bool,
}

/// Every windowed run of the process, by `first` (read only where state
/// changes threads, not where it is locked).
static RUNS: std::sync::Mutex<Vec<Run>> = std::sync::Mutex::new(Vec::new());

thread_local! {
    static TOKEN: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// This thread's number for [`OneThread`]: a multiple of 4 (bit 0 is
/// [`HELD`], bit 1 [`WINDOWS_THREAD`]), nonzero, never reused by another
/// thread of the process.
fn thread_token() -> u32 {
    TOKEN.with(|t| match t.get() {
        0 => {
            let token = NEXT_TOKEN.fetch_add(4, Ordering::Relaxed);
            assert!(token != 0, "more than 2^30 threads");
            t.set(token);
            token
        }
        token => token,
    })
}

/// Whether thread `me` may take state that thread `owner` bound and does
/// not hold, because the model moved between an engine thread and the
/// threads of its windowed runs ([`windows_phase`]): a thread of a run
/// takes what the run's engine thread (blocked in the run) or a thread
/// of one of its earlier runs (joined) left; the engine thread takes back
/// what its ended runs' threads left. Each such owner is done with the
/// state, and its last touch happened before the taker began (a thread's
/// spawn and join order them), so the value is never shared. Two threads
/// of one run that want the same state still meet the panic (the second
/// finds the first's token), as does any other thread.
fn may_take_over(owner: u32, me: u32) -> bool {
    if owner & HELD != 0 {
        return false;
    }
    may_take_over_in(&RUNS.lock().unwrap_or_else(|p| p.into_inner()), owner, me)
}

/// [`may_take_over`] by the registry `runs` (the owner not holding it).
fn may_take_over_in(runs: &[Run], owner: u32, me: u32) -> bool {
    let run_of = |token: u32| {
        let i = runs.partition_point(|r| r.first <= token);
        i.checked_sub(1)
            .map(|i| &runs[i])
            .filter(|r| token < r.end && token & WINDOWS_THREAD != 0)
    };
    let ended_run_of =
        |token: u32, serial: u32| run_of(token).is_some_and(|r| !r.live && r.serial == serial);
    match run_of(me) {
        Some(mine) => owner == mine.serial || ended_run_of(owner, mine.serial),
        None => ended_run_of(owner, me),
    }
}

/// Run `f`, which runs a model on `threads` threads of its own (see
/// [`super::windows`]) while this thread waits for them. `f` is given the
/// first of their tokens: thread `t` calls [`become_windows_thread`]
/// with it before it locks anything, and may then take the engine state
/// this thread left (see [`may_take_over`]); this thread may take it back
/// once `f` has returned.
pub(crate) fn windows_phase<R>(threads: usize, f: impl FnOnce(u32) -> R) -> R {
    let me = thread_token();
    let first = {
        let mut runs = RUNS.lock().unwrap_or_else(|p| p.into_inner());
        let span = u32::try_from(threads * 4).expect("fewer than 2^30 threads");
        let first = NEXT_TOKEN.fetch_add(span, Ordering::Relaxed);
        assert!(first.checked_add(span).is_some(), "more than 2^30 threads");
        runs.push(Run {
            first,
            end: first + span,
            serial: me,
            live: true,
        });
        first
    };
    struct Ended(u32);
    impl Drop for Ended {
        fn drop(&mut self) {
            end_run(&mut RUNS.lock().unwrap_or_else(|p| p.into_inner()), self.0);
        }
    }
    let _ended = Ended(first);
    f(first)
}

/// Mark the run whose first token is `first` ended. A thread's ended
/// runs in a row keep one entry (a sweep runs thousands): the tokens
/// between them are ordinary threads', never taken as a run's (they lack
/// [`WINDOWS_THREAD`]), and no other run's lie there (entries are in
/// token order and only neighbours merge), so the merged range answers
/// [`may_take_over`] as the runs did.
fn end_run(runs: &mut Vec<Run>, first: u32) {
    if let Some(i) = runs.iter().position(|r| r.first == first) {
        runs[i].live = false;
        if i > 0 && !runs[i - 1].live && runs[i - 1].serial == runs[i].serial {
            runs[i - 1].end = runs[i].end;
            runs.remove(i);
        }
    }
}

/// Whether this thread is one of a windowed run's.
pub fn is_windows_thread() -> bool {
    thread_token() & WINDOWS_THREAD != 0
}

/// Make this new thread thread `t` of the windowed run whose first token
/// is `first` (before it locks anything).
pub(crate) fn become_windows_thread(first: u32, t: usize) {
    TOKEN.with(|token| {
        assert_eq!(token.get(), 0, "a windows thread is a new thread");
        token.set((first + 4 * t as u32) | WINDOWS_THREAD);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn its_thread_locks_it_again_and_again() {
        let c = OneThread::new(1);
        *c.lock() += 1;
        *c.lock() += 1;
        assert_eq!(*c.lock(), 3);
    }

    #[test]
    fn a_second_thread_is_refused_before_it_touches_the_value() {
        let c = Arc::new(OneThread::new(vec![1]));
        c.lock().push(2);
        let other = c.clone();
        let refused = std::thread::spawn(move || other.lock().len()).join();
        assert!(refused.is_err());
        assert_eq!(*c.lock(), vec![1, 2]);
    }

    #[test]
    fn the_first_thread_to_lock_it_owns_it() {
        let c = Arc::new(OneThread::new(0));
        let other = c.clone();
        std::thread::spawn(move || *other.lock() = 7)
            .join()
            .unwrap();
        let here = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| *c.lock()));
        assert!(here.is_err());
        assert_eq!(Arc::try_unwrap(c).unwrap().into_inner(), 7);
    }

    /// Runs `body(t)` on `threads` threads of a windowed run of this
    /// thread; whether each ended without a panic.
    fn windowed(threads: usize, body: impl Fn(usize) + Sync) -> Vec<bool> {
        windows_phase(threads, |first| {
            std::thread::scope(|s| {
                let hs: Vec<_> = (0..threads)
                    .map(|t| {
                        let body = &body;
                        s.spawn(move || {
                            become_windows_thread(first, t);
                            body(t)
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().is_ok()).collect()
            })
        })
    }

    /// State moves from the engine thread to a thread of its windowed run
    /// and back, and to a thread of its next run; two threads of one run
    /// still cannot share it, nor can a thread outside the runs take it.
    #[test]
    fn state_moves_between_the_engine_thread_and_its_windowed_runs() {
        let (a, b) = (OneThread::new(0), OneThread::new(0));
        *a.lock() += 1;
        *b.lock() += 1;
        // Each run's thread takes its own; the engine thread takes back.
        assert_eq!(windowed(2, |t| *[&a, &b][t].lock() += 10), [true, true]);
        assert_eq!((*a.lock(), *b.lock()), (11, 11));
        // Left by a run's thread, taken by the next run's.
        assert_eq!(windowed(1, |_| *a.lock() += 100), [true]);
        assert_eq!(windowed(1, |_| *a.lock() += 100), [true]);
        assert_eq!(*a.lock(), 211);
        // Two threads of one run: one of them is refused.
        let c = OneThread::new(0);
        let both = windowed(2, |_| {
            let mut g = c.lock();
            *g += 1;
            std::thread::sleep(std::time::Duration::from_millis(20));
            drop(g);
            *c.lock() += 1;
        });
        assert_eq!(both.iter().filter(|ok| **ok).count(), 1, "{both:?}");
        // A thread outside the runs takes nothing from them.
        let d = Arc::new(OneThread::new(0));
        let dd = d.clone();
        assert_eq!(windowed(1, move |_| *dd.lock() += 1), [true]);
        let other = d.clone();
        assert!(std::thread::spawn(move || *other.lock()).join().is_err());
        assert_eq!(*d.lock(), 1);
    }

    /// A thread's ended runs in a row keep one entry of the registry and
    /// answer as each did; a run of another thread between them keeps
    /// its own. (On a registry of its own: the process's is shared by
    /// every test running at once.)
    #[test]
    fn a_thread_s_ended_runs_in_a_row_keep_one_entry() {
        let (s, t, ordinary) = (100, 104, 4);
        let mut runs = Vec::new();
        let run = |runs: &mut Vec<Run>, first: u32, serial: u32| {
            runs.push(Run {
                first,
                end: first + 8,
                serial,
                live: true,
            })
        };
        let windows = |first: u32| first | WINDOWS_THREAD;
        for k in 0..10 {
            // An ordinary thread's token between each two runs.
            let first = 1000 + 12 * k;
            run(&mut runs, first, s);
            end_run(&mut runs, first);
        }
        assert_eq!(runs.len(), 1);
        assert_eq!((runs[0].first, runs[0].end), (1000, 1116));
        // The thread takes back what any of its runs left, the next
        // run's thread too; no ordinary thread, nor another's run.
        run(&mut runs, 2000, s);
        run(&mut runs, 3000, t);
        for left in [windows(1000), windows(1060), windows(1108)] {
            assert!(may_take_over_in(&runs, left, s));
            assert!(may_take_over_in(&runs, left, windows(2000)));
            assert!(!may_take_over_in(&runs, left, 1012 + ordinary));
            assert!(!may_take_over_in(&runs, left, windows(3000)));
        }
        // A live run is not taken from, and another thread's run between
        // two of this one's keeps them apart.
        assert!(!may_take_over_in(&runs, windows(2000), s));
        end_run(&mut runs, 2000);
        end_run(&mut runs, 3000);
        run(&mut runs, 4000, s);
        end_run(&mut runs, 4000);
        assert_eq!(runs.len(), 3, "s's runs, t's, s's last");
        assert!(may_take_over_in(&runs, windows(2000), s));
        assert!(may_take_over_in(&runs, windows(4000), s));
        assert!(!may_take_over_in(&runs, windows(3000), s));
        assert!(may_take_over_in(&runs, windows(3000), t));
    }

    #[test]
    #[should_panic(expected = "locked twice")]
    fn locking_it_twice_is_a_panic_not_a_hang() {
        let c = OneThread::new(0);
        let _a = c.lock();
        let _b = c.lock();
    }
}
