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
//!
//! A table made for a machine ([`PageTable::for_machine`]) finds the
//! segments of the PEs' TCMs without hashing: a ring step's pages are all
//! in TCM (its IPCQ slots and scratch), on a thousand PEs taken in turn,
//! so its lookups miss the cache; an index by PE and segment costs one
//! read where the hash map's probe cost a hash and two.

use crate::address::Space;
use rustc_hash::FxHashMap;
use slab::Slab;

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
    /// Every segment not in `tcm`.
    segments: FxHashMap<(Space, u64), Box<Segment<P>>>,
    tcm: TcmIndex<P>,
    len: usize,
}

impl<P> Default for PageTable<P> {
    fn default() -> Self {
        PageTable {
            segments: FxHashMap::default(),
            tcm: TcmIndex::none(),
            len: 0,
        }
    }
}

/// Entries of a [`TcmIndex`] at most (16 MiB of `u32`s, mostly never
/// touched: a PE's entries are written when its TCM is).
const TCM_INDEX_MAX: u64 = 1 << 22;

/// The segments of every PE's TCM, found by index: entry
/// `pe.flat_index(dims) * segs + segment` is 0, or 1 + the segment's key
/// in `held`.
struct TcmIndex<P> {
    /// (cubes per SIP, PEs per cube) of the machine.
    dims: (u32, u32),
    /// PEs of the machine.
    pes: u64,
    /// Segments of a TCM the index covers (0: none; later ones are hashed).
    segs: u64,
    /// Made at the first TCM write (zeroed: untouched pages cost nothing).
    entries: Vec<u32>,
    /// The segments (a freed key is used again first).
    held: Slab<Box<Segment<P>>>,
}

impl<P> TcmIndex<P> {
    fn none() -> Self {
        TcmIndex {
            dims: (0, 0),
            pes: 0,
            segs: 0,
            entries: Vec::new(),
            held: Slab::new(),
        }
    }

    /// The entry of `space`'s segment `seg`, when the index covers it.
    #[inline]
    fn entry(&self, space: Space, seg: u64) -> Option<usize> {
        match space {
            Space::Tcm(pe) if seg < self.segs && pe.cube < self.dims.0 && pe.pe < self.dims.1 => {
                let i = pe.flat_index(self.dims);
                (i < self.pes).then_some((i * self.segs + seg) as usize)
            }
            _ => None,
        }
    }

    #[inline]
    fn get(&self, entry: usize) -> Option<&Segment<P>> {
        let k = *self.entries.get(entry)?;
        self.held.get(k.checked_sub(1)? as usize).map(|s| &**s)
    }

    #[inline]
    fn get_mut(&mut self, entry: usize) -> Option<&mut Segment<P>> {
        let k = *self.entries.get(entry)?;
        self.held
            .get_mut(k.checked_sub(1)? as usize)
            .map(|s| &mut **s)
    }

    /// The segment at `entry`, made empty when absent.
    fn get_or_make(&mut self, entry: usize) -> &mut Segment<P> {
        if self.entries.is_empty() {
            self.entries = vec![0; (self.pes * self.segs) as usize];
        }
        if self.entries[entry] == 0 {
            let key = self.held.insert(Segment::empty());
            // At most one segment per entry: fewer than TCM_INDEX_MAX.
            self.entries[entry] = key as u32 + 1;
        }
        let k = self.entries[entry] as usize - 1;
        &mut self.held[k]
    }

    /// Drop the (empty) segment at `entry`.
    fn remove(&mut self, entry: usize) {
        let k = std::mem::take(&mut self.entries[entry]) - 1;
        self.held.remove(k as usize);
    }

    /// Every segment held, with its space and number.
    fn segments(&self) -> impl Iterator<Item = ((Space, u64), &Segment<P>)> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, &k)| k != 0)
            .map(move |(i, &k)| {
                let (pe, seg) = (i as u64 / self.segs, i as u64 % self.segs);
                let space = Space::Tcm(crate::topology::PeCoord::from_flat_index(pe, self.dims));
                ((space, seg), &*self.held[k as usize - 1])
            })
    }
}

