//! The timer queue: a hierarchical timing wheel (as in Linux and tokio).
//!
//! 11 levels of 64 slots cover all of `u64` (level `L` slots are `64^L` ps
//! wide). A timer goes to the level of the highest bit in which its time
//! differs from the wheel's position, so lower levels always hold earlier
//! timers; popping takes the first occupied slot of the lowest occupied
//! level (bitmaps, `trailing_zeros`) and, above level 0, re-files ("cascades")
//! that slot's timers one level down. Insert and pop are O(1) amortised with
//! no data-dependent comparisons.
//!
//! Order: all pending timers for one time always sit in the same slot, in
//! insertion order (a later insertion can never land below an earlier one
//! for the same time), so timers fire in exactly (time, insertion sequence)
//! order — the executor's contract — without storing a sequence number.

use crate::units::Ps;

const BITS: u32 = 6;
const SLOTS: usize = 1 << BITS;
const LEVELS: usize = 11; // 6 * 11 = 66 >= 64 bits

/// Level of each highest differing bit (bit / 6).
const LEVEL_OF_BIT: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut b = 0;
    while b < 64 {
        t[b] = (b as u32 / BITS) as u8;
        b += 1;
    }
    t
};

fn level_of(elapsed: Ps, at: Ps) -> usize {
    // `| 1` maps "same time" to bit 0, i.e. level 0.
    LEVEL_OF_BIT[(63 - ((at ^ elapsed) | 1).leading_zeros()) as usize] as usize
}

const NIL: u32 = u32::MAX;

/// A timer in the node arena, linked into its slot's FIFO list.
#[derive(Clone, Copy)]
struct Node<T> {
    at: Ps,
    item: T,
    next: u32,
}

/// A FIFO list of arena nodes.
#[derive(Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
}

const EMPTY: List = List {
    head: NIL,
    tail: NIL,
};

pub(super) struct TimerWheel<T> {
    /// Position of the wheel: never after the earliest pending timer.
    elapsed: Ps,
    occupied: [u64; LEVELS],
    slots: Vec<List>,
    /// Timer nodes; freed ones are reused first (they are hot in cache).
    nodes: Vec<Node<T>>,
    free: Vec<u32>,
    /// Timers of `due_at`, being handed out in order.
    due: List,
    due_at: Ps,
    len: usize,
}

impl<T: Copy> Default for TimerWheel<T> {
    fn default() -> Self {
        TimerWheel {
            elapsed: 0,
            occupied: [0; LEVELS],
            slots: vec![EMPTY; LEVELS * SLOTS],
            nodes: Vec::new(),
            free: Vec::new(),
            due: EMPTY,
            due_at: 0,
            len: 0,
        }
    }
}

