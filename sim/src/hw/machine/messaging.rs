//! The machine's IPCQ commands (seed ADR-0023): `send` / `recv` on a
//! communicator's ring buffers, in order and round-robin. Installing the
//! rings is [`super::ipcq_install`], reporting blocked PEs
//! [`super::blocked_report`], the ring buffers themselves
//! [`crate::hw::ipcq`].

use super::{DmaKind, Machine, Shape, TensorInner, TensorRef};
use crate::engine::{self, Event};
use crate::error::HwError;
use crate::hw::blocked::{Blocked, Dir, RxDir};
use crate::hw::dtype::Dtype;
use crate::hw::ipcq::{Arrival, CommId, Posted, SendTarget, SharedQueue, TxEntry};
use crate::hw::oplog::Actor;
use crate::hw::tensor::Hold;
use crate::topology::PeCoord;
use std::future::Future;
use std::sync::Arc;

impl Machine {
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
                l.observe(
                    Actor::Pe(pe, comm),
                    "slot_credit",
                    engine::now(),
                    &[],
                    &freed,
                );
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
                (pe, comm).into(),
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
            self.observe((pe, comm), "wait", std::slice::from_ref(&t.ready), &[]);
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
                m.observe(
                    (pe, comm),
                    "wait",
                    std::slice::from_ref(&arrival.ready),
                    &[],
                );
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
                        (pe, comm).into(),
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ccl::{BufferKind, NeighbourTopology};
    use crate::hw::machine::IpcqSettings;

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
}
