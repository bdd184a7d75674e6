//! The lock of simulator state: the machine's and the engine's shared
//! pieces (memory, links, per-PE queues, events) are touched by the
//! engine thread all the time and by the kernel-recording thread now and
//! then ([`crate::runtime`]'s prerecording), never for long.
//!
//! A ring step takes ~40 of these locks. `std::sync::Mutex` releases with
//! an atomic swap (it must see whether a thread sleeps on the lock), so
//! each lock and unlock was two locked instructions, each a full memory
//! barrier: a tenth of a native ring step. This one (the `spin` crate's)
//! releases with a plain store; a thread that finds it taken yields to
//! the holder instead of sleeping, which costs nothing here because the
//! two threads almost never want the same lock. There is no poisoning: a
//! panic while a lock is held (a caught recording panic) releases it as
//! it unwinds.

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
