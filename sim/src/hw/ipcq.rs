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

use super::blocked::Dir;
use super::dtype::Dtype;
use crate::address::Space;
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

impl RxQueue {
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

/// The IPCQ block of one PE: its neighbour table and receive queues.
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

    /// A message that lands before one sent earlier waits for it: the
    /// receive takes them in send order.
    #[test]
    fn messages_are_taken_in_send_order_whatever_order_they_land_in() {
        let pe = PeCoord {
            sip: 0,
            cube: 0,
            pe: 0,
        };
        let mut q = RxQueue {
            ring: 0,
            space: Space::Tcm(pe),
            base: 0,
            slot_size: 64,
            free: VecDeque::new(),
            freed: Signal::new(),
            arrivals: VecDeque::new(),
            credit_latency: 0,
            strict: false,
            poll_interval: None,
            sent: 0,
            taken: 0,
            n_slots: 2,
            sender: pe,
            sender_dir: Arc::from("E"),
            credit_to: None,
            deliver_to: None,
        };
        let message = |seq: u64| Arrival {
            slot: seq as u32,
            shape: crate::hw::machine::Shape::from_slice(&[1]),
            dtype: Dtype::F16,
            from: pe,
            ready: Event::done(),
            seq,
        };
        q.insert_landed(message(1));
        assert!(q.next_arrival().is_none(), "message 0 has not landed");
        assert!(q.take_next_arrival().is_none());
        q.insert_landed(message(0));
        let taken: Vec<u64> = std::iter::from_fn(|| q.take_next_arrival().map(|a| a.seq)).collect();
        assert_eq!(taken, [0, 1]);
        assert_eq!(q.taken, 2);
    }
}
