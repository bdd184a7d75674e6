//! A table of command records by slot: an engine's queue and its calls
//! name a command by its slot, and the record is written once at issue
//! and read in place at each step (records moved from queue to queue were
//! copied each time). Freed slots are used again first.

/// Records of type `T` by slot.
pub(super) struct CommandTable<T> {
    slots: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for CommandTable<T> {
    fn default() -> Self {
        CommandTable {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> CommandTable<T> {
    /// Keep `record`; its slot.
    pub fn put(&mut self, record: T) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(record);
                i
            }
            None => {
                self.slots.push(Some(record));
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 commands in flight")
            }
        }
    }

    /// The record in `slot` (one [`Self::put`] gave and not removed).
    pub fn get(&mut self, slot: u32) -> &mut T {
        self.slots[slot as usize]
            .as_mut()
            .expect("a queued or landing command is in the table")
    }

    /// Drop the record in `slot` (in place) and free the slot.
    pub fn remove(&mut self, slot: u32) {
        self.slots[slot as usize] = None;
        self.free.push(slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_used_again_and_records_stay_in_place() {
        let mut t = CommandTable::default();
        let (a, b) = (t.put("a"), t.put("b"));
        assert_eq!((a, b), (0, 1));
        *t.get(b) = "B";
        t.remove(a);
        assert_eq!(t.put("c"), a);
        assert_eq!((*t.get(a), *t.get(b)), ("c", "B"));
    }
}
