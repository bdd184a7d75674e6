//! What crosses from one partition of a split machine to another (see
//! [`super::partition`] and [`crate::hw::mail`]): the start of a transfer
//! whose route leaves its partition, and the mail a partition gets.
//!
//! A transfer books its whole route in its own partition's link table,
//! as the one table of a machine that is not split would (its start, its
//! end and every hop's interval are that run's), and tells each partition
//! whose links it crossed which intervals it took there. That partition
//! books them exactly; if one of its links is busy for any of them, its
//! own traffic and the transfer overlap, and the split run is no longer
//! the one-table run: the machine records that it *diverged*, and whoever
//! ran it runs it again on one partition (a run that diverges is never
//! reported as a result).
//!
//! Same-picosecond order: mail is scheduled when it is delivered, between
//! windows, later than its event was set on one executor (when the
//! transfer started, when the slot was freed). Were it a plain timer, a
//! landing that falls on the same picosecond as events of its partition
//! would run in another order among them than on one executor, and where
//! those events contend (an allocator: TCM blocks freed and taken in
//! another order) the run would differ. So every landing in another SIP
//! than its issuer's, and every credit of a ring between SIPs, is a keyed
//! event (`engine::keyed`) on one executor and on several alike: it runs
//! before the plain events of its picosecond, in the order of its key
//! (the issuing PE; the ring), which does not depend on when it was set.
//! A partition's events of a picosecond then run in one order however
//! the machine is split. Shown for landings (`tests/all/split.rs`: without
//! the keys, two algorithms' memory digests differed); the credits'
//! keys follow the same reasoning, no test has yet made their order
//! differ.
//!
//! Bytes that land in another partition are read where the transfer
//! starts (into a cell the data plane fills) and landed by the partition
//! they land in, at the transfer's end; an IPCQ message joins the
//! receiver's copy of its ring then, already landed, in send order (a
//! receive waits for the landing either way, and takes a message only
//! after every one sent before it: a short message can land before a
//! longer one sent earlier, in a gap of a link the longer one waits for). A receive that takes messages round robin
//! from rings of several partitions could take them in another order
//! than one table would: it makes the run diverge.

use super::dma_engine::time_fault;
use super::partition::Partition;
use super::Machine;
use crate::engine::{self, Call, Event};
use crate::hw::data_plane::{Culprit, DataOp};
use crate::hw::ipcq::Arrival;
use crate::hw::link::Route;
use crate::hw::mail::{self, Landing, Mail};
use crate::hw::trace::Track;
use crate::topology::LinkId;
use crate::units::Ps;
use std::collections::BTreeMap;
use std::sync::Arc;

impl Machine {
    /// The least delay between something a partition does and its
    /// effect in another: the inter-SIP link's latency (partitions are
    /// groups of SIPs, and a route leaves one only across such a link).
    pub fn lookahead(&self) -> Ps {
        crate::units::ns_to_ps(self.topo.spec.system.inter_sip_link.latency_ns)
    }

    /// Why the split run is not the one-partition run, if it is not (see
    /// the module doc).
    pub fn diverged(&self) -> Option<String> {
        self.diverged.lock().clone()
    }

    /// Give up the split run: `why` says what it could not take (a
    /// caller then runs it again on one partition).
    pub fn give_up_split(&self, why: String) {
        self.diverge(|| why);
    }

    /// A compute command of `part` (its unit `what`, its PE `pe`) whose
    /// operands are in `spaces`: if one is memory of another partition,
    /// whose thread owns it and writes it in its own windows, the split
    /// run diverges (each partition's shard of the store holds its own
    /// SIPs' memory alone, see [`crate::hw::data_plane`]).
    pub(super) fn note_foreign_operands(
        &self,
        part: &Partition,
        what: &str,
        pe: impl Fn() -> crate::topology::PeCoord,
        mut spaces: impl Iterator<Item = crate::address::Space>,
    ) {
        if let Some(space) = spaces.find(|s| self.partition_of(s.sip()) != part.index) {
            self.diverge(|| {
                format!(
                    "a {what} command of {} reaches {space}, memory of another partition",
                    pe()
                )
            });
        }
    }

