//! PE_IPCQ: ring buffers between neighbour PEs (seed ADR-0023).
//!
//! Every receiving PE has, per incoming direction, an [`RxQueue`] of
//! `n_slots` slots of `slot_size` bytes in its buffer space (TCM, SRAM or
//! HBM, from ccl.yaml `buffer_kind`).
//!
//! Protocol and slot rule:
//! * `send` takes a free slot of the peer's queue (it blocks while there is
//!   none), appends an arrival record in send order, and issues a DMA from
//!   the source tensor into the slot; the data is visible to `recv` when
//!   that DMA completes.
//! * `recv` takes arrivals in order and returns a tensor that *is* the slot
//!   (zero-copy).
//! * A slot is released when the receiving kernel has dropped every handle
//!   to it **and** no issued command still reads it (e.g. a forwarding
//!   `send` or an `add`). The sender learns of the free slot one credit
//!   latency later: the summed link latency of the path back to it.
//!
//! This module owns the ring: its shape ([`RingShape`]), its free slots
//! and credits, its message numbering and order ([`RxQueue`]), its two
//! copies on a split machine ([`RxQueue::ends`]) and whether a second
//! table may share an installed direction ([`TxEntry::shared_by`]). The
//! machine wires rings into PEs (`hw/machine/ipcq_install.rs`) and puts
//! sends on its DMA engines (`hw/machine/messaging.rs`).

use super::blocked::Dir;
use super::dtype::Dtype;
use crate::address::Space;
use crate::config::ccl::BufferKind;
use crate::engine::lock::OneThread;
use crate::engine::{Event, Signal};
use crate::topology::PeCoord;
use crate::units::Ps;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Host memory one installed ring of `n_slots` slots takes, charged to
/// the run's budget before the install builds anything
/// ([`crate::budget::MemoryUse::IpcqRings`]): its queue (two copies
/// between partitions of a split machine), its signal, its names, its
/// sender's entry, its neighbour-table entry and its share of the
/// install's working lists. Measured as the peak RSS a full mesh adds
/// per ring (binomial broadcast, 2 slots, split in 2; ring broadcast's
/// run on the same machine subtracted): 971 bytes at 1024 SIPs (1 M
/// rings), 981 at 2048 (4.2 M); charged 992 at 2 slots, 16 bytes of it
/// a slot (its free list).
pub fn ring_host_bytes(n_slots: u32) -> u64 {
    960 + 16 * n_slots as u64
}

/// IPCQ settings from ccl.yaml.
#[derive(Debug, Clone, Copy)]
pub struct IpcqSettings {
    pub buffer_kind: BufferKind,
    pub n_slots: u32,
    pub slot_size: u64,
    /// A receive checks the message's shape and dtype, not only its size.
    pub strict: bool,
    /// A sender with no free slot polls the peer every this many ps
    /// (`None`: it sleeps until the credit wakes it).
    pub poll_interval: Option<Ps>,
}

impl IpcqSettings {
    /// Settings with the seed's defaults: size checks only, sleeping senders.
    pub fn new(buffer_kind: BufferKind, n_slots: u32, slot_size: u64) -> Self {
        IpcqSettings {
            buffer_kind,
            n_slots,
            slot_size,
            strict: false,
            poll_interval: None,
        }
    }

    /// The ring these settings make into `receiver`'s buffer space.
    pub fn ring_into(&self, receiver: PeCoord) -> RingShape {
        let (sip, cube) = (receiver.sip, receiver.cube);
        let space = match self.buffer_kind {
            BufferKind::Tcm => Space::Tcm(receiver),
            BufferKind::Sram => Space::Sram { sip, cube },
            BufferKind::Hbm => Space::Hbm { sip, cube },
        };
        RingShape {
            space,
            n_slots: self.n_slots,
            slot_size: self.slot_size,
            strict: self.strict,
            poll_interval: self.poll_interval,
        }
    }
}

/// A ring as installed: where its slots are and how its ends behave. Two
/// tables that name one direction share its ring only if they ask for
/// the same shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingShape {
    /// The receiver's buffer space its slots are in.
    pub space: Space,
    pub n_slots: u32,
    pub slot_size: u64,
    pub strict: bool,
    pub poll_interval: Option<Ps>,
}

