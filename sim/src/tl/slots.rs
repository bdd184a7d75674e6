//! Values kept by a small integer id: the tables behind a kernel's
//! tensor and future ids. The [`super::recorder::Recorder`] hands the ids
//! out ([`Slots`]); a [`super::commands::Frame`] keeps what they name at
//! run time and a batch's kernbench-host's `runtime::batch::IdTable` the guest's own ids
//! ([`Table`]).
//!
//! An id is an index: a table is a `Vec<Option<T>>` with the ids freed
//! for reuse. The ids in use never exceed the table's length, its
//! high-water mark, which a recorded list keeps so that its replay can
//! make room for every id at once.

/// Values by an id someone else chose (a [`Slots`] handed it out).
#[derive(Debug, Clone)]
pub struct Table<T>(Vec<Option<T>>);

impl<T> Default for Table<T> {
    fn default() -> Self {
        Table(Vec::new())
    }
}

impl<T> Table<T> {
    /// A table with room for ids `0..len`, all empty.
    pub fn with_len(len: u32) -> Self {
        Table((0..len).map(|_| None).collect())
    }

    /// One more than the highest id ever kept (or made room for).
    pub fn high_water(&self) -> u32 {
        self.0.len() as u32
    }

    /// Keeps `v` under `id` (replacing what was there).
    #[inline]
    pub fn put(&mut self, id: u32, v: T) {
        let i = id as usize;
        if self.0.len() <= i {
            self.0.resize_with(i + 1, || None);
        }
        self.0[i] = Some(v);
    }

    #[inline]
    pub fn get(&self, id: u32) -> Option<&T> {
        self.0.get(id as usize).and_then(Option::as_ref)
    }

    pub fn contains(&self, id: u32) -> bool {
        self.get(id).is_some()
    }

    /// What `id` kept; `id` is empty now.
    pub fn retire(&mut self, id: u32) -> Option<T> {
        self.0.get_mut(id as usize).and_then(Option::take)
    }
}

/// Values by an id it hands out; see the module's doc.
#[derive(Debug, Clone)]
pub struct Slots<T> {
    table: Table<T>,
    /// Ids freed by [`Slots::take`], reused last-freed first.
    free: Vec<u32>,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots {
            table: Table::default(),
            free: Vec::new(),
        }
    }
}

impl<T> Slots<T> {
    /// One more than the highest id handed out.
    pub fn high_water(&self) -> u32 {
        self.table.high_water()
    }

    /// Keeps `v` under a new id: the last one freed, else the next
    /// unused one.
    pub fn insert(&mut self, v: T) -> u32 {
        let id = self.free.pop().unwrap_or(self.table.high_water());
        self.table.put(id, v);
        id
    }

    #[inline]
    pub fn get(&self, id: u32) -> Option<&T> {
        self.table.get(id)
    }

    /// What `id` kept; the id is free for [`Slots::insert`] to reuse.
    pub fn take(&mut self, id: u32) -> Option<T> {
        let v = self.table.retire(id)?;
        self.free.push(id);
        Some(v)
    }

    /// What `id` kept; the id is not reused (something may still refer
    /// to it).
    pub fn retire(&mut self, id: u32) -> Option<T> {
        self.table.retire(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_handed_out_in_order_and_the_last_freed_reused() {
        let mut s = Slots::default();
        assert_eq!((s.insert('a'), s.insert('b'), s.insert('c')), (0, 1, 2));
        assert_eq!(s.take(0), Some('a'));
        assert_eq!(s.take(2), Some('c'));
        assert_eq!(s.take(2), None, "taken once");
        assert_eq!(s.insert('d'), 2, "the last freed first");
        assert_eq!(s.insert('e'), 0);
        assert_eq!(s.insert('f'), 3);
        assert_eq!(s.high_water(), 4);
        assert_eq!(s.retire(1), Some('b'));
        assert_eq!(s.insert('g'), 4, "a retired id is not reused");
        assert_eq!((s.get(1), s.get(4)), (None, Some(&'g')));
    }

    #[test]
    fn put_grows_the_table_to_the_id_chosen() {
        let mut s = Table::with_len(2);
        assert_eq!((s.high_water(), s.get(1)), (2, None));
        s.put(5, 7u8);
        assert_eq!((s.high_water(), s.get(5), s.get(9)), (6, Some(&7), None));
        assert!(s.contains(5));
        assert_eq!((s.retire(5), s.contains(5)), (Some(7), false));
    }
}