impl<T: Copy> TimerWheel<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    fn append(nodes: &mut [Node<T>], list: &mut List, idx: u32) {
        nodes[idx as usize].next = NIL;
        if list.tail == NIL {
            list.head = idx;
        } else {
            nodes[list.tail as usize].next = idx;
        }
        list.tail = idx;
    }

    /// Add a timer at `at` (never before the last popped time).
    pub fn push(&mut self, at: Ps, item: T) {
        debug_assert!(
            at >= self.elapsed,
            "timer in the past: {at} < {}",
            self.elapsed
        );
        self.len += 1;
        let node = Node {
            at,
            item,
            next: NIL,
        };
        let idx = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                assert!(
                    self.nodes.len() < NIL as usize,
                    "engine: too many pending timers"
                );
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        if at == self.due_at && self.due.head != NIL {
            Self::append(&mut self.nodes, &mut self.due, idx);
        } else {
            self.file(idx);
        }
    }

    #[inline(always)]
    fn file(&mut self, idx: u32) {
        let at = self.nodes[idx as usize].at;
        let level = level_of(self.elapsed, at);
        let slot = ((at >> (BITS as usize * level)) & (SLOTS as u64 - 1)) as usize;
        Self::append(&mut self.nodes, &mut self.slots[level * SLOTS + slot], idx);
        self.occupied[level] |= 1 << slot;
    }

    /// The earliest timer's time, the wheel unchanged (`None`: empty).
    /// Scans the one slot that holds it (a window's end, not a hot path).
    pub fn next_at(&self) -> Option<Ps> {
        if self.due.head != NIL {
            return Some(self.due_at);
        }
        let (level, slot) = self.first_slot()?;
        let mut idx = self.slots[level * SLOTS + slot].head;
        let mut least = Ps::MAX;
        while idx != NIL {
            let node = &self.nodes[idx as usize];
            least = least.min(node.at);
            idx = node.next;
        }
        Some(least)
    }

    /// The lowest occupied level and its earliest occupied slot: the one
    /// that holds the earliest timer outside the due list.
    #[inline(always)]
    fn first_slot(&self) -> Option<(usize, usize)> {
        let level = self.occupied.iter().position(|&o| o != 0)?;
        let digit = (self.elapsed >> (BITS as usize * level)) & (SLOTS as u64 - 1);
        // Every occupied slot of the lowest level is at or after the
        // wheel's own digit there.
        let slot = (self.occupied[level] & (!0u64 << digit)).trailing_zeros() as usize;
        debug_assert!(slot < SLOTS, "occupied slot behind the wheel");
        Some((level, slot))
    }

    /// [`TimerWheel::pop`] if the earliest timer is before `end`; else
    /// `None` with every timer kept. The wheel's position never passes
    /// `end` here, so timers pushed later at `end` or after (the next
    /// window's) file as they would have.
    pub fn pop_before(&mut self, end: Ps) -> Option<(Ps, T)> {
        loop {
            if self.due.head != NIL {
                return (self.due_at < end).then(|| self.take_due());
            }
            let (level, slot) = self.first_slot()?;
            // Every timer of the slot is at this time or later.
            let start = self.slot_start(level, slot).max(self.elapsed);
            if start >= end {
                return None;
            }
            let list = self.slots[level * SLOTS + slot];
            if list.head == list.tail {
                // The lone timer of that slot is the earliest of all.
                return (self.nodes[list.head as usize].at < end)
                    .then(|| self.take_lone(level, slot));
            }
            // Several: filed a level down (or made the due list) with the
            // position at `start`, before `end`; the earliest of them is
            // checked on the next turn, without taking it.
            self.cascade(level, slot);
        }
    }

    /// The first time slot `slot` of `level` covers (in the wheel's
    /// current turn of that level).
    fn slot_start(&self, level: usize, slot: usize) -> Ps {
        let shift = BITS as usize * level;
        let upper = shift + BITS as usize;
        let high = if upper >= 64 {
            0
        } else {
            self.elapsed & (!0u64 << upper)
        };
        high | ((slot as u64) << shift)
    }

    /// Take slot `slot` of `level` (several timers) and re-file them one
    /// level down, or make them the due list at level 0, with the wheel's
    /// position moved to the slot's start.
    fn cascade(&mut self, level: usize, slot: usize) {
        self.occupied[level] &= !(1u64 << slot);
        let list = std::mem::replace(&mut self.slots[level * SLOTS + slot], EMPTY);
        let start = self.slot_start(level, slot);
        self.elapsed = self.elapsed.max(start);
        if level == 0 {
            self.due = list;
            self.due_at = start;
        } else {
            let mut idx = list.head;
            while idx != NIL {
                let next = self.nodes[idx as usize].next;
                self.file(idx);
                idx = next;
            }
        }
    }

    /// The earliest timer, first-inserted first among equal times.
    pub fn pop(&mut self) -> Option<(Ps, T)> {
        loop {
            if self.due.head != NIL {
                return Some(self.take_due());
            }
            let (level, slot) = self.first_slot()?;
            let list = self.slots[level * SLOTS + slot];
            if list.head == list.tail {
                // A lone timer in the earliest slot of the lowest level is
                // the earliest timer of all: hand it out without cascading.
                return Some(self.take_lone(level, slot));
            }
            self.cascade(level, slot);
        }
    }

    /// The first timer of the (non-empty) due list. (This, `take_lone`
    /// and `first_slot` are forced inline: they were `pop`'s own code,
    /// on the hot path of every run.)
    #[inline(always)]
    fn take_due(&mut self) -> (Ps, T) {
        let idx = self.due.head;
        let node = self.nodes[idx as usize];
        self.due.head = node.next;
        if node.next == NIL {
            self.due.tail = NIL;
        }
        self.free.push(idx);
        self.len -= 1;
        (node.at, node.item)
    }

    /// The one timer of slot `slot` of `level`, the earliest of all.
    #[inline(always)]
    fn take_lone(&mut self, level: usize, slot: usize) -> (Ps, T) {
        let idx = std::mem::replace(&mut self.slots[level * SLOTS + slot], EMPTY).head;
        self.occupied[level] &= !(1u64 << slot);
        let node = self.nodes[idx as usize];
        self.free.push(idx);
        self.elapsed = node.at;
        self.len -= 1;
        (node.at, node.item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    fn xorshift(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    /// A timer at `at` in the wheel and in the reference heap, numbered
    /// by `seq` in insertion order.
    fn push_both(
        wheel: &mut TimerWheel<u64>,
        heap: &mut BinaryHeap<Reverse<(u64, u64)>>,
        seq: &mut u64,
        at: u64,
    ) {
        wheel.push(at, *seq);
        heap.push(Reverse((at, *seq)));
        *seq += 1;
    }

    /// Interleaved pushes and pops, checked against a (time, seq) heap.
    #[test]
    fn pops_in_time_then_insertion_order_like_a_heap() {
        for (seed, spread) in [(1u64, 4u64), (7, 1000), (42, 1 << 20), (99, u64::MAX / 4)] {
            let mut s = seed;
            let mut wheel = TimerWheel::default();
            let mut heap = BinaryHeap::new();
            let mut now = 0u64;
            let mut seq = 0u64;
            for round in 0..20_000 {
                let pushes = xorshift(&mut s) % 4;
                for _ in 0..pushes {
                    let r = xorshift(&mut s);
                    // Many equal times, some far-future ones.
                    let delta = if r.is_multiple_of(5) {
                        0
                    } else {
                        r % spread.max(1)
                    } + 1;
                    let at = now.saturating_add(delta);
                    push_both(&mut wheel, &mut heap, &mut seq, at);
                }
                if round % 3 != 0 {
                    let got = wheel.pop();
                    let want = heap.pop().map(|Reverse((at, q))| (at, q));
                    assert_eq!(got, want, "seed {seed} round {round}");
                    if let Some((at, _)) = got {
                        now = at;
                    }
                }
                assert_eq!(wheel.len(), heap.len());
            }
            while let Some(Reverse((at, q))) = heap.pop() {
                assert_eq!(wheel.pop(), Some((at, q)));
            }
            assert_eq!(wheel.pop(), None);
        }
    }

    /// Windows: timers before each window's end popped in order, the
    /// rest kept (and `next_at` naming the first of them), then pushes
    /// at the window's end or later: the same order as a (time, seq) heap.
    #[test]
    fn pops_before_a_window_end_like_a_heap_and_keeps_the_rest() {
        for (seed, spread, window) in [
            (3u64, 4u64, 1u64),
            (5, 1000, 37),
            (11, 1 << 20, 5000),
            (13, u64::MAX / 4, 1 << 40),
        ] {
            let mut s = seed;
            let mut wheel = TimerWheel::default();
            let mut heap = BinaryHeap::new();
            let mut seq = 0u64;
            let mut end = 0u64;
            for round in 0..3_000 {
                // The next window's pushes: at its start or later, as a
                // message from another partition would be.
                for _ in 0..xorshift(&mut s) % 4 {
                    let r = xorshift(&mut s);
                    let delta = if r.is_multiple_of(4) { 0 } else { r % spread };
                    let at = end.saturating_add(delta);
                    push_both(&mut wheel, &mut heap, &mut seq, at);
                }
                end = end.saturating_add(window);
                loop {
                    let want = match heap.peek() {
                        Some(&Reverse((at, q))) if at < end => Some((at, q)),
                        _ => None,
                    };
                    let got = wheel.pop_before(end);
                    assert_eq!(got, want, "seed {seed} round {round} end {end}");
                    if got.is_none() {
                        break;
                    }
                    heap.pop();
                    // An event in the window makes another, in the window
                    // or after it.
                    if xorshift(&mut s).is_multiple_of(2) {
                        let (now, _) = got.unwrap();
                        let at = now.saturating_add(xorshift(&mut s) % (2 * window));
                        push_both(&mut wheel, &mut heap, &mut seq, at);
                    }
                }
                let first = heap.peek().map(|Reverse((at, _))| *at);
                assert_eq!(wheel.next_at(), first, "seed {seed} round {round}");
                assert_eq!(wheel.len(), heap.len());
            }
            while let Some(Reverse((at, q))) = heap.pop() {
                assert_eq!(wheel.pop(), Some((at, q)));
            }
            assert_eq!((wheel.pop(), wheel.next_at()), (None, None));
        }
    }

    #[test]
    fn extreme_times() {
        let mut w = TimerWheel::default();
        w.push(u64::MAX, 'c');
        w.push(1, 'a');
        w.push(1 << 40, 'b');
        assert_eq!(w.pop(), Some((1, 'a')));
        assert_eq!(w.pop(), Some((1 << 40, 'b')));
        assert_eq!(w.pop(), Some((u64::MAX, 'c')));
        assert_eq!(w.pop(), None);
    }
}