impl RingShape {
    /// The bytes of its slots.
    pub fn bytes(&self) -> u64 {
        self.slot_size * self.n_slots as u64
    }
}

impl std::fmt::Display for RingShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} slots of {} bytes in {} (strict {}, poll {:?} ps)",
            self.n_slots, self.slot_size, self.space, self.strict, self.poll_interval
        )
    }
}

/// A message that has been sent (its data lands when `ready` is set).
/// 64 bytes, a cache line: a send writes it into its receiver's queue,
/// where that queue's last message left it (cold at hundreds of ranks);
/// with its size in bytes as a field of its own it was 72, two lines.
#[derive(Debug)]
pub struct Arrival {
    pub slot: u32,
    pub shape: super::machine::Shape,
    pub dtype: Dtype,
    pub from: PeCoord,
    pub ready: Event,
    /// Its number among the messages of this ring (for the CCL trace).
    pub seq: u64,
}

impl Arrival {
    /// The message's size in bytes (its shape and dtype are the sent
    /// tensor's, whose size was computed when it was made).
    pub fn nbytes(&self) -> u64 {
        self.dtype
            .nbytes(&self.shape)
            .expect("a sent tensor's size fits")
    }
}

/// One direction's receive ring of one PE.
#[derive(Debug)]
pub struct RxQueue {
    /// Its number among the machine's rings, in the order they were
    /// installed (a split machine's two copies of a ring share it).
    pub ring: u64,
    pub space: Space,
    pub base: u64,
    pub slot_size: u64,
    /// Free slots and the time the sender may see each as free.
    pub free: VecDeque<(u32, Ps)>,
    /// Fires whenever a slot is freed.
    pub freed: Signal,
    pub arrivals: VecDeque<Arrival>,
    /// Credit latency back to the sender.
    pub credit_latency: Ps,
    /// Receives check shape and dtype (`strict_validation`), not only size.
    pub strict: bool,
    /// `backpressure: poll`: a blocked sender looks every this many ps.
    pub poll_interval: Option<Ps>,
    /// Messages sent into this ring so far (the seed's tail).
    pub sent: u64,
    /// Messages the receiver has taken (the seed's head).
    pub taken: u64,
    pub n_slots: u32,
    /// The sender and its direction (this ring's name on its side).
    pub sender: PeCoord,
    pub sender_dir: super::blocked::Dir,
    /// The receiver's copy of a ring whose sender is in another partition
    /// of a split machine: that partition and the sender's copy, where
    /// freed slots go (see [`crate::hw::mail`]).
    pub credit_to: Option<(usize, std::sync::Weak<OneThread<RxQueue>>)>,
    /// The sender's copy of a ring whose receiver is in another partition:
    /// that partition and the receiver's copy, where messages go.
    pub deliver_to: Option<(usize, SharedQueue)>,
}

impl RxQueue {
    /// The ring's pointers at `now`, in the words of the seed's pointer
    /// dump: what was sent and taken, and what the sender can see.
    pub fn pointers(&self, now: Ps) -> String {
        let in_flight = self.free.iter().filter(|&&(_, t)| t > now).count();
        format!(
            "tail={} (sent by {} {}) head={} (taken), {} waiting; slots: {} of {} held, {} credit(s) on their way back",
            self.sent,
            self.sender,
            self.sender_dir,
            self.taken,
            self.arrivals.len(),
            self.n_slots as usize - self.free.len(),
            self.n_slots,
            in_flight
        )
    }
}

/// What [`RxQueue::post`] did with a message: its number in the ring
/// and, for a receiver in another partition, the mail that carries it
/// there when its bytes land (see [`crate::hw::mail`]).
pub struct Posted {
    pub seq: u64,
    pub remote: Option<Box<(usize, super::mail::Message)>>,
}

impl RxQueue {
    /// A new ring of `shape` at `base` of its space from `sender`'s
    /// direction `sender_dir`, every slot free from the start; its
    /// credits take `credit_latency` back.
    pub fn new(
        ring: u64,
        shape: RingShape,
        base: u64,
        credit_latency: Ps,
        (sender, sender_dir): (PeCoord, Dir),
    ) -> Self {
        RxQueue {
            ring,
            space: shape.space,
            base,
            slot_size: shape.slot_size,
            free: (0..shape.n_slots).map(|i| (i, 0)).collect(),
            freed: Signal::new(),
            arrivals: VecDeque::new(),
            credit_latency,
            strict: shape.strict,
            poll_interval: shape.poll_interval,
            sent: 0,
            taken: 0,
            n_slots: shape.n_slots,
            sender,
            sender_dir,
            credit_to: None,
            deliver_to: None,
        }
    }