    /// Note that the split run is not the one-partition run (the first
    /// reason is kept).
    #[cold]
    pub(super) fn diverge(&self, why: impl FnOnce() -> String) {
        let mut d = self.diverged.lock();
        if d.is_none() {
            *d = Some(why());
        }
    }

    /// Run the machine's partitions to their end in windows of the
    /// lookahead on up to `threads` threads: `start(p)` spawns partition
    /// `p`'s tasks, inside its executor on its thread. Returns how each
    /// partition ended.
    pub fn run_partitions(
        self: &Arc<Self>,
        threads: usize,
        start: impl Fn(usize) + Sync,
    ) -> Vec<engine::windows::PartitionEnd> {
        let plan = engine::windows::Windows {
            parts: self.partitions(),
            lookahead: self.lookahead(),
            threads,
        };
        engine::windows::run_windows(plan, |p, post| {
            start(p);
            self.enter_partition(p, post)
        })
    }

    /// Make partition `part` on this thread (inside its executor): its
    /// mail goes out by `post`; returns what to do with the mail it gets.
    fn enter_partition(
        self: &Arc<Self>,
        part: usize,
        post: std::rc::Rc<engine::windows::Post<Mail>>,
    ) -> engine::windows::Deliver<Mail> {
        mail::set_post(part, post);
        let m = self.clone();
        Box::new(move |at, mail| m.deliver(at, mail))
    }

    /// `mail` for simulated time `at`, in the running executor's
    /// partition.
    fn deliver(self: &Arc<Self>, at: Ps, mail: Mail) {
        match mail {
            Mail::Book(hops) => {
                let part = self.parts.current();
                let now = engine::now();
                let mut links = part.links.lock();
                for &(link, start, end) in hops.iter() {
                    if links.book_exact(link, now, (start, end)) != Ok(true) {
                        let topo = &self.topo;
                        self.diverge(|| {
                            let (from, to) = topo.ends(&topo.links[link as usize]);
                            format!(
                                "link {from} -> {to} was busy for part of [{start}, {end}) ps, \
                                 which a transfer of another partition took"
                            )
                        });
                    }
                }
            }
            Mail::Land(landing) => {
                let m = self.clone();
                // At the landing's place among the keyed events of its
                // picosecond, as on one executor (see the module doc).
                let key = landing.key;
                engine::spawn_detached(async move {
                    engine::sleep_keyed_until(at, key).await;
                    m.land_from_elsewhere(*landing);
                });
            }
            Mail::Credit { queue, slot } => engine::spawn_detached(async move {
                // At the ring's place among the keyed events of `at`; the
                // two copies of a ring share its number, so its key.
                let key = queue.lock().credit_key();
                engine::sleep_keyed_until(at, key).await;
                let mut q = queue.lock();
                q.free.push_back((slot, at));
                q.freed.notify();
            }),
        }
    }

    /// A transfer of another partition lands here now.
    fn land_from_elsewhere(&self, landing: Landing) {
        let Landing {
            staged,
            dst,
            who,
            message,
            ..
        } = landing;
        if let Err(f) = self
            .data
            .submit(DataOp::LandFrom(Box::new((staged, dst, who))))
        {
            let pe = self.pe_at(who.pe);
            return self.set_fault_at(who.at, pe, who.what, f.error.into());
        }
        if let Some(msg) = message {
            msg.queue.lock().insert_landed(Arrival {
                slot: msg.slot,
                shape: msg.shape,
                dtype: msg.dtype,
                from: msg.from,
                ready: Event::done(),
                seq: msg.seq,
            });
            msg.notify.notify();
        }
    }

