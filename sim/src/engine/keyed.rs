//! Keyed timers: timers whose order among those of the same picosecond is
//! given by a key, not by when they were set, and which fire before every
//! plain timer ([`super::wheel`]) of their picosecond.
//!
//! What they are for: a model split into partitions ([`super::windows`])
//! runs the same events as on one executor only if each partition sees
//! its events of one picosecond in the same order. A plain timer's place
//! among those of its picosecond is the order the timers were set in, and
//! an event that one partition sets for another (a transfer's landing)
//! is set there later than on one executor: when the message carrying it
//! is delivered, between two windows. A keyed timer's place is its key,
//! which the setter gives (e.g. the PE that issued a transfer), and which
//! is the same however the model is split (equal keys keep the order they
//! were set in, which the setter must make the same on both): where
//! every event that crosses partitions is a keyed one, a partition's
//! events of a picosecond run in the same order on one executor and on
//! several.
//!
//! Keys are few per picosecond and mostly set in key order already, so a
//! picosecond's timers are kept unsorted and sorted once, when their time
//! comes (a sorted run costs one pass).

use crate::units::Ps;
use std::collections::BTreeMap;

/// What orders keyed timers of one picosecond: less first.
pub type OrderKey = u64;

pub(super) struct KeyedTimers<T> {
    /// Timers of later picoseconds, as set.
    later: BTreeMap<Ps, Vec<(OrderKey, T)>>,
    /// The picosecond being fired: its timers sorted by key (equal keys
    /// in the order they were set), those before `next` fired.
    firing: Vec<(OrderKey, T)>,
    next: usize,
    firing_at: Ps,
    /// Emptied vectors, reused for later picoseconds.
    spare: Vec<Vec<(OrderKey, T)>>,
    len: usize,
}

impl<T> Default for KeyedTimers<T> {
    fn default() -> Self {
        KeyedTimers {
            later: BTreeMap::new(),
            firing: Vec::new(),
            next: 0,
            firing_at: 0,
            spare: Vec::new(),
            len: 0,
        }
    }
}

impl<T: Copy> KeyedTimers<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    /// Add a timer at `at` (not before the picosecond being fired).
    pub fn push(&mut self, at: Ps, key: OrderKey, item: T) {
        self.len += 1;
        if self.firing_some() && at == self.firing_at {
            // Set for the picosecond being fired: its place among those
            // left by its key, after those of an equal key.
            let left = &self.firing[self.next..];
            let i = self.next + left.partition_point(|&(k, _)| k <= key);
            self.firing.insert(i, (key, item));
            return;
        }
        debug_assert!(
            !self.firing_some() || at > self.firing_at,
            "a keyed timer in the past"
        );
        let spare = &mut self.spare;
        self.later
            .entry(at)
            .or_insert_with(|| spare.pop().unwrap_or_default())
            .push((key, item));
    }

    /// Whether timers of the picosecond being fired are left.
    fn firing_some(&self) -> bool {
        self.next < self.firing.len()
    }

    /// The earliest timer's time (`None`: none).
    #[inline]
    pub fn next_at(&self) -> Option<Ps> {
        if self.firing_some() {
            return Some(self.firing_at);
        }
        self.later.first_key_value().map(|(&at, _)| at)
    }

    /// The earliest timer, the least key first among equal times.
    pub fn pop(&mut self) -> Option<(Ps, T)> {
        if !self.firing_some() {
            let (at, mut timers) = self.later.pop_first()?;
            // Stable: equal keys keep the order they were set in.
            timers.sort_by_key(|&(k, _)| k);
            let mut done = std::mem::replace(&mut self.firing, timers);
            done.clear();
            self.spare.push(done);
            self.next = 0;
            self.firing_at = at;
        }
        let (_, item) = self.firing[self.next];
        self.next += 1;
        self.len -= 1;
        Some((self.firing_at, item))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_fire_by_time_then_by_key_whatever_order_they_were_set_in() {
        let mut t = KeyedTimers::default();
        for (at, key, name) in [
            (20, 30, "c"),
            (10, 99, "b"),
            (20, 15, "a2"),
            (20, 14, "a1"),
            (10, 20, "a"),
        ] {
            t.push(at, key, name);
        }
        assert_eq!((t.len(), t.next_at()), (5, Some(10)));
        let order: Vec<_> = std::iter::from_fn(|| t.pop()).collect();
        assert_eq!(
            order,
            [(10, "a"), (10, "b"), (20, "a1"), (20, "a2"), (20, "c")]
        );
        assert_eq!((t.len(), t.next_at()), (0, None));
    }

    #[test]
    fn a_timer_set_for_the_picosecond_being_fired_takes_its_keys_place() {
        let mut t = KeyedTimers::default();
        t.push(5, 10, "first");
        t.push(5, 40, "last");
        t.push(7, 00, "later");
        assert_eq!(t.pop(), Some((5, "first")));
        // Set while 5 is fired: before (4, 0), after what already fired.
        t.push(5, 20, "then");
        assert_eq!(t.next_at(), Some(5));
        let order: Vec<_> = std::iter::from_fn(|| t.pop()).collect();
        assert_eq!(order, [(5, "then"), (5, "last"), (7, "later")]);
    }

    #[test]
    fn equal_keys_keep_the_order_they_were_set_in() {
        let mut t = KeyedTimers::default();
        for name in ["x", "y", "z"] {
            t.push(1, 0, name);
        }
        let order: Vec<_> = std::iter::from_fn(|| t.pop()).map(|(_, n)| n).collect();
        assert_eq!(order, ["x", "y", "z"]);
    }
}