    /// Its shape as installed.
    pub fn shape(&self) -> RingShape {
        RingShape {
            space: self.space,
            n_slots: self.n_slots,
            slot_size: self.slot_size,
            strict: self.strict,
            poll_interval: self.poll_interval,
        }
    }

    /// A new ring's sender's end and receiver's end: one queue when both
    /// PEs are in one partition; else a copy on each side, each touched
    /// by its own partition's thread only (see [`crate::hw::mail`]): the
    /// sender's takes free slots and delivers to the receiver's, which
    /// holds the messages and credits the sender's.
    pub fn ends(self, sender_part: usize, receiver_part: usize) -> (SharedQueue, SharedQueue) {
        if sender_part == receiver_part {
            let queue = Arc::new(OneThread::new(self));
            return (queue.clone(), queue);
        }
        let sender_copy = RxQueue::new(
            self.ring,
            self.shape(),
            self.base,
            self.credit_latency,
            (self.sender, self.sender_dir.clone()),
        );
        let receivers = Arc::new(OneThread::new(self));
        let senders = Arc::new(OneThread::new(RxQueue {
            deliver_to: Some((receiver_part, receivers.clone())),
            ..sender_copy
        }));
        receivers.lock().credit_to = Some((sender_part, Arc::downgrade(&senders)));
        (senders, receivers)
    }

    /// A sender takes a free slot: it and the time the sender may see it
    /// free (0: never used).
    pub fn take_free(&mut self) -> Option<(u32, Ps)> {
        self.free.pop_front()
    }

    /// When a sender that found no free slot at `asked` sees one its
    /// credit makes free at `visible`: then, if it sleeps (the credit
    /// wakes it); at its next look, if it polls every `poll_interval`.
    pub fn seen_at(&self, asked: Ps, visible: Ps) -> Ps {
        match self.poll_interval {
            Some(p) if visible > asked && p > 0 => {
                let looks = (visible - asked).div_ceil(p);
                asked.saturating_add(looks.saturating_mul(p))
            }
            _ => visible,
        }
    }

    /// A message into its slot, numbered here in send order (`message`
    /// is given its number): queued for the receiver (whose port `notify`
    /// is woken), or, when the receiver's copy is in another partition,
    /// the mail that carries it there.
    #[inline]
    pub fn post(&mut self, message: impl FnOnce(u64) -> Arrival, notify: &Signal) -> Posted {
        let seq = self.sent;
        self.sent += 1;
        let message = message(seq);
        let remote = match &self.deliver_to {
            // The receiver's copy gets it when it lands.
            Some((part, queue)) => Some(Box::new((
                *part,
                super::mail::Message {
                    queue: queue.clone(),
                    notify: notify.clone(),
                    slot: message.slot,
                    shape: message.shape,
                    dtype: message.dtype,
                    from: message.from,
                    seq,
                },
            ))),
            None => {
                self.arrivals.push_back(message);
                notify.notify();
                None
            }
        };
        Posted { seq, remote }
    }

    pub fn slot_offset(&self, slot: u32) -> u64 {
        self.base + slot as u64 * self.slot_size
    }

    /// The next message in send order, if it has arrived: on one executor
    /// every message is here from its send on, in order; a ring whose
    /// sender is in another partition gets each when it lands, and a later
    /// message can land first (a short one, in a gap of a link a longer one
    /// waits for), so a receive must not take it before the one sent
    /// before it.
    pub fn next_arrival(&self) -> Option<&Arrival> {
        self.arrivals.front().filter(|a| a.seq == self.taken)
    }

    /// Take [`RxQueue::next_arrival`].
    pub fn take_next_arrival(&mut self) -> Option<Arrival> {
        self.next_arrival()?;
        self.taken += 1;
        self.arrivals.pop_front()
    }