    /// The head command of a DMA engine, in `slot` of `part`'s table,
    /// starts its transfer at the end of its setup (begun at `start`) on
    /// `path`, which crosses other partitions' links (see the module doc).
    #[cold]
    #[inline(never)]
    pub(super) fn start_crossing(
        self: &Arc<Self>,
        part: &Partition,
        call: Call,
        slot: usize,
        start: Ps,
        path: Route,
    ) {
        let now = engine::now();
        let (pe, what, src, dst, nbytes, remote, key) = {
            let mut cmds = part.dma_commands.lock();
            let cmd = &mut cmds[slot];
            (
                cmd.pe,
                cmd.what,
                cmd.src,
                cmd.dst,
                cmd.nbytes,
                cmd.remote.take(),
                cmd.landing_key(),
            )
        };
        let issuer = self.pe_at(pe);
        let (src_part, dst_part) = (
            self.partition_of(src.0.sip()),
            self.partition_of(dst.0.sip()),
        );
        if src_part != part.index {
            self.diverge(|| {
                format!(
                    "a {} of {issuer} reads {}, memory of another partition",
                    what.name(),
                    src.0
                )
            });
        }
        let lands_elsewhere = dst_part != part.index;
        let cell = lands_elsewhere.then(|| Arc::new(std::sync::Mutex::new(None)));
        let staged = match &cell {
            Some(cell) => {
                let staged = self.data.submit(DataOp::StageInto {
                    cell: cell.clone(),
                    src,
                    len: nbytes,
                });
                // Applied before the other partition's landing, which
                // comes in a later window.
                self.data.flush_own();
                staged
            }
            None => self.data.submit(DataOp::Stage {
                slot: slot as u32,
                src,
                len: nbytes,
            }),
        };
        debug_assert!(staged.is_ok(), "reading memory does not fail");
        let mut hops: Vec<(LinkId, Ps, Ps)> = Vec::with_capacity(path.links().len());
        let rate = self.timing.local_rate;
        let booked = part
            .links
            .lock()
            .reserve(&path, now, nbytes, rate, Some(&mut hops));
        let end = match booked {
            Ok(t) => t,
            Err(e) => {
                part.dma_commands.lock().remove(slot);
                let fail = time_fault(what, nbytes, start);
                return self.set_fault(issuer, what.name(), fail(e));
            }
        };
        if let Some(tr) = &self.trace {
            let name = format!("{} {nbytes} B {} -> {}", what.name(), src.0, dst.0);
            tr.record(Track::Dma(issuer), name.clone(), start, end);
            for &(link, a, b) in &hops {
                tr.record(Track::Link(link), name.clone(), a, b);
            }
        }
        // Each other partition books what the transfer took of its links.
        let lookahead = self.lookahead();
        let mut elsewhere: BTreeMap<u32, Vec<(LinkId, Ps, Ps)>> = BTreeMap::new();
        for &(hop, p) in path.foreign() {
            let (link, a, b) = hops[hop as usize];
            if a < now + lookahead {
                self.diverge(|| {
                    format!(
                        "a {} of {issuer} reaches partition {p}'s links sooner than the lookahead",
                        what.name()
                    )
                });
            }
            elsewhere.entry(p).or_default().push((link, a, b));
        }
        for (p, hops) in elsewhere {
            mail::post(p as usize, now + lookahead, Mail::Book(hops.into()));
        }
        if let Some(cell) = cell {
            let message = remote.map(|r| {
                debug_assert_eq!(r.0, dst_part, "a message lands in its receiver's partition");
                r.1
            });
            let who = Culprit {
                pe,
                what: what.name(),
                at: end,
            };
            let landing = Landing {
                staged: cell,
                dst,
                who,
                message,
                key: key.expect("a transfer landing in another partition lands in another SIP"),
            };
            mail::post(dst_part, end, Mail::Land(Box::new(landing)));
        }
        {
            let mut cmds = part.dma_commands.lock();
            let cmd = &mut cmds[slot];
            cmd.span = (start, end);
            cmd.lands_elsewhere = lands_elsewhere;
        }
        if end > now {
            let landing = Machine::sibling_call(call, super::engine_calls::Served::Landing(slot));
            Machine::land_at(end, key, landing);
        } else {
            self.land_transfer(part, slot);
        }
    }
}
