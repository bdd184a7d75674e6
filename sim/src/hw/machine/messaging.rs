//! The machine's IPCQ commands (seed ADR-0023): installing the neighbour
//! tables, `send` / `recv` on the ring buffers, and what blocked PEs wait
//! for in a deadlock report. The ring buffers themselves are
//! [`crate::hw::ipcq`].

use super::{DmaKind, IpcqSettings, Machine, Shape, TensorInner, TensorRef};
use crate::ccl::tables::{Neighbour, NeighbourTables};
use crate::engine::{self, Event, Signal};
use crate::error::HwError;
use crate::hw::blocked::{Blocked, Dir, RxDir};
use crate::hw::dtype::Dtype;
use crate::hw::ipcq::{
    Arrival, CommId, IpcqPort, Posted, RxQueue, SendTarget, SharedQueue, TxEntry,
};
use crate::hw::oplog::Actor;
use crate::hw::tensor::Hold;
use crate::topology::{NodeId, PeCoord};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

impl Machine {
    /// Install IPCQ neighbour tables in communicator `comm`. Receive
    /// queues are allocated in each receiver's buffer space.
    pub fn install_ipcq(
        &self,
        comm: CommId,
        tables: &NeighbourTables,
        s: IpcqSettings,
    ) -> Result<(), HwError> {
        self.extend_ipcq(comm, tables, s).map(|_| ())
    }

