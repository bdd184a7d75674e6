//! The page table of the memory store: which (space, page number) holds
//! which page buffer.
//!
//! Two levels: a hash map from (space, segment) to a segment of
//! [`SEGMENT_PAGES`] consecutive page slots. A tensor's pages sit in one or
//! a few segments, so the map has one entry per MiB of written memory
//! instead of one per page: at 64 ranks × 1 MiB it is small enough to stay
//! in cache, where a map of every page was not (and every page lookup of a
//! DMA or a MATH command missed). A segment goes when its last page does,
//! so zeroing memory gives the table's memory back too.

use crate::address::Space;
use rustc_hash::FxHashMap;

/// Pages per segment (1 MiB of 4 KiB pages).
pub const SEGMENT_PAGES: u64 = 256;

struct Segment<P> {
    slots: [Option<P>; SEGMENT_PAGES as usize],
    /// Slots holding a page.
    used: u32,
}

impl<P> Segment<P> {
    /// A segment holding no page yet.
    fn empty() -> Box<Self> {
        Box::new(Segment {
            slots: std::array::from_fn(|_| None),
            used: 0,
        })
    }

    /// Put `p` in empty slot `slot`.
    fn fill(&mut self, slot: usize, p: P) -> &mut P {
        self.used += 1;
        self.slots[slot].insert(p)
    }
}

/// A sparse map (space, page number) → `P`.
pub struct PageTable<P> {
    segments: FxHashMap<(Space, u64), Box<Segment<P>>>,
    len: usize,
}

impl<P> Default for PageTable<P> {
    fn default() -> Self {
        PageTable {
            segments: FxHashMap::default(),
            len: 0,
        }
    }
}

fn split(page: u64) -> (u64, usize) {
    (page / SEGMENT_PAGES, (page % SEGMENT_PAGES) as usize)
}

impl<P> PageTable<P> {
    /// Pages held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, space: Space, page: u64) -> Option<&P> {
        let (seg, slot) = split(page);
        self.segments.get(&(space, seg))?.slots[slot].as_ref()
    }

    pub fn get_mut(&mut self, space: Space, page: u64) -> Option<&mut P> {
        let (seg, slot) = split(page);
        self.segments.get_mut(&(space, seg))?.slots[slot].as_mut()
    }

    /// The page, made by `make` when absent: one hash lookup either way.
    /// When `make` fails nothing is added.
    pub fn get_or_try_insert_with<E>(
        &mut self,
        space: Space,
        page: u64,
        make: impl FnOnce() -> Result<P, E>,
    ) -> Result<&mut P, E> {
        use std::collections::hash_map::Entry;
        let (seg, slot) = split(page);
        let segment = match self.segments.entry((space, seg)) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => {
                // Made before its segment, so that a refusal leaves none.
                let p = make()?;
                self.len += 1;
                return Ok(v.insert(Segment::empty()).fill(slot, p));
            }
        };
        if segment.slots[slot].is_none() {
            let p = make()?;
            self.len += 1;
            return Ok(segment.fill(slot, p));
        }
        Ok(segment.slots[slot].as_mut().expect("present"))
    }

    pub fn contains(&self, space: Space, page: u64) -> bool {
        self.get(space, page).is_some()
    }

    /// Put `p` at the page; returns what it replaces.
    pub fn insert(&mut self, space: Space, page: u64, p: P) -> Option<P> {
        let (seg, slot) = split(page);
        let segment = self
            .segments
            .entry((space, seg))
            .or_insert_with(Segment::empty);
        let old = segment.slots[slot].replace(p);
        if old.is_none() {
            segment.used += 1;
            self.len += 1;
        }
        old
    }

    pub fn remove(&mut self, space: Space, page: u64) -> Option<P> {
        let (seg, slot) = split(page);
        let segment = self.segments.get_mut(&(space, seg))?;
        let old = segment.slots[slot].take()?;
        segment.used -= 1;
        self.len -= 1;
        if segment.used == 0 {
            self.segments.remove(&(space, seg));
        }
        Some(old)
    }

    /// Every page in (space, page number) order.
    pub fn sorted(&self) -> Vec<((Space, u64), &P)> {
        let mut keys: Vec<&(Space, u64)> = self.segments.keys().collect();
        keys.sort();
        keys.into_iter()
            .flat_map(|&(space, seg)| {
                self.segments[&(space, seg)]
                    .slots
                    .iter()
                    .enumerate()
                    .filter_map(move |(i, p)| {
                        p.as_ref()
                            .map(|p| ((space, seg * SEGMENT_PAGES + i as u64), p))
                    })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_come_and_go_with_their_segments() {
        let mut t = PageTable::default();
        let s = Space::Hbm { sip: 1, cube: 2 };
        let o = Space::Sram { sip: 0, cube: 0 };
        assert_eq!(t.insert(s, 3, 'a'), None);
        assert_eq!(t.insert(s, SEGMENT_PAGES + 1, 'b'), None);
        assert_eq!(t.insert(o, 3, 'c'), None);
        assert_eq!(t.insert(s, 3, 'd'), Some('a'));
        assert_eq!((t.len(), t.segments.len()), (3, 3));
        assert_eq!(t.get(s, 3), Some(&'d'));
        assert!(!t.contains(s, 4) && !t.contains(Space::Hbm { sip: 1, cube: 3 }, 3));
        *t.get_mut(o, 3).unwrap() = 'e';
        assert_eq!(
            t.sorted(),
            vec![
                ((s, 3), &'d'),
                ((s, SEGMENT_PAGES + 1), &'b'),
                ((o, 3), &'e')
            ]
        );
        // Made when absent, kept when present, nothing added on a refusal.
        let fresh = Space::Tcm(crate::topology::PeCoord {
            sip: 0,
            cube: 0,
            pe: 1,
        });
        assert_eq!(
            t.get_or_try_insert_with(s, 3, || Err::<char, ()>(())),
            Ok(&mut 'd')
        );
        assert_eq!(
            t.get_or_try_insert_with(fresh, 9, || Err::<char, ()>(())),
            Err(())
        );
        assert_eq!(
            (t.len(), t.segments.len()),
            (3, 3),
            "a refusal adds nothing"
        );
        assert_eq!(
            t.get_or_try_insert_with(s, 4, || Ok::<_, ()>('x')),
            Ok(&mut 'x')
        );
        assert_eq!(
            t.get_or_try_insert_with(fresh, 9, || Ok::<_, ()>('y')),
            Ok(&mut 'y')
        );
        assert_eq!((t.len(), t.segments.len()), (5, 4));
        assert_eq!(t.remove(s, 4), Some('x'));
        assert_eq!(t.remove(fresh, 9), Some('y'));
        assert_eq!(t.remove(s, 3), Some('d'));
        assert_eq!(t.remove(s, 3), None);
        assert_eq!((t.len(), t.segments.len()), (2, 2), "an empty segment goes");
    }
}
