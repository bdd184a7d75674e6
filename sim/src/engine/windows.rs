//! Conservative parallel windows: a model split into partitions, each
//! with its own [`Executor`] on one of a few threads, advancing together
//! through windows of simulated time no longer than the *lookahead* — the
//! least delay between an event in one partition and its effect in
//! another (for the machine, an `inter_sip` link's 500 ns). What one
//! partition does to another travels as a message posted with [`Post`]
//! for a time at least the lookahead ahead, so it always falls in a later
//! window, and is handed over between windows.
//!
//! The same partitions give the same run whatever the number of threads:
//! within a window each partition runs alone, in the order its own
//! executor gives; messages reach a partition sorted by (time, sender,
//! sender's sequence), not in the order threads happened to post them.
//! Windows skip empty stretches: the next starts at the earliest pending
//! timer or message of any partition.
//!
//! Not yet used by the machine model (see docs/performance-history.md,
//! "What two simulation threads could give here"): it is the engine half of a
//! simulation split by groups of SIPs.

use super::executor::{now, Executor, RunOutcome};
use crate::units::Ps;
use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Mutex;

/// The threads' meeting point between windows: each waits until all
/// have arrived. Spins first (a window of a busy model is tens to
/// hundreds of microseconds of work, and a thread put to sleep and woken
/// by the kernel cost that much again: `std::sync::Barrier` took a
/// 2-partition PHOLD with 500 ps windows to 1.26x the one-thread speed on
/// two threads, this one to 1.4-1.7x, see benches/engine_phold.rs), then
/// yields its core to whatever else wants it (the data thread, another
/// process). With more threads than cores it does not spin: a spinning
/// thread would hold the core the last one needs to arrive.
struct SpinBarrier {
    threads: usize,
    spins: u32,
    arrived: std::sync::atomic::AtomicUsize,
    generation: std::sync::atomic::AtomicUsize,
}

impl SpinBarrier {
    fn new(threads: usize) -> Self {
        SpinBarrier {
            threads,
            spins: if threads <= crate::cores::count() {
                SPINS_BEFORE_YIELDING
            } else {
                0
            },
            arrived: Default::default(),
            generation: Default::default(),
        }
    }