    /// Add the directions of `tables` to communicator `comm`'s installed
    /// IPCQ (the tables of another algorithm of the same process group).
    /// A direction already installed there is shared if it leads to the
    /// same peer, arrives under the same name and has the same slots
    /// (`s`); any other overlap is an [`HwError::IpcqConflict`], checked
    /// for every direction before anything is added. Other communicators'
    /// directions never conflict: each has its own. Returns the number of
    /// directions added.
    pub fn extend_ipcq(
        &self,
        comm: CommId,
        tables: &NeighbourTables,
        s: IpcqSettings,
    ) -> Result<usize, HwError> {
        // Which directions are new; conflicts first, before any change.
        let mut new = Vec::new();
        for (&pe, dirs) in tables {
            for n in dirs {
                let conflict = |why: String| HwError::IpcqConflict {
                    pe: pe.to_string(),
                    dir: n.dir.clone(),
                    why,
                };
                let installed = self
                    .pe(pe)
                    .lane(comm)
                    .ipcq()
                    .lock()
                    .as_ref()
                    .and_then(|p| p.tx.get(&n.dir).cloned());
                if let Some(entry) = installed {
                    entry
                        .shared_by(n.peer, &n.peer_dir, s.ring_into(n.peer))
                        .map_err(conflict)?;
                    continue;
                }
                let taken = self
                    .pe(n.peer)
                    .lane(comm)
                    .ipcq()
                    .lock()
                    .as_ref()
                    .is_some_and(|p| p.rx_index(&n.peer_dir).is_some());
                if taken {
                    return Err(conflict(format!(
                        "{} already receives another sender's messages as {}",
                        n.peer, n.peer_dir
                    )));
                }
                new.push((pe, n));
            }
        }
        // The host structures of the new rings, charged before any is
        // built: a full mesh's p(p - 1) rings are ~1 KiB each, so a run
        // that cannot hold them stops here, saying so, instead of
        // exhausting the machine.
        let (charge, who) = rings_charge(new.len() as u64, s.n_slots);
        self.budget
            .charge(crate::budget::MemoryUse::IpcqRings, charge, who)?;
        self.ipcq_charged
            .fetch_add(charge, std::sync::atomic::Ordering::Relaxed);
        // Each new direction's credit latency is a path search (below):
        // all of them first, on two threads where there are many.
        let pairs: Vec<(NodeId, NodeId)> = new
            .iter()
            .map(|&(pe, n)| (NodeId::Pe(pe), NodeId::Pe(n.peer)))
            .collect();
        self.router.find_paths(&pairs);
        let mut ports: BTreeMap<PeCoord, IpcqPort> = BTreeMap::new();
        for &(pe, n) in &new {
            let (queue, rx_queue) = self.new_ring(pe, n, &s)?;
            let peer_port = ports
                .entry(n.peer)
                .or_insert_with(|| self.port_to_extend(n.peer, comm));
            peer_port.rx.push((n.peer_dir.as_str().into(), rx_queue));
            let peer_notify = peer_port.rx_notify.clone();
            let entry = TxEntry {
                peer: n.peer,
                peer_dir: n.peer_dir.as_str().into(),
                queue,
                peer_notify,
                slot_size: s.slot_size,
            };
            let port = ports
                .entry(pe)
                .or_insert_with(|| self.port_to_extend(pe, comm));
            port.tx.insert(n.dir.clone(), Arc::new(entry));
        }
        for (pe, port) in ports {
            let lane = self.pe(pe).lane(comm);
            let mut slot = lane.ipcq().lock();
            match slot.as_mut() {
                None => *slot = Some(port),
                Some(have) => have.absorb(port),
            }
        }
        if !new.is_empty() {
            *self.ipcq_rings_of.lock().entry(comm).or_default() += new.len() as u64;
            self.ipcq_changes
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(new.len())
    }

    /// The ring of `pe`'s direction `n` as `s` shapes it: its slots in the
    /// peer's buffer space, its credit latency, its number; its sender's
    /// end and its receiver's (see [`RxQueue::ends`]).
    fn new_ring(
        &self,
        pe: PeCoord,
        n: &Neighbour,
        s: &IpcqSettings,
    ) -> Result<(SharedQueue, SharedQueue), HwError> {
        let shape = s.ring_into(n.peer);
        let (space, len) = (shape.space, shape.bytes());
        let base = {
            let alloc = self.allocator(space);
            let mut a = alloc.lock();
            a.alloc(len).ok_or_else(|| HwError::OutOfMemory {
                space: format!(
                    "{space} (IPCQ {} slots x {} bytes for {} dir {})",
                    s.n_slots, s.slot_size, n.peer, n.peer_dir
                ),
                len,
                free: a.free_bytes(),
            })?
        };
        {
            let mut held = self.ipcq_held.lock();
            let h = held.entry(space).or_default();
            *h = (h.0 + 1, h.1 + len);
        }
        // A credit goes back from the peer to the sender.
        let credit_latency = self
            .router
            .latency_back(NodeId::Pe(pe), NodeId::Pe(n.peer))?;
        // Numbered in the order the tables list them, so the same on a
        // machine split or not.
        let number = self
            .ipcq_rings
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let sender = (pe, n.dir.as_str().into());
        let ring = RxQueue::new(number, shape, base, credit_latency, sender);
        Ok(ring.ends(self.partition_of(pe.sip), self.partition_of(n.peer.sip)))
    }

    /// Whether the run's budget could hold tables of up to `rings` IPCQ
    /// rings of `n_slots` slots now, besides those installed (nothing
    /// taken; [`Machine::extend_ipcq`] charges the new ones). Asked before
    /// a full mesh's neighbour tables are made: at 4096 ranks they and the
    /// install's checks alone are ~3.5 GB of the ~16 GiB its rings would
    /// need. The rings installed in communicator `comm` are taken off, as
    /// if the tables shared them: a second full-mesh algorithm of the same
    /// group adds none (another group's rings are its own).
    pub fn afford_ipcq(&self, comm: CommId, rings: u64, n_slots: u32) -> Result<(), HwError> {
        let installed = self.ipcq_rings_of.lock().get(&comm).copied().unwrap_or(0);
        let (bytes, who) = rings_charge(rings.saturating_sub(installed), n_slots);
        self.budget
            .afford(crate::budget::MemoryUse::IpcqRings, bytes, who)?;
        Ok(())
    }

    /// An empty port whose additions go to `pe`'s in `comm`: it shares the
    /// notification of that installed port, if any, so a sender's
    /// [`TxEntry::peer_notify`] is the one the receiver waits on.
    fn port_to_extend(&self, pe: PeCoord, comm: CommId) -> IpcqPort {
        let rx_notify = match self.pe(pe).lane(comm).ipcq().lock().as_ref() {
            Some(have) => have.rx_notify.clone(),
            None => Signal::new(),
        };
        IpcqPort {
            rx_notify,
            ..Default::default()
        }
    }

    /// Show `pe` as blocked (`Some`) in communicator `comm`, or not.
    #[inline]
    pub(super) fn set_blocked(&self, pe: PeCoord, comm: CommId, what: Option<Blocked>) {
        let st = self.pe(pe);
        if comm == CommId::WORLD {
            // The ring step's own field, without a lane to build and drop.
            *st.blocked_on.lock() = what;
        } else {
            *st.lane(comm).blocked_on().lock() = what;
        }
    }

    /// What each blocked PE is waiting for (for deadlock reports), a
    /// communicator other than the default one named.
    pub fn blocked_report(&self) -> Vec<(PeCoord, String)> {
        let mut blocked = Vec::new();
        for (pe, st) in self.pes() {
            for (comm, lane) in st.every_lane() {
                if let Some(w) = lane.blocked_on().lock().clone() {
                    blocked.push((pe, comm, w));
                }
            }
        }
        let mut v: Vec<_> = blocked
            .into_iter()
            .map(|(pe, comm, w)| {
                let rx_name = |rx: RxDir| self.rx_name(pe, comm, rx);
                let what = w.describe(rx_name, |dir| self.expected_senders(pe, comm, dir));
                let what = if comm == CommId::WORLD {
                    what
                } else {
                    format!("{comm}: {what}")
                };
                (pe, what)
            })
            .collect();
        v.sort();
        v
    }

    /// `name` as a `Dir` for `pe`'s kernels in communicator `comm` to name
    /// a direction by: its receive queue's own when `pe` receives on
    /// `name` there (a receive then finds the queue by pointer), else a
    /// new one.
    pub fn direction(&self, pe: PeCoord, comm: CommId, name: &str) -> Dir {
        let lane = self.pe(pe).lane(comm);
        let port = lane.ipcq().lock();
        port.as_ref()
            .and_then(|p| Some(p.rx[p.rx_index(name)?].0.clone()))
            .unwrap_or_else(|| name.into())
    }

    /// The name of `pe`'s receive direction `rx` in `comm` (`None`: any).
    fn rx_name(&self, pe: PeCoord, comm: CommId, rx: RxDir) -> Option<String> {
        let i = rx? as usize;
        let lane = self.pe(pe).lane(comm);
        let port = lane.ipcq().lock();
        port.as_ref()?.rx.get(i).map(|(name, _)| name.to_string())
    }

    /// The seed's pointer dump of every IPCQ ring at simulated time `now`:
    /// messages sent (tail) and taken (head), waiting, slots held, credits
    /// on their way back. A ring of a communicator other than the default
    /// one is named with it.
    pub fn ipcq_dump(&self, now: crate::units::Ps) -> Vec<String> {
        let mut out = Vec::new();
        for (pe, st) in self.pes() {
            for (comm, lane) in st.every_lane() {
                if let Some(port) = lane.ipcq().lock().as_ref() {
                    let group = if comm == CommId::WORLD {
                        String::new()
                    } else {
                        format!(" ({comm})")
                    };
                    for (dir, q) in &port.rx {
                        out.push(format!("{pe}{group} rx {dir}: {}", q.lock().pointers(now)));
                    }
                }
            }
        }
        out
    }

    fn tx_entry(&self, pe: PeCoord, comm: CommId, dir: &str) -> Result<Arc<TxEntry>, HwError> {
        let lane = self.pe(pe).lane(comm);
        let port = lane.ipcq().lock();
        let port = port
            .as_ref()
            .ok_or_else(|| HwError::NoIpcq { pe: pe.to_string() })?;
        port.tx
            .get(dir)
            .cloned()
            .ok_or_else(|| HwError::InvalidDirection {
                pe: pe.to_string(),
                dir: dir.to_string(),
                installed: port.installed_dirs(),
            })
    }

    /// [`Machine::check_send`] for a send on `dir`, remembered per PE: the
    /// target is kept in the PE's state, so a send does not read its
    /// direction's entry (a line of its own, cold at a thousand ranks).
    fn sendable_on(
        &self,
        pe: PeCoord,
        comm: CommId,
        dir: &Dir,
        nbytes: u64,
    ) -> Result<SendTarget, HwError> {
        let lane = self.pe(pe).lane(comm);
        let known = match &*lane.last_tx().lock() {
            Some((d, target)) if Arc::ptr_eq(d, dir) => Some(target.clone()),
            _ => None,
        };
        let target = match known {
            Some(target) => target,
            None => {
                let target = self.tx_entry(pe, comm, dir)?.target();
                *lane.last_tx().lock() = Some((dir.clone(), target.clone()));
                target
            }
        };
        Self::fits_slot(target.queue.lock().slot_size, nbytes)?;
        Ok(target)
    }

    /// Whether a message of `nbytes` fits slots of `slot_size` bytes.
    fn fits_slot(slot_size: u64, nbytes: u64) -> Result<(), HwError> {
        if nbytes > slot_size {
            return Err(HwError::SlotTooSmall { nbytes, slot_size });
        }
        Ok(())
    }

    /// The checks of `tl.send` that need no simulated time: `pe` has an
    /// IPCQ, sends towards `dir`, and a message of `nbytes` fits its
    /// slots. These depend on the installed tables only (the recording
    /// thread makes them), so a kernel can be told at once.
    pub fn check_send(
        &self,
        pe: PeCoord,
        comm: CommId,
        dir: &str,
        nbytes: u64,
    ) -> Result<(), HwError> {
        Self::fits_slot(self.tx_entry(pe, comm, dir)?.slot_size, nbytes)
    }

    /// The checks of `tl.recv` that need no simulated time: `pe` has an
    /// IPCQ in `comm` and receives from `dir` (any direction when `None`).
    pub fn check_recv(&self, pe: PeCoord, comm: CommId, dir: Option<&str>) -> Result<(), HwError> {
        let lane = self.pe(pe).lane(comm);
        let guard = lane.ipcq().lock();
        let port = guard
            .as_ref()
            .ok_or_else(|| HwError::NoIpcq { pe: pe.to_string() })?;
        match dir {
            Some(d) if port.rx_index(d).is_none() => Err(HwError::InvalidDirection {
                pe: pe.to_string(),
                dir: d.to_string(),
                installed: port.installed_dirs(),
            }),
            _ => Ok(()),
        }
    }

    /// `tl.send`: blocks (in simulated time) until the peer has a free
    /// slot, then issues the DMA into it and returns.
    /// `dir` is borrowed, not cloned: a kernel's sends share one `Dir` per
    /// direction, and a count to change on it per send was a cache miss.
    pub fn send<'a>(
        self: &'a Arc<Self>,
        (pe, comm): (PeCoord, CommId),
        dir: &'a Dir,
        value: TensorRef,
    ) -> impl Future<Output = Result<(), HwError>> + Send + 'a {
        let m = self;
        async move {
            let tx = m.sendable_on(pe, comm, dir, value.nbytes())?;
            let nbytes = value.nbytes();
            let asked = engine::now();
            let (slot, visible) = loop {
                let wait = {
                    let mut q = tx.queue.lock();
                    match q.take_free() {
                        Some(s) => break s,
                        None => q.freed.wait_past(q.freed.generation()),
                    }
                };
                m.set_blocked(
                    pe,
                    comm,
                    Some(Blocked::SendNoSlot {
                        dir: dir.clone(),
                        peer: tx.peer,
                    }),
                );
                wait.await;
                m.set_blocked(pe, comm, None);
            };
            // A sleeping sender is woken by the credit; a polling one sees
            // it at its next look (every `poll_interval` since it asked).
            let (visible, credit_key) = {
                let q = tx.queue.lock();
                (q.seen_at(asked, visible), q.credit_key())
            };
            // A slot freed on a ring between SIPs: the credit's place
            // among the keyed events of its picosecond, as when it comes
            // as mail to a sender in another partition (see
            // `RxQueue::credit_key`). A slot never used (visible at 0)
            // came by no credit.
            let credited = if tx.peer.sip != pe.sip && visible > 0 {
                engine::sleep_keyed_until(visible, credit_key)
            } else {
                engine::sleep_until(visible)
            };
            credited.await;
            let ready = Event::new();
            m.with_oplog(|l| {
                // The slot's last message was read by all its readers
                // before its credit came back (see OpLog::reuse).
                let q = tx.queue.lock();
                let freed = l.reuse(q.space, q.slot_offset(slot), q.slot_size, &ready);
                drop(q);
                l.observe(Actor::Pe(pe), "slot_credit", engine::now(), &[], &freed);
            });
            let (space, offset, remote) = {
                let mut q = tx.queue.lock();
                let message = |seq| Arrival {
                    slot,
                    shape: value.shape.clone(),
                    dtype: value.dtype,
                    from: pe,
                    ready: ready.clone(),
                    seq,
                };
                let Posted { seq, remote } = q.post(message, &tx.peer_notify);
                m.ccl_trace(|| format!("send] {pe} dir={dir} nbytes={nbytes} seq={seq}"));
                (q.space, q.slot_offset(slot), remote)
            };
            m.dma_with(
                DmaKind::Send,
                pe,
                ((value.space, value.offset), (space, offset)),
                nbytes,
                smallvec::smallvec![value],
                ready,
                remote,
            )
        }
    }

    /// `tl.send_addr`: send `shape` / `dtype` elements straight from memory
    /// at `addr` (the DMA reads them when its transfer starts).
    pub async fn send_addr(
        self: &Arc<Self>,
        at: (PeCoord, CommId),
        dir: &Dir,
        addr: u64,
        shape: &[u32],
        dtype: Dtype,
    ) -> Result<(), HwError> {
        let v = self.view(addr, shape, dtype)?;
        self.send(at, dir, v).await
    }

    /// `tl.recv` / `tl.recv-into`: waits for the next message from `dir`
    /// (or any direction, round-robin) and returns the slot as a tensor, or
    /// copies it to `dst` and returns that.
    /// `dir` is borrowed, as by [`Machine::send`].
    pub fn recv<'a>(
        self: &'a Arc<Self>,
        at: (PeCoord, CommId),
        dir: Option<&'a Dir>,
        shape: &'a Shape,
        dtype: Dtype,
        dst: Option<u64>,
    ) -> impl Future<Output = Result<TensorRef, HwError>> + Send + 'a {
        let turn = self.claim_turn(at, dir, false);
        self.recv_in_turn(at, dir, shape, dtype, dst, turn, true)
    }

    /// `tl.recv_async`: the same receive, run as its own task while the
    /// kernel goes on; [`crate::engine::JoinHandle`] gives the tensor. A
    /// future and the receives issued on its direction claim their
    /// messages in issue order.
    pub fn recv_async(
        self: &Arc<Self>,
        at: (PeCoord, CommId),
        dir: Option<Dir>,
        shape: Shape,
        dtype: Dtype,
    ) -> crate::engine::JoinHandle<Result<TensorRef, HwError>> {
        let turn = self.claim_turn(at, dir.as_ref(), true);
        let m = self.clone();
        crate::engine::spawn(async move {
            m.recv_in_turn(at, dir.as_ref(), &shape, dtype, None, turn, false)
                .await
        })
    }

    /// Wait for the `recv_async` future `f` (on `dir`), showing the PE as
    /// blocked on it meanwhile.
    pub async fn wait_future(
        &self,
        (pe, comm): (PeCoord, CommId),
        dir: Option<Dir>,
        f: crate::engine::JoinHandle<Result<TensorRef, HwError>>,
    ) -> Result<TensorRef, HwError> {
        let out = match f.try_take() {
            Some(done) => done,
            None => {
                self.set_blocked(pe, comm, Some(Blocked::WaitFuture { dir }));
                let out = f.await;
                self.set_blocked(pe, comm, None);
                out
            }
        };
        if let Ok(t) = &out {
            self.observe(pe, "wait", std::slice::from_ref(&t.ready), &[]);
        }
        out
    }

    /// The previous claim on `dir` to wait for, and this receive's own
    /// when `later_may_wait` (a `recv_async` task: the kernel goes on and
    /// may issue receives on `dir` before this one has claimed). A
    /// receive the kernel waits for needs none: its kernel issues nothing
    /// until it has returned, so no later claim can come before its own;
    /// it leaves the direction's entry empty (no event to make, and no
    /// cold one to read at the next receive).
    fn claim_turn(
        &self,
        (pe, comm): (PeCoord, CommId),
        dir: Option<&Dir>,
        later_may_wait: bool,
    ) -> (Option<Event>, Option<Event>) {
        let mine = later_may_wait.then(Event::new);
        let same = |d: &Option<Dir>| match (d, dir) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
            (a, b) => a.is_none() && b.is_none(),
        };
        let lane = self.pe(pe).lane(comm);
        let mut claims = lane.claims().lock();
        let prev = match claims.iter_mut().find(|(d, _)| same(d)) {
            Some((_, last)) => std::mem::replace(last, mine.clone()),
            None => {
                claims.push((dir.cloned(), mine.clone()));
                None
            }
        };
        (prev.filter(|e| !e.is_set()), mine)
    }

    // Written out on purpose: see the comment in the body.
    #[allow(clippy::too_many_arguments, clippy::manual_async_fn)]
    fn recv_in_turn<'a>(
        self: &'a Arc<Self>,
        (pe, comm): (PeCoord, CommId),
        dir: Option<&'a Dir>,
        shape: &'a Shape,
        dtype: Dtype,
        dst: Option<u64>,
        (prev, mine): (Option<Event>, Option<Event>),
        report: bool,
    ) -> impl Future<Output = Result<TensorRef, HwError>> + Send + 'a {
        // This future sits in the replay's state and is copied there whole
        // per receive, so it holds only what its waits need: an async
        // block, not an async fn (whose future keeps its arguments twice,
        // as given and moved into its body); the looking is
        // `look_for_arrival`'s; and no wait is inside a `match` on a look
        // (its temporaries would be held across the wait).
        async move {
            if let Some(prev) = prev {
                prev.wait().await;
            }
            // The direction's index among the receive queues (for the blocked
            // state), found with its queue.
            let mut rx: RxDir = None;
            let (queue, arrival) = loop {
                let next_message = match self.look_for_arrival((pe, comm), dir, &mut rx) {
                    Ok(Ok(taken)) => break taken,
                    Ok(Err(next_message)) => next_message,
                    Err(e) => {
                        if let Some(mine) = mine {
                            mine.set();
                        }
                        return Err(e);
                    }
                };
                // Nothing to take yet: wait for the next message to any of
                // the PE's queues (`report`: show the PE as blocked meanwhile,
                // not for a `recv_async` task, which the kernel is not waiting
                // for).
                if report {
                    self.set_blocked(pe, comm, Some(Blocked::RecvWaiting { rx }));
                }
                next_message.await;
                if report {
                    self.set_blocked(pe, comm, None);
                }
            };
            // Claimed: wait for its data (a later receive on `dir` waits for
            // this one's data too, as it did when the wait was part of the
            // claim).
            if !arrival.ready.is_set() {
                if report {
                    self.set_blocked(
                        pe,
                        comm,
                        Some(Blocked::RecvInFlight {
                            rx,
                            from: arrival.from,
                        }),
                    );
                }
                arrival.ready.wait().await;
                if report {
                    self.set_blocked(pe, comm, None);
                }
            }
            if let Some(mine) = mine {
                mine.set();
            }
            let m = self;
            let want = dtype.nbytes(shape)?;
            if report {
                // The kernel waited for the message's data.
                m.observe(pe, "wait", std::slice::from_ref(&arrival.ready), &[]);
            }
            m.ccl_trace(|| {
                let rx_dir = queue.lock().sender_dir.clone();
                format!(
                    "recv] {pe} dir={} nbytes={} seq={} from={} ({rx_dir})",
                    dir.map_or("any", |d| &**d),
                    arrival.nbytes(),
                    arrival.seq,
                    arrival.from
                )
            });
            let (strict, space, offset) = {
                let q = queue.lock();
                (q.strict, q.space, q.slot_offset(arrival.slot))
            };
            let differs = if strict {
                arrival.shape != *shape || arrival.dtype != dtype
            } else {
                arrival.nbytes() != want
            };
            if differs {
                return Err(HwError::Mismatch {
                    what: format!(
                        "recv(dir={}) expected {:?} {} ({want} bytes) but the message from {} is {:?} {} ({} bytes)",
                        dir.map_or("any", |d| &**d),
                        shape,
                        dtype.name(),
                        arrival.from,
                        arrival.shape,
                        arrival.dtype.name(),
                        arrival.nbytes()
                    ) + if strict { " (strict_validation: shape and dtype must match)" } else { "" },
                });
            }
            let slot = TensorInner::build(
                space,
                offset,
                shape,
                dtype,
                arrival.ready,
                Hold::Slot {
                    queue,
                    slot: arrival.slot,
                },
            )?;
            match dst {
                None => Ok(slot),
                Some(addr) => {
                    let view = m.view(addr, shape, dtype)?;
                    let out = TensorInner::build(
                        view.space,
                        view.offset,
                        shape,
                        dtype,
                        Event::new(),
                        Hold::None,
                    )?;
                    m.dma(
                        DmaKind::RecvCopy,
                        pe,
                        (space, offset),
                        (out.space, out.offset),
                        want,
                        smallvec::smallvec![slot],
                        out.ready.clone(),
                    )?;
                    Ok(out)
                }
            }
        }
    }

    /// Claim the next message from `dir` (any: round-robin, preferring
    /// one whose data has landed), or, when there is none, the wait for
    /// the next message to any of `pe`'s queues. Sets `rx` to the
    /// direction's index when `dir` names one.
    #[allow(clippy::type_complexity)]
    fn look_for_arrival(
        &self,
        (pe, comm): (PeCoord, CommId),
        dir: Option<&Dir>,
        rx: &mut RxDir,
    ) -> Result<Result<(SharedQueue, Arrival), crate::engine::SignalWait>, HwError> {
        let lane = self.pe(pe).lane(comm);
        let mut guard = lane.ipcq().lock();
        let port = guard
            .as_mut()
            .ok_or_else(|| HwError::NoIpcq { pe: pe.to_string() })?;
        let n = port.rx.len();
        match dir {
            Some(d) => {
                // By pointer first: a recorded kernel names the queue's own
                // `Dir` (no name read, no miss).
                let i = port
                    .rx
                    .iter()
                    .position(|(name, _)| Arc::ptr_eq(name, d))
                    .or_else(|| port.rx_index(d))
                    .ok_or_else(|| HwError::InvalidDirection {
                        pe: pe.to_string(),
                        dir: d.to_string(),
                        installed: port.installed_dirs(),
                    })?;
                *rx = Some(i as u32);
                let q = &port.rx[i].1;
                let mut qg = q.lock();
                if let Some(a) = qg.take_next_arrival() {
                    drop(qg);
                    return Ok(Ok((q.clone(), a)));
                }
            }
            None => {
                if self.partitions() > 1
                    && port.rx.iter().any(|(_, q)| q.lock().credit_to.is_some())
                {
                    // Its messages from other partitions join its rings
                    // when they land, not when they are sent: which comes
                    // first round robin may differ (see `super::crossings`).
                    self.diverge(|| {
                        format!("{pe} receives round robin from rings of several partitions")
                    });
                }
                // Prefer a message whose data has landed, in round-robin order.
                for landed_only in [true, false] {
                    for i in 0..n {
                        let idx = (port.rr + i) % n;
                        let q = &port.rx[idx].1;
                        let mut qg = q.lock();
                        if qg
                            .next_arrival()
                            .is_some_and(|a| !landed_only || a.ready.is_set())
                        {
                            let a = qg.take_next_arrival().expect("looked at");
                            drop(qg);
                            let q = q.clone();
                            port.rr = (idx + 1) % n;
                            return Ok(Ok((q, a)));
                        }
                    }
                }
            }
        }
        // Nothing to take: wait for the next message to any of the PE's
        // queues (the generation read under the port's lock, so none
        // appended after this look is missed).
        Ok(Err(port.rx_notify.wait_past(port.rx_notify.generation())))
    }

    fn expected_senders(&self, pe: PeCoord, comm: CommId, dir: Option<&str>) -> String {
        let mut senders = Vec::new();
        for (p, st) in self.pes() {
            let Some(lane) = st.find_lane(comm) else {
                continue;
            };
            let port = lane.ipcq().lock();
            for e in port.iter().flat_map(|port| port.tx.values()) {
                if e.peer == pe && dir.is_none_or(|want| &*e.peer_dir == want) {
                    senders.push(p.to_string());
                }
            }
        }
        senders.sort();
        if senders.is_empty() {
            "nobody (no neighbour sends to this direction)".into()
        } else {
            senders.join(" or ")
        }
    }
}