    /// A message of another partition's sender that has landed, put in
    /// send order among those not yet taken.
    pub fn insert_landed(&mut self, arrival: Arrival) {
        let at = self.arrivals.partition_point(|a| a.seq < arrival.seq);
        self.arrivals.insert(at, arrival);
    }

    /// The place of its credits among the keyed events of a picosecond
    /// (see `crate::engine::keyed`), for a ring between SIPs: a sender
    /// goes on with a slot freed for it at that place, whether the credit
    /// came as mail from another partition (delivered at that place) or
    /// not (the sender waits for it there). After every landing's
    /// (whose keys are PE indices, below 2^63).
    pub fn credit_key(&self) -> crate::engine::OrderKey {
        1 << 63 | self.ring
    }

    /// Return `slot` at time `now`: the sender sees it one credit latency
    /// later (its copy of the ring gets it then, when it is another
    /// partition's).
    pub fn release(&mut self, slot: u32, now: Ps) {
        let visible = now + self.credit_latency;
        if let Some((part, queue)) = &self.credit_to {
            let queue = queue
                .upgrade()
                .expect("the sender's copy of a ring outlives its slots");
            super::mail::post(*part, visible, super::mail::Mail::Credit { queue, slot });
            return;
        }
        self.free.push_back((slot, visible));
        self.freed.notify();
    }
}

pub type SharedQueue = Arc<OneThread<RxQueue>>;

/// Where a direction sends to.
#[derive(Debug, Clone)]
pub struct TxEntry {
    pub peer: PeCoord,
    /// The direction the peer receives from (shared: a send clones its
    /// entry).
    pub peer_dir: crate::hw::blocked::Dir,
    /// The peer's receive queue for `peer_dir`.
    pub queue: SharedQueue,
    /// The peer's [`IpcqPort::rx_notify`] (a send wakes the peer without
    /// looking its port up: at a thousand ranks that was cache misses).
    pub peer_notify: Signal,
    /// The ring's slot size, as installed (a copy: a send's check reads
    /// it here, so the kernel-recording thread never locks the ring).
    pub slot_size: u64,
}

impl TxEntry {
    /// Whether a second table's direction to `peer`, arriving as
    /// `peer_dir`, with rings of `want`, may share this installed one: it
    /// must lead to the same place and ask for the same ring; else why
    /// not.
    pub fn shared_by(&self, peer: PeCoord, peer_dir: &str, want: RingShape) -> Result<(), String> {
        if (self.peer, &*self.peer_dir) != (peer, peer_dir) {
            return Err(format!(
                "installed to {} (received as {}), asked to lead to {peer} (received as {peer_dir})",
                self.peer, self.peer_dir
            ));
        }
        let have = self.queue.lock().shape();
        if have != want {
            return Err(format!("installed with {have}, asked for {want}"));
        }
        Ok(())
    }

    /// What a send on this direction needs.
    pub fn target(&self) -> SendTarget {
        SendTarget {
            peer: self.peer,
            queue: self.queue.clone(),
            peer_notify: self.peer_notify.clone(),
        }
    }
}

/// What a send needs of its direction's [`TxEntry`]: kept in the sending
/// PE's state, whose lines a send touches anyway.
#[derive(Debug, Clone)]
pub struct SendTarget {
    pub peer: PeCoord,
    pub queue: SharedQueue,
    pub peer_notify: Signal,
}

/// A communicator: the IPCQ of one process group. A PE has a port per
/// communicator it is a member of, and its kernels name directions in the
/// port of the communicator they were launched for, so two groups over the
/// same PEs may both name a direction `E` (NCCL's communicators each have
/// their own channels). [`CommId::WORLD`] is the default process group's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct CommId(pub u32);

impl CommId {
    /// The default process group's communicator.
    pub const WORLD: CommId = CommId(0);
    /// Not a communicator: the kernels `torch.launch` runs (a rank's
    /// compute stream). They have no IPCQ; the id only keeps their
    /// commands, op log and trace apart from a collective's kernels
    /// running on the same PE at the same time.
    pub const LAUNCH: CommId = CommId(u32::MAX);

    /// What a trace track of this communicator's kernels adds to its
    /// name: nothing for the default group, ` g<id>` for a group,
    /// ` launch` for `torch.launch`'s kernels.
    pub fn track_suffix(self) -> String {
        match self {
            CommId::WORLD => String::new(),
            CommId::LAUNCH => " launch".to_string(),
            CommId(g) => format!(" g{g}"),
        }
    }
}