fn split(page: u64) -> (u64, usize) {
    (page / SEGMENT_PAGES, (page % SEGMENT_PAGES) as usize)
}

impl<P> PageTable<P> {
    /// A table for a machine of `pes` PEs in `dims` (cubes per SIP, PEs
    /// per cube) whose TCMs are `tcm_pages` pages each: their segments are
    /// indexed (as many of each TCM's first segments as
    /// [`TCM_INDEX_MAX`] entries allow), the rest hashed.
    pub fn for_machine(dims: (u32, u32), pes: u64, tcm_pages: u64) -> Self {
        let segs = tcm_pages
            .div_ceil(SEGMENT_PAGES)
            .min(TCM_INDEX_MAX / pes.max(1));
        PageTable {
            tcm: TcmIndex {
                dims,
                pes,
                segs,
                ..TcmIndex::none()
            },
            ..Self::default()
        }
    }

    /// An empty table of this one's layout (the same TCM index).
    pub fn empty_like(&self) -> Self {
        PageTable {
            tcm: TcmIndex {
                dims: self.tcm.dims,
                pes: self.tcm.pes,
                segs: self.tcm.segs,
                ..TcmIndex::none()
            },
            ..Self::default()
        }
    }

    fn segment(&self, space: Space, seg: u64) -> Option<&Segment<P>> {
        match self.tcm.entry(space, seg) {
            Some(e) => self.tcm.get(e),
            None => self.segments.get(&(space, seg)).map(|b| &**b),
        }
    }

    fn segment_mut(&mut self, space: Space, seg: u64) -> Option<&mut Segment<P>> {
        match self.tcm.entry(space, seg) {
            Some(e) => self.tcm.get_mut(e),
            None => self.segments.get_mut(&(space, seg)).map(|b| &mut **b),
        }
    }