/// The budget charge of `rings` IPCQ rings of `n_slots` slots, and the
/// words that name it in a refusal.
fn rings_charge(rings: u64, n_slots: u32) -> (u64, impl std::fmt::Display) {
    let each = crate::hw::ipcq::ring_host_bytes(n_slots);
    let who = std::fmt::from_fn(move |f| {
        write!(
            f,
            "{rings} new rings of {n_slots} slots, {} of host memory each",
            crate::budget::human_bytes(each)
        )
    });
    (rings.saturating_mul(each), who)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ccl::{BufferKind, NeighbourTopology};
    use crate::config::TopologySpec;

    /// A receive's future stays small: it sits in the replay's state and
    /// is copied there whole per receive, so its size is lines a ring
    /// step touches (480 bytes with the claim's looking inside it, 256
    /// without, 184 as an async block). Some room for other compilers'
    /// layouts.
    #[test]
    fn a_receive_s_future_holds_only_what_its_waits_need() {
        let (m, pe) = crate::hw::machine::test_machine();
        let (dir, shape): (Dir, Shape) = (Arc::from("W"), Shape::from_slice(&[8]));
        let recv = m.recv((pe, CommId::WORLD), Some(&dir), &shape, Dtype::F16, None);
        assert!(
            std::mem::size_of_val(&recv) <= 288,
            "{}",
            std::mem::size_of_val(&recv)
        );
    }

    /// A message's record is one cache line (see [`Arrival`]).
    #[test]
    fn a_message_s_record_is_one_line() {
        assert!(std::mem::size_of::<Arrival>() <= 64);
    }

    /// A kernel's recorded receives name a direction by its queue's own
    /// `Dir` (found by pointer); any other name is a new one.
    #[test]
    fn a_receive_direction_is_named_by_its_queue_s_own_dir() {
        let (machine, pe) = crate::hw::machine::test_ring_machine();
        let rx: Vec<Dir> = {
            let port = machine.pe(pe).ipcq.lock();
            port.as_ref()
                .unwrap()
                .rx
                .iter()
                .map(|(n, _)| n.clone())
                .collect()
        };
        assert!(!rx.is_empty());
        for name in &rx {
            assert!(
                Arc::ptr_eq(&machine.direction(pe, CommId::WORLD, name), name),
                "{name}"
            );
        }
        let other = machine.direction(pe, CommId::WORLD, "nowhere");
        assert_eq!(&*other, "nowhere");
        assert!(rx.iter().all(|n| !Arc::ptr_eq(n, &other)));
    }

    /// Two communicators over the same PEs each have their own rings
    /// under the same direction names: a message sent in one is received
    /// in it only (a named receive and a round-robin one), the other's
    /// receive waits and is reported under its communicator, and each
    /// communicator's installed rings are its own to the budget's early
    /// refusal.
    #[test]
    fn communicators_over_the_same_pes_keep_their_messages_apart() {
        use crate::engine::{Executor, RunOutcome};
        let (m, pe) = crate::hw::machine::test_ring_machine();
        let group = CommId(1);
        let pes = PeCoord::first_of_sips(3);
        let tables = crate::ccl::tables::builtin(NeighbourTopology::Ring1d, &pes, (3, 1)).unwrap();
        let settings = IpcqSettings::new(BufferKind::Hbm, 4, 1 << 10);
        // The same names again: no conflict, six new rings.
        assert_eq!(m.extend_ipcq(group, &tables, settings).unwrap(), 6);
        assert!(!Arc::ptr_eq(
            &m.direction(pe, CommId::WORLD, "W"),
            &m.direction(pe, group, "W")
        ));
        // The world's rings are installed: its early question asks for
        // none more; a third communicator's asks for all of them.
        let rings = crate::ccl::tables::rings_at_most(NeighbourTopology::Ring1d, 3);
        m.afford_ipcq(CommId::WORLD, rings, 4).unwrap();
        let tiny = Machine::with_options(
            m.topo.clone(),
            false,
            Arc::new(crate::budget::MemoryBudget::new(1)),
        );
        assert!(tiny.afford_ipcq(CommId(2), rings, 4).is_err());

        let west = pes[0];
        let shape = Shape::from_slice(&[8]);
        let got: Arc<std::sync::Mutex<Vec<&str>>> = Default::default();
        let ex = Executor::new();
        ex.enter(|| {
            let (m2, got2) = (m.clone(), got.clone());
            engine::spawn_detached(async move {
                let t = m2
                    .alloc_tensor(
                        crate::address::Space::Hbm { sip: 0, cube: 0 },
                        &[8],
                        Dtype::F16,
                    )
                    .unwrap();
                let east = m2.direction(west, group, "E");
                m2.send((west, group), &east, t).await.unwrap();
                got2.lock().unwrap().push("sent in the group");
            });
            for (at, comm, named, what) in [
                (pe, group, true, "group, named"),
                (pe, CommId::WORLD, false, "world, any"),
                (pes[2], group, true, "nothing comes"),
            ] {
                let (m3, got3, shape) = (m.clone(), got.clone(), shape.clone());
                engine::spawn_detached(async move {
                    let dir = m3.direction(at, comm, "W");
                    let from = named.then_some(&dir);
                    if m3
                        .recv((at, comm), from, &shape, Dtype::F16, None)
                        .await
                        .is_ok()
                    {
                        got3.lock().unwrap().push(what);
                    }
                });
            }
        });
        assert_ne!(ex.run(), RunOutcome::Finished, "the world's receive waits");
        let got = got.lock().unwrap().clone();
        assert!(got.contains(&"group, named"), "{got:?}");
        assert!(!got.contains(&"world, any"), "{got:?}");
        let report = m.blocked_report();
        assert_eq!(report.len(), 2, "{report:?}");
        assert_eq!(report[0].0, pe);
        assert!(!report[0].1.contains("communicator"), "{report:?}");
        assert_eq!(report[1].0, pes[2]);
        assert!(report[1].1.starts_with("communicator 1: "), "{report:?}");
        assert!(
            report[1].1.contains(&pe.to_string()),
            "the group's sender: {report:?}"
        );
        // Dumped apart: the group's rings are named with it.
        let dump = m.ipcq_dump(0);
        assert!(
            dump.iter().any(|l| l.contains("(communicator 1) rx W")),
            "{dump:?}"
        );
        assert_eq!(dump.len(), 12, "{dump:?}");
    }

    /// A full mesh's rings are charged to the run's budget before any is
    /// built: refused whole (nothing installed, nothing charged) when the
    /// budget cannot hold them, charged exactly and given back with the
    /// machine when it can.
    #[test]
    fn a_full_mesh_too_big_for_the_budget_is_refused_before_it_is_installed() {
        use crate::budget::{MemoryBudget, MemoryUse};
        let mut spec = TopologySpec::default_embedded();
        spec.system.sips.count = 16;
        let topo = Arc::new(crate::topology::build(&spec).unwrap());
        let pes = PeCoord::first_of_sips(16);
        let tables =
            crate::ccl::tables::builtin(NeighbourTopology::FullMesh, &pes, (16, 1)).unwrap();
        let settings = IpcqSettings::new(BufferKind::Hbm, 4, 1 << 10);
        let rings = 16 * 15;
        let needed = rings * crate::hw::ipcq::ring_host_bytes(4);
        assert_eq!(needed, rings * 1024);

        let budget = Arc::new(MemoryBudget::new(needed - 1));
        let small = Machine::with_options(topo.clone(), false, budget.clone());
        // Refused by the question asked before the tables are made, too.
        let full_mesh = crate::ccl::tables::rings_at_most(NeighbourTopology::FullMesh, 16);
        let asked = small
            .afford_ipcq(CommId::WORLD, full_mesh, 4)
            .unwrap_err()
            .to_string();
        assert!(asked.contains("240 new rings"), "{asked}");
        let err = small
            .install_ipcq(CommId::WORLD, &tables, settings)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("IPCQ rings (240 new rings of 4 slots, 1.0 KiB of host memory each) asked for 240.0 KiB"),
            "{err}"
        );
        assert_eq!(budget.used_by(MemoryUse::IpcqRings), 0);
        assert!(small.pe(pes[0]).ipcq.lock().is_none(), "nothing installed");

        let budget = Arc::new(MemoryBudget::new(needed));
        let machine = Machine::with_options(topo, false, budget.clone());
        machine.afford_ipcq(CommId::WORLD, full_mesh, 4).unwrap();
        machine
            .install_ipcq(CommId::WORLD, &tables, settings)
            .unwrap();
        assert_eq!(budget.used_by(MemoryUse::IpcqRings), needed);
        // A second full mesh of the same group would share every ring.
        machine.afford_ipcq(CommId::WORLD, full_mesh, 4).unwrap();
        // Installed again (another algorithm's same tables): shared, not
        // charged twice.
        assert_eq!(
            machine
                .extend_ipcq(CommId::WORLD, &tables, settings)
                .unwrap(),
            0
        );
        assert_eq!(budget.used_by(MemoryUse::IpcqRings), needed);
        drop(machine);
        assert_eq!(budget.used_by(MemoryUse::IpcqRings), 0);
    }
}