impl std::fmt::Display for CommId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            CommId::LAUNCH => write!(f, "kernels of torch.launch (which have no IPCQ)"),
            CommId(n) => write!(f, "communicator {n}"),
        }
    }
}

/// The IPCQ block of one PE in one communicator: its neighbour table and
/// receive queues.
#[derive(Debug, Default)]
pub struct IpcqPort {
    /// By direction; shared, so a send takes its entry with one count
    /// change instead of one per `Arc` inside it.
    pub tx: BTreeMap<String, Arc<TxEntry>>,
    /// Receive queues in round-robin order (only ever appended), by name:
    /// the `Dir` a kernel's recorded receives name too (see
    /// [`crate::hw::Machine::direction`]), so a receive finds its queue
    /// by pointer, without reading the name. Two in place, in the PE's
    /// state: a ring's receive finds its queue without a line of its own
    /// (a mesh's four spill to the heap).
    pub rx: smallvec::SmallVec<[(Dir, SharedQueue); 2]>,
    pub rr: usize,
    /// Fires whenever a message is appended to any rx queue.
    pub rx_notify: Signal,
}

impl IpcqPort {
    /// Take `more`'s directions into this port (a second table of the
    /// same PE): sends by name, receives after those installed, in order.
    pub fn absorb(&mut self, more: IpcqPort) {
        self.tx.extend(more.tx);
        self.rx.extend(more.rx);
    }

    /// The index of receive direction `name` among `rx`.
    pub fn rx_index(&self, name: &str) -> Option<usize> {
        self.rx.iter().position(|(n, _)| **n == *name)
    }