    /// Pages held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, space: Space, page: u64) -> Option<&P> {
        let (seg, slot) = split(page);
        self.segment(space, seg)?.slots[slot].as_ref()
    }

    pub fn get_mut(&mut self, space: Space, page: u64) -> Option<&mut P> {
        let (seg, slot) = split(page);
        self.segment_mut(space, seg)?.slots[slot].as_mut()
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
        if let Some(e) = self.tcm.entry(space, seg) {
            if self.tcm.get(e).is_none_or(|s| s.slots[slot].is_none()) {
                // Made before its segment, so that a refusal leaves none.
                let p = make()?;
                self.len += 1;
                return Ok(self.tcm.get_or_make(e).fill(slot, p));
            }
            let segment = self.tcm.get_mut(e).expect("present");
            return Ok(segment.slots[slot].as_mut().expect("present"));
        }
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
        let segment = match self.tcm.entry(space, seg) {
            Some(e) => self.tcm.get_or_make(e),
            None => self
                .segments
                .entry((space, seg))
                .or_insert_with(Segment::empty),
        };
        let old = segment.slots[slot].replace(p);
        if old.is_none() {
            segment.used += 1;
            self.len += 1;
        }
        old
    }

    pub fn remove(&mut self, space: Space, page: u64) -> Option<P> {
        let (seg, slot) = split(page);
        let segment = self.segment_mut(space, seg)?;
        let old = segment.slots[slot].take()?;
        segment.used -= 1;
        let emptied = segment.used == 0;
        self.len -= 1;
        if emptied {
            match self.tcm.entry(space, seg) {
                Some(e) => self.tcm.remove(e),
                None => drop(self.segments.remove(&(space, seg))),
            }
        }
        Some(old)
    }

    /// Segments held (indexed or hashed).
    #[cfg(test)]
    fn segment_count(&self) -> usize {
        self.segments.len() + self.tcm.segments().count()
    }

    /// Every page in (space, page number) order.
    pub fn sorted(&self) -> Vec<((Space, u64), &P)> {
        let mut segments: Vec<((Space, u64), &Segment<P>)> = self
            .segments
            .iter()
            .map(|(&key, s)| (key, &**s))
            .chain(self.tcm.segments())
            .collect();
        segments.sort_by_key(|&(key, _)| key);
        segments
            .into_iter()
            .flat_map(|((space, seg), segment)| {
                segment.slots.iter().enumerate().filter_map(move |(i, p)| {
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
        pages_come_and_go(PageTable::default());
        // The same with the TCM segments of 16 PEs indexed (two of each).
        pages_come_and_go(PageTable::for_machine((2, 4), 16, 2 * SEGMENT_PAGES - 7));
    }

    /// Indexed TCM segments and hashed ones (HBM, SRAM, a TCM segment
    /// past the indexed ones, a PE outside the machine) side by side.
    #[test]
    fn indexed_and_hashed_segments_sort_together() {
        let mut t = PageTable::for_machine((2, 4), 16, SEGMENT_PAGES);
        let tcm = |sip, cube, pe| Space::Tcm(crate::topology::PeCoord { sip, cube, pe });
        let (a, b, far) = (tcm(1, 1, 3), tcm(0, 0, 0), tcm(9, 0, 0));
        let hbm = Space::Hbm { sip: 0, cube: 0 };
        for (space, page, v) in [
            (a, 5, 'a'),
            (a, SEGMENT_PAGES + 2, 'b'),
            (b, 7, 'c'),
            (far, 1, 'd'),
            (hbm, 3, 'e'),
        ] {
            assert_eq!(t.insert(space, page, v), None);
        }
        assert_eq!(t.tcm.segments().count(), 2, "a and b's first segments");
        assert_eq!(t.segment_count(), 5);
        let mut want = vec![
            ((a, 5), &'a'),
            ((a, SEGMENT_PAGES + 2), &'b'),
            ((b, 7), &'c'),
            ((far, 1), &'d'),
            ((hbm, 3), &'e'),
        ];
        want.sort_by_key(|&(k, _)| k);
        assert_eq!(t.sorted(), want);
        assert_eq!(t.remove(a, 5), Some('a'));
        assert_eq!(
            t.tcm.segments().count(),
            1,
            "an emptied indexed segment goes"
        );
        assert_eq!(t.insert(tcm(0, 1, 2), 0, 'f'), None);
        // An entry is 1 + its segment's key: a's (key 0, freed) is used again.
        let entry = |t: &PageTable<char>, space| t.tcm.entries[t.tcm.entry(space, 0).unwrap()];
        assert_eq!((entry(&t, a), entry(&t, b)), (0, 2));
        assert_eq!(entry(&t, tcm(0, 1, 2)), 1, "its key is used again");
        assert_eq!(t.tcm.held.len(), 2);
        assert_eq!(t.get(tcm(0, 1, 2), 0), Some(&'f'));
        assert_eq!(t.get(a, 5), None);
    }

    fn pages_come_and_go(mut t: PageTable<char>) {
        let s = Space::Hbm { sip: 1, cube: 2 };
        let o = Space::Sram { sip: 0, cube: 0 };
        assert_eq!(t.insert(s, 3, 'a'), None);
        assert_eq!(t.insert(s, SEGMENT_PAGES + 1, 'b'), None);
        assert_eq!(t.insert(o, 3, 'c'), None);
        assert_eq!(t.insert(s, 3, 'd'), Some('a'));
        assert_eq!((t.len(), t.segment_count()), (3, 3));
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
            (t.len(), t.segment_count()),
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
        assert_eq!((t.len(), t.segment_count()), (5, 4));
        assert_eq!(t.remove(s, 4), Some('x'));
        assert_eq!(t.remove(fresh, 9), Some('y'));
        assert_eq!(t.remove(s, 3), Some('d'));
        assert_eq!(t.remove(s, 3), None);
        assert_eq!(
            (t.len(), t.segment_count()),
            (2, 2),
            "an empty segment goes"
        );
    }
}
