//! The memory store: real bytes keyed by (space, offset), in sparse 64 KiB
//! pages. Never-written bytes read as zero and cost nothing: a page exists
//! only once a non-zero write touches it, zeroing a range drops the pages it
//! covers, and a copy from unwritten memory zeroes rather than allocates.
//! Every page is charged to the run's [`MemoryBudget`].

use crate::address::Space;
use crate::budget::{BudgetExceeded, MemoryBudget, MemoryUse};
use rustc_hash::FxHashMap;
use std::sync::Arc;

const PAGE: u64 = 64 * 1024;

pub struct MemoryStore {
    pages: FxHashMap<(Space, u64), Box<[u8]>>,
    budget: Arc<MemoryBudget>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new(Arc::new(MemoryBudget::unlimited()))
    }
}

impl Drop for MemoryStore {
    fn drop(&mut self) {
        self.budget
            .release(MemoryUse::SimulatedMemory, self.pages.len() as u64 * PAGE);
    }
}

/// The page-sized pieces of `[offset, offset+len)`: (page, offset within
/// the page, position in the range, length).
fn chunks(offset: u64, len: u64) -> impl Iterator<Item = (u64, usize, usize, usize)> {
    let mut done = 0u64;
    std::iter::from_fn(move || {
        if done >= len {
            return None;
        }
        let pos = offset + done;
        let (page, within) = (pos / PAGE, pos % PAGE);
        let n = (PAGE - within).min(len - done);
        let item = (page, within as usize, done as usize, n as usize);
        done += n;
        Some(item)
    })
}

impl MemoryStore {
    pub fn new(budget: Arc<MemoryBudget>) -> Self {
        MemoryStore {
            pages: FxHashMap::default(),
            budget,
        }
    }

    /// Pages currently materialised.
    pub fn pages(&self) -> usize {
        self.pages.len()
    }

    /// Read into `out` (its length is the length read).
    pub fn read_into(&self, space: Space, offset: u64, out: &mut [u8]) {
        for (page, within, at, n) in chunks(offset, out.len() as u64) {
            match self.pages.get(&(space, page)) {
                Some(p) => out[at..at + n].copy_from_slice(&p[within..within + n]),
                None => out[at..at + n].fill(0),
            }
        }
    }

    pub fn read(&self, space: Space, offset: u64, len: u64) -> Vec<u8> {
        // Each byte is written once: copied from its page, or zero.
        let mut out = Vec::with_capacity(len as usize);
        for (page, within, _, n) in chunks(offset, len) {
            match self.pages.get(&(space, page)) {
                Some(p) => out.extend_from_slice(&p[within..within + n]),
                None => out.resize(out.len() + n, 0),
            }
        }
        out
    }