    pub fn installed_dirs(&self) -> String {
        let mut d: Vec<&str> = self.tx.keys().map(|s| s.as_str()).collect();
        for (n, _) in &self.rx {
            if !d.contains(&&**n) {
                d.push(n);
            }
        }
        if d.is_empty() {
            "none".into()
        } else {
            d.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pe(n: u32) -> PeCoord {
        PeCoord {
            sip: n,
            cube: 0,
            pe: 0,
        }
    }

    /// Two slots of 64 bytes in PE 1's TCM, from PE 0's direction `E`,
    /// credits 30 ps back.
    fn ring() -> RxQueue {
        let shape = IpcqSettings::new(BufferKind::Tcm, 2, 64).ring_into(pe(1));
        RxQueue::new(0, shape, 4096, 30, (pe(0), Arc::from("E")))
    }

    fn message(slot: u32) -> impl FnOnce(u64) -> Arrival {
        move |seq| Arrival {
            slot,
            shape: crate::hw::machine::Shape::from_slice(&[1]),
            dtype: Dtype::F16,
            from: pe(0),
            ready: Event::done(),
            seq,
        }
    }

    /// A ring is made in its receiver's buffer space with every slot free
    /// from the start, and keeps the shape it was asked for.
    #[test]
    fn a_new_ring_has_every_slot_free_in_the_receiver_s_space() {
        let q = ring();
        assert_eq!(q.space, Space::Tcm(pe(1)));
        assert_eq!(q.shape().bytes(), 128);
        assert_eq!(q.free, [(0, 0), (1, 0)]);
        assert_eq!(q.slot_offset(1), 4096 + 64);
        let sram = IpcqSettings::new(BufferKind::Sram, 2, 64).ring_into(pe(3));
        assert_eq!(sram.space, Space::Sram { sip: 3, cube: 0 });
    }

    /// Senders take slots in order; a released slot comes back one credit
    /// latency later and wakes a waiting sender.
    #[test]
    fn a_released_slot_comes_back_one_credit_latency_later() {
        let mut q = ring();
        assert_eq!(q.take_free(), Some((0, 0)));
        assert_eq!(q.take_free(), Some((1, 0)));
        assert_eq!(q.take_free(), None, "both slots held");
        let seen = q.freed.generation();
        q.release(1, 100);
        assert_eq!(q.take_free(), Some((1, 130)));
        assert_ne!(q.freed.generation(), seen, "the sender is woken");
    }

    /// A sleeping sender sees a credit when it comes; a polling one at its
    /// next look after it (every `poll_interval` from when it asked).
    #[test]
    fn a_polling_sender_sees_a_credit_at_its_next_look() {
        let mut q = ring();
        assert_eq!(q.seen_at(100, 130), 130);
        q.poll_interval = Some(20);
        assert_eq!(q.seen_at(100, 130), 140);
        assert_eq!(q.seen_at(100, 140), 140);
        assert_eq!(q.seen_at(100, 0), 0, "a slot never used is free at once");
    }

    /// Messages are numbered in send order and queued for the receiver,
    /// whose port is woken.
    #[test]
    fn messages_are_numbered_in_send_order_and_queued_for_the_receiver() {
        let mut q = ring();
        let notify = Signal::new();
        let seen = notify.generation();
        for slot in [1, 0] {
            let posted = q.post(message(slot), &notify);
            assert!(posted.remote.is_none());
        }
        assert_ne!(notify.generation(), seen);
        let got: Vec<(u64, u32)> = q.arrivals.iter().map(|a| (a.seq, a.slot)).collect();
        assert_eq!(got, [(0, 1), (1, 0)]);
        assert_eq!(q.sent, 2);
    }

    /// Within one partition a ring is one queue; between two it is a copy
    /// on each side: the sender's delivers its messages to the
    /// receiver's as mail, the receiver's sends its credits back.
    #[test]
    fn a_ring_between_partitions_is_two_linked_copies() {
        let (a, b) = ring().ends(0, 0);
        assert!(Arc::ptr_eq(&a, &b));
        let (senders, receivers) = ring().ends(0, 1);
        assert!(!Arc::ptr_eq(&senders, &receivers));
        let s = senders.lock();
        let (part, to) = s.deliver_to.as_ref().expect("the sender's copy delivers");
        assert_eq!(*part, 1);
        assert!(Arc::ptr_eq(to, &receivers));
        drop(s);
        let r = receivers.lock();
        let (part, back) = r.credit_to.as_ref().expect("the receiver's copy credits");
        assert_eq!(*part, 0);
        assert!(Arc::ptr_eq(&back.upgrade().unwrap(), &senders));
        assert_eq!((r.ring, r.shape()), (0, ring().shape()));
        drop(r);
        let posted = senders.lock().post(message(0), &Signal::new());
        let (part, mail) = *posted.remote.expect("mail to the receiver's side");
        assert_eq!((part, mail.seq, posted.seq), (1, 0, 0));
        assert!(senders.lock().arrivals.is_empty());
    }

    /// A second table may share an installed direction only if it leads
    /// to the same peer under the same name, with the same ring.
    #[test]
    fn a_direction_is_shared_only_to_the_same_place_with_the_same_ring() {
        let shape = ring().shape();
        let entry = TxEntry {
            peer: pe(1),
            peer_dir: Arc::from("W"),
            queue: Arc::new(OneThread::new(ring())),
            peer_notify: Signal::new(),
            slot_size: 64,
        };
        assert_eq!(entry.shared_by(pe(1), "W", shape), Ok(()));
        let elsewhere = entry.shared_by(pe(2), "W", shape).unwrap_err();
        assert!(elsewhere.contains("asked to lead to"), "{elsewhere}");
        let bigger = RingShape {
            n_slots: 4,
            ..shape
        };
        let why = entry.shared_by(pe(1), "W", bigger).unwrap_err();
        assert!(
            why.starts_with("installed with 2 slots of 64 bytes in"),
            "{why}"
        );
        assert!(why.contains("asked for 4 slots"), "{why}");
    }

    /// A message that lands before one sent earlier waits for it: the
    /// receive takes them in send order.
    #[test]
    fn messages_are_taken_in_send_order_whatever_order_they_land_in() {
        let mut q = ring();
        let sent = |seq: u64| message(seq as u32)(seq);
        q.insert_landed(sent(1));
        assert!(q.next_arrival().is_none(), "message 0 has not landed");
        assert!(q.take_next_arrival().is_none());
        q.insert_landed(sent(0));
        let taken: Vec<u64> = std::iter::from_fn(|| q.take_next_arrival().map(|a| a.seq)).collect();
        assert_eq!(taken, [0, 1]);
        assert_eq!(q.taken, 2);
    }
}