    fn wait(&self) {
        use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};
        let generation = self.generation.load(Acquire);
        if self.arrived.fetch_add(1, AcqRel) + 1 == self.threads {
            self.arrived.store(0, Release);
            self.generation.fetch_add(1, Release);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Acquire) == generation {
            if spins < self.spins {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// Spins of a waiting thread before it yields its core (~tens of µs).
const SPINS_BEFORE_YIELDING: u32 = 1 << 14;

/// A message on its way to another partition.
struct Mail<M> {
    at: Ps,
    from: usize,
    seq: u64,
    msg: M,
}

/// A partition's way to post messages to the others (see the module doc).
pub struct Post<M> {
    me: usize,
    parts: usize,
    lookahead: Ps,
    /// The start of the window being run or about to run (messages are
    /// delivered at it, whatever the executor's clock says).
    window_start: Cell<Ps>,
    seq: Cell<u64>,
    out: RefCell<Vec<(usize, Mail<M>)>>,
}

impl<M> Post<M> {
    fn new(me: usize, parts: usize, lookahead: Ps) -> Self {
        Post {
            me,
            parts,
            lookahead,
            window_start: Cell::new(0),
            seq: Cell::new(0),
            out: RefCell::default(),
        }
    }

    /// This partition's number.
    pub fn me(&self) -> usize {
        self.me
    }

    /// Hand `msg` to partition `to` at simulated time `at`, which must be
    /// at least the lookahead after now (after the window's start, for a
    /// message posted while one is delivered): a model that posts sooner
    /// has no place in a conservative run (a bug of the model, so a
    /// panic).
    pub fn send(&self, to: usize, at: Ps, msg: M) {
        assert!(to < self.parts, "no partition {to} of {}", self.parts);
        let earliest = now()
            .max(self.window_start.get())
            .saturating_add(self.lookahead);
        assert!(
            at >= earliest,
            "partition {} posted for {at} ps, before now + the lookahead ({earliest} ps)",
            self.me
        );
        let seq = self.seq.get();
        self.seq.set(seq + 1);
        self.out.borrow_mut().push((
            to,
            Mail {
                at,
                from: self.me,
                seq,
                msg,
            },
        ));
    }
}

/// How a model is split and run.
#[derive(Debug, Clone, Copy)]
pub struct Windows {
    /// Partitions of the model.
    pub parts: usize,
    /// The longest window: at most the least delay of a message.
    pub lookahead: Ps,
    /// Threads that run them (partition `p` on thread `p % threads`; at
    /// most one a partition).
    pub threads: usize,
}

/// How one partition's run ended.
#[derive(Debug, Clone)]
pub struct PartitionEnd {
    pub outcome: RunOutcome,
    /// Timer events fired and task polls made.
    pub events: u64,
    /// Simulated time of its last event.
    pub time: Ps,
    /// Windows it ran.
    pub windows: u64,
    /// Wall time spent running its windows (the rest of its thread's,
    /// but for its thread's other partitions, went waiting for the
    /// other threads): a performance figure, not a result.
    pub busy: std::time::Duration,
}

/// What a message does on arrival: called between windows, inside the
/// receiving partition's executor, with the message's time (typically it
/// schedules the work for then with `call_at`, or spawns a task that
/// sleeps until it).
pub type Deliver<M> = Box<dyn FnMut(Ps, M)>;

struct Partition<M> {
    index: usize,
    ex: Executor,
    post: Rc<Post<M>>,
    deliver: Deliver<M>,
    /// Messages posted to it in the windows before, to deliver.
    mail: Vec<Mail<M>>,
    windows: u64,
    busy: std::time::Duration,
}

impl<M> Partition<M> {
    /// Partition `index`, made by `build` inside its own executor.
    fn new<B>(index: usize, plan: Windows, build: &B) -> Self
    where
        B: Fn(usize, Rc<Post<M>>) -> Deliver<M>,
    {
        let ex = Executor::new();
        ex.set_partition(index);
        let post = Rc::new(Post::new(index, plan.parts, plan.lookahead));
        let deliver = ex.enter(|| build(index, post.clone()));
        Partition {
            index,
            ex,
            post,
            deliver,
            mail: Vec::new(),
            windows: 0,
            busy: std::time::Duration::ZERO,
        }
    }

    /// Window `[start, end)`: deliver its mail, run it, post what it sent
    /// to `inboxes`. Returns the earliest of its next timer and the
    /// messages it sent.
    fn run_window(&mut self, start: Ps, end: Ps, inboxes: &[Mutex<Vec<Mail<M>>>]) -> Option<Ps> {
        let began = std::time::Instant::now();
        self.post.window_start.set(start);
        let mut mail = std::mem::take(&mut self.mail);
        mail.sort_by_key(|m| (m.at, m.from, m.seq));
        let deliver = &mut self.deliver;
        self.ex.enter(|| {
            for m in mail {
                deliver(m.at, m.msg);
            }
        });
        let mut earliest = self.ex.run_until(end);
        for (to, mail) in self.post.out.take() {
            earliest = Some(earliest.map_or(mail.at, |e| e.min(mail.at)));
            inboxes[to].lock().unwrap().push(mail);
        }
        self.windows += 1;
        self.busy += began.elapsed();
        earliest
    }

    fn end(&self) -> PartitionEnd {
        PartitionEnd {
            outcome: self.ex.outcome(),
            events: self.ex.events_processed(),
            time: self.ex.now(),
            windows: self.windows,
            busy: self.busy,
        }
    }
}

/// What the threads of a run share.
struct Shared<M> {
    plan: Windows,
    threads: usize,
    /// Each partition's messages posted in the current window.
    inboxes: Vec<Mutex<Vec<Mail<M>>>>,
    /// Each thread's earliest pending timer or posted message (`None`:
    /// nothing), read by all after a window's first barrier.
    next: Vec<Mutex<Option<Ps>>>,
    barrier: SpinBarrier,
    /// The first panic of any thread; the others stop at the next window.
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    failed: AtomicBool,
}

impl<M> Shared<M> {
    fn note_panic(&self, p: Box<dyn std::any::Any + Send>) {
        self.failed.store(true, SeqCst);
        self.panic.lock().unwrap().get_or_insert(p);
    }

    /// Thread `t`: make its partitions, run them window after window
    /// with the other threads, and return how each ended.
    fn thread<B>(&self, t: usize, build: &B) -> Vec<(usize, PartitionEnd)>
    where
        B: Fn(usize, Rc<Post<M>>) -> Deliver<M>,
    {
        let plan = self.plan;
        let mut mine: Vec<Partition<M>> = Vec::new();
        let made = catch_unwind(AssertUnwindSafe(|| {
            for index in (t..plan.parts).step_by(self.threads) {
                mine.push(Partition::new(index, plan, build));
            }
        }));
        if let Err(p) = made {
            self.note_panic(p);
        }
        let mut start: Ps = 0;
        loop {
            let end = start.saturating_add(plan.lookahead);
            if !self.failed.load(SeqCst) {
                let window = catch_unwind(AssertUnwindSafe(|| {
                    mine.iter_mut()
                        .filter_map(|part| part.run_window(start, end, &self.inboxes))
                        .min()
                }));
                match window {
                    Ok(earliest) => *self.next[t].lock().unwrap() = earliest,
                    Err(p) => self.note_panic(p),
                }
            }
            self.barrier.wait();
            // What the window posted, for the next one (not this one: a
            // partition run later in the window must not see it sooner
            // than one run earlier).
            for part in mine.iter_mut() {
                part.mail = std::mem::take(&mut *self.inboxes[part.index].lock().unwrap());
            }
            let global = self.next.iter().filter_map(|n| *n.lock().unwrap()).min();
            let stop = self.failed.load(SeqCst) || global.is_none() || end == Ps::MAX;
            // Every thread has read the others' figures before any writes
            // its next.
            self.barrier.wait();
            if stop {
                break;
            }
            start = global.map_or(end, |g| g.max(end));
        }
        mine.iter().map(|part| (part.index, part.end())).collect()
    }
}

/// Run a model of `plan.parts` partitions to its end. `build(p, post)`
/// makes partition `p` on the thread that will run it, inside its
/// executor (so it can spawn its tasks there), and returns what to do
/// with its messages. Returns each partition's end, in partition order.
/// A panic in a partition ends every thread at the next window and is
/// raised again here.
pub fn run_windows<M, B>(plan: Windows, build: B) -> Vec<PartitionEnd>
where
    M: Send,
    B: Fn(usize, Rc<Post<M>>) -> Deliver<M> + Sync,
{
    assert!(plan.parts > 0 && plan.lookahead > 0, "{plan:?}");
    let threads = plan.threads.clamp(1, plan.parts);
    let shared = Shared {
        plan,
        threads,
        inboxes: (0..plan.parts).map(|_| Mutex::default()).collect(),
        next: (0..threads).map(|_| Mutex::default()).collect(),
        barrier: SpinBarrier::new(threads),
        panic: Mutex::new(None),
        failed: AtomicBool::new(false),
    };
    // The threads may take the engine state this thread left, and this
    // one takes it back after (see `lock::windows_phase`).
    let mut ends: Vec<(usize, PartitionEnd)> = super::lock::windows_phase(threads, |first| {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (shared, build) = (&shared, &build);
                    scope.spawn(move || {
                        super::lock::become_windows_thread(first, t);
                        shared.thread(t, build)
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        })
    });
    if let Some(p) = shared.panic.into_inner().unwrap() {
        std::panic::resume_unwind(p);
    }
    ends.sort_by_key(|(i, _)| *i);
    ends.into_iter().map(|(_, e)| e).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{sleep, sleep_until, spawn_detached};
    use std::sync::Arc;

    fn xorshift(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    const LPS: usize = 64;
    const LOOKAHEAD: Ps = 500;

    /// A hop of a job: (time, job, logical process), as logged by the
    /// partition that made it.
    type Hops = Vec<Vec<(Ps, u64, usize)>>;
    type Log = Arc<Mutex<Hops>>;

    /// Job `id`'s first random state.
    fn seed_of(id: u64) -> u64 {
        0x9E37_79B9 ^ ((id + 1) * 0x2545_F491)
    }

    /// A PHOLD job: hops `left` more times from LP to LP after random
    /// delays; a hop to an LP of another partition (LP `l` belongs to
    /// partition `l % parts`) is a message at least the lookahead later.
    fn job(post: Rc<Post<(u64, u64, u64)>>, log: Log, id: u64, mut seed: u64, left: u64) {
        spawn_detached(async move {
            let parts = post.parts;
            for n in (0..left).rev() {
                sleep(xorshift(&mut seed) % 700 + 1).await;
                let lp = (xorshift(&mut seed) % LPS as u64) as usize;
                log.lock().unwrap()[post.me()].push((now(), id, lp));
                let to = lp % parts;
                if to != post.me() && n > 0 {
                    // On a coarse grid: messages from several partitions
                    // for the same time, whose order must not depend on
                    // which thread posted first.
                    let at =
                        (now() + LOOKAHEAD).next_multiple_of(100) + xorshift(&mut seed) % 3 * 100;
                    post.send(to, at, (id, seed, n));
                    return;
                }
            }
        });
    }

    /// How each partition ended: its outcome, events and last time.
    type Ends = Vec<(RunOutcome, u64, Ps)>;

    fn phold(parts: usize, threads: usize, jobs: u64) -> (Ends, Hops) {
        let log: Log = Arc::new(Mutex::new(vec![Vec::new(); parts]));
        let ends = run_windows(
            Windows {
                parts,
                lookahead: LOOKAHEAD,
                threads,
            },
            |p, post: Rc<Post<(u64, u64, u64)>>| {
                for id in (0..jobs).filter(|j| *j as usize % parts == p) {
                    job(post.clone(), log.clone(), id, seed_of(id), 200);
                }
                let (post, log) = (post.clone(), log.clone());
                Box::new(move |at, (id, seed, left)| {
                    // Delivered: logged in the order of delivery.
                    log.lock().unwrap()[post.me()].push((at, id, usize::MAX));
                    let (post, log) = (post.clone(), log.clone());
                    spawn_detached(async move {
                        sleep_until(at).await;
                        job(post, log, id, seed, left);
                    });
                })
            },
        );
        let log = Arc::try_unwrap(log).unwrap().into_inner().unwrap();
        // Every partition ran windows, and took time to.
        assert!(ends
            .iter()
            .all(|e| e.windows > 0 && e.busy > std::time::Duration::ZERO));
        let ends = ends.into_iter().map(|e| (e.outcome, e.events, e.time));
        (ends.collect(), log)
    }

    #[test]
    fn the_same_partitions_give_the_same_run_on_any_number_of_threads() {
        let (one, log) = phold(4, 1, 40);
        // Every hop happened, and jobs crossed partitions.
        let hops = |l: &[(Ps, u64, usize)]| l.iter().filter(|h| h.2 != usize::MAX).count();
        assert_eq!(log.iter().map(|l| hops(l)).sum::<usize>(), 40 * 200);
        assert!(
            log.iter().all(|l| l.len() > 1000),
            "{:?}",
            log.iter().map(Vec::len).collect::<Vec<_>>()
        );
        for threads in [2, 3, 4, 8] {
            let (ends, again) = phold(4, threads, 40);
            assert_eq!(ends, one, "{threads} threads");
            assert!(again == log, "{threads} threads: another order of hops");
        }
        assert!(one.iter().all(|e| e.0 == RunOutcome::Finished));
    }

    #[test]
    fn one_partition_runs_as_the_executor_alone() {
        // No messages: windows must not change what runs when.
        let (ends, log) = phold(1, 1, 16);
        let serial: Log = Arc::new(Mutex::new(vec![Vec::new()]));
        let ex = Executor::new();
        let post = Rc::new(Post::new(0, 1, LOOKAHEAD));
        ex.enter(|| {
            for id in 0..16 {
                job(post.clone(), serial.clone(), id, seed_of(id), 200);
            }
        });
        assert_eq!(ex.run(), RunOutcome::Finished);
        assert_eq!(
            ends,
            vec![(RunOutcome::Finished, ex.events_processed(), ex.now())]
        );
        assert!(log == *serial.lock().unwrap());
    }

    /// The message of the panic a 2-partition run on `threads` threads of
    /// the model `build` makes ends with.
    fn refusal(
        threads: usize,
        build: impl Fn(usize, Rc<Post<()>>) -> Deliver<()> + Sync + std::panic::RefUnwindSafe,
    ) -> String {
        let windows = Windows {
            parts: 2,
            lookahead: LOOKAHEAD,
            threads,
        };
        let got = std::panic::catch_unwind(|| run_windows(windows, &build));
        let message = got.expect_err("refused");
        message
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default()
    }

    #[test]
    fn a_message_sooner_than_the_lookahead_is_refused() {
        let text = refusal(2, |p, post| {
            if p == 0 {
                spawn_detached(async move {
                    sleep(10).await;
                    post.send(1, now() + LOOKAHEAD - 1, ());
                });
            }
            Box::new(|_, _| {})
        });
        assert!(text.contains("before now + the lookahead"), "{text}");
    }

    #[test]
    fn a_message_posted_on_delivery_counts_from_the_window_s_start() {
        // Partition 1 answers a message as it is delivered, for the
        // message's own time: before the window's start + the lookahead,
        // although its clock (its last event, long before) says otherwise.
        let text = refusal(1, |p, post| {
            if p == 0 {
                let post = post.clone();
                spawn_detached(async move {
                    sleep(10 * LOOKAHEAD).await;
                    post.send(1, now() + LOOKAHEAD, ());
                });
            }
            Box::new(move |at, ()| {
                if p == 1 {
                    post.send(0, at + LOOKAHEAD / 2, ());
                }
            })
        });
        assert!(text.contains("partition 1 posted"), "{text}");
    }

    #[test]
    fn a_partition_that_waits_forever_is_reported_stalled() {
        let ends = run_windows::<(), _>(
            Windows {
                parts: 2,
                lookahead: LOOKAHEAD,
                threads: 2,
            },
            |p, _post| {
                if p == 1 {
                    // Waits for an event nobody sets.
                    let never = crate::engine::Event::new();
                    spawn_detached(async move { never.wait().await });
                }
                Box::new(|_, _| {})
            },
        );
        assert_eq!(ends[0].outcome, RunOutcome::Finished);
        assert_eq!(ends[1].outcome, RunOutcome::Stalled { blocked: 1 });
    }
}