    /// The page for a write, created (and charged) if needed.
    fn page_mut(&mut self, space: Space, page: u64) -> Result<&mut [u8], BudgetExceeded> {
        use std::collections::hash_map::Entry;
        match self.pages.entry((space, page)) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(v) => {
                self.budget.charge(
                    MemoryUse::SimulatedMemory,
                    PAGE,
                    &format!("a write to {space}"),
                )?;
                Ok(v.insert(vec![0u8; PAGE as usize].into_boxed_slice()))
            }
        }
    }

    /// Write `data`; all-zero pieces of unwritten pages stay unwritten.
    pub fn write(&mut self, space: Space, offset: u64, data: &[u8]) -> Result<(), BudgetExceeded> {
        for (page, within, at, n) in chunks(offset, data.len() as u64) {
            let src = &data[at..at + n];
            if !self.pages.contains_key(&(space, page)) && src.iter().all(|&b| b == 0) {
                continue;
            }
            self.page_mut(space, page)?[within..within + n].copy_from_slice(src);
        }
        Ok(())
    }

    /// Make `[offset, offset+len)` read as zero; whole pages are dropped.
    pub fn zero(&mut self, space: Space, offset: u64, len: u64) {
        for (page, within, _, n) in chunks(offset, len) {
            if n as u64 == PAGE {
                if self.pages.remove(&(space, page)).is_some() {
                    self.budget.release(MemoryUse::SimulatedMemory, PAGE);
                }
            } else if let Some(p) = self.pages.get_mut(&(space, page)) {
                p[within..within + n].fill(0);
            }
        }
    }

    /// Copy `len` bytes from `src` to `dst` page by page, without
    /// materialising the whole range; overlapping ranges copy as `memmove`
    /// does (the result is the source as it was before the copy).
    pub fn copy(
        &mut self,
        src: (Space, u64),
        dst: (Space, u64),
        len: u64,
    ) -> Result<(), BudgetExceeded> {
        let mut pieces: Vec<(u64, u64)> = chunks(src.1, len)
            .map(|(_, _, at, n)| (at as u64, n as u64))
            .collect();
        // Copying forward onto a later part of the same range would read
        // bytes already overwritten: go backwards then.
        if src.0 == dst.0 && dst.1 > src.1 && dst.1 < src.1 + len {
            pieces.reverse();
        }
        let mut buf = vec![0u8; PAGE.min(len) as usize];
        for (at, n) in pieces {
            let from = src.1 + at;
            if self.pages.contains_key(&(src.0, from / PAGE)) {
                let piece = &mut buf[..n as usize];
                self.read_into(src.0, from, piece);
                // `write` keeps unwritten destination pages unwritten when
                // the piece is zero.
                self.write(dst.0, dst.1 + at, piece)?;
            } else {
                self.zero(dst.0, dst.1 + at, n);
            }
        }
        Ok(())
    }

    /// SHA-256 over every written page in (space, page) order: equal digests
    /// mean bit-identical memory.
    pub fn digest(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut keys: Vec<&(Space, u64)> = self.pages.keys().collect();
        keys.sort();
        let mut h = Sha256::new();
        for k in keys {
            let p = &self.pages[k];
            if p.iter().all(|&b| b == 0) {
                continue; // a zeroed page is the same memory as no page
            }
            h.update(format!("{}:{}", k.0, k.1).as_bytes());
            h.update(p);
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::PeCoord;

    fn tcm() -> Space {
        Space::Tcm(PeCoord {
            sip: 0,
            cube: 0,
            pe: 0,
        })
    }

    #[test]
    fn writes_across_pages_read_back() {
        let mut m = MemoryStore::default();
        let s = tcm();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        m.write(s, PAGE - 7, &data).unwrap();
        assert_eq!(m.read(s, PAGE - 7, data.len() as u64), data);
        assert_eq!(m.read(s, 0, 4), vec![0; 4]);
        assert_eq!(m.read(Space::Hbm { sip: 0, cube: 0 }, PAGE, 4), vec![0; 4]);
    }

    #[test]
    fn unwritten_and_zeroed_memory_costs_nothing() {
        let budget = Arc::new(MemoryBudget::new(8 * PAGE));
        let mut m = MemoryStore::new(budget.clone());
        let hbm = Space::Hbm { sip: 0, cube: 0 };
        // Zeros never materialise; a huge zero range is free.
        m.write(hbm, 0, &vec![0u8; 3 * PAGE as usize]).unwrap();
        m.zero(hbm, 0, 8 << 30);
        assert_eq!(m.pages(), 0);
        m.write(hbm, 10, &[1, 2, 3]).unwrap();
        m.write(hbm, 5 * PAGE, &[9]).unwrap();
        assert_eq!(budget.used_by(MemoryUse::SimulatedMemory), 2 * PAGE);
        // A copy from unwritten memory zeroes the destination.
        m.copy((hbm, 7 * PAGE), (hbm, 0), 2 * PAGE).unwrap();
        assert_eq!(m.read(hbm, 10, 3), vec![0, 0, 0]);
        assert_eq!(m.pages(), 1);
        // A copy of written memory lands.
        m.copy((hbm, 5 * PAGE), (tcm(), 100), 4).unwrap();
        assert_eq!(m.read(tcm(), 100, 4), vec![9, 0, 0, 0]);
        // Overlapping copies behave as memmove, both ways.
        let data: Vec<u8> = (0..3 * PAGE).map(|i| (i % 253) as u8 + 1).collect();
        m.write(tcm(), 0, &data).unwrap();
        m.copy((tcm(), 0), (tcm(), 1000), 2 * PAGE).unwrap();
        assert_eq!(m.read(tcm(), 1000, 2 * PAGE), data[..2 * PAGE as usize]);
        m.write(tcm(), 0, &data).unwrap();
        m.copy((tcm(), 1000), (tcm(), 0), 2 * PAGE).unwrap();
        assert_eq!(
            m.read(tcm(), 0, 2 * PAGE),
            data[1000..1000 + 2 * PAGE as usize]
        );
        // Over the budget: a clean refusal.
        let mut page = 20;
        let e = loop {
            match m.write(hbm, page * PAGE, &[1]) {
                Ok(()) => page += 1,
                Err(e) => break e,
            }
        };
        assert_eq!(budget.in_use(), 8 * PAGE);
        assert!(e.to_string().contains("simulated memory pages"), "{e}");
        drop(m);
        assert_eq!(budget.in_use(), 0);
    }
}
