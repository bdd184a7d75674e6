//! The memory store: real bytes keyed by (space, offset), in sparse 4 KiB
//! pages. Never-written bytes read as zero and cost nothing: a page exists
//! only once a non-zero write touches it, zeroing a range drops the pages it
//! covers, and a copy from unwritten memory zeroes rather than allocates.
//! Every page buffer is charged to the run's [`MemoryBudget`] once, however
//! many places share it.
//!
//! Pages are copy-on-write: a copy of a whole page (a DMA whose source and
//! destination are at the same offset within their pages, as tensors and
//! IPCQ slots of a page or more are) shares the source's buffer instead of
//! copying its bytes, and the first write to a shared page gives the writer
//! its own buffer. So a message forwarded around a ring moves no bytes on
//! the host until someone writes to it. Other data moves page to page: a
//! DMA copies each piece straight from its source page into its
//! destination page, and element-wise math reads its inputs in place and
//! computes one page-sized piece at a time, so no command materialises a
//! tensor-sized buffer. Dropped buffers are kept in a bounded pool and
//! reused, so scratch memory freed and allocated again on every ring step
//! does not go back to the allocator (and the kernel) each time.
//!
//! A store made by [`MemoryStore::timing_only`] keeps no bytes at all:
//! every write, copy and computed result is dropped and every read gives
//! zeros, so a run's host memory does not grow with the sizes it moves
//! (`--timing-only`). Timing never depends on the bytes, so the simulated
//! times are those of the same run with data.

use super::page_table::PageTable;
use crate::address::Space;
use crate::budget::{BudgetExceeded, MemoryBudget, MemoryUse};
use std::sync::Arc;

const PAGE: u64 = 4 * 1024;

/// Dropped page buffers kept for reuse (not charged to the budget: at most
/// 16 MiB of host memory). Enough for the scratch of a few MiB-sized
/// tensors freed and taken again on every ring step, which otherwise go
/// back to the allocator and come back as fresh (page-faulting) memory.
const SPARE_PAGES: usize = 4096;

/// What unwritten memory reads as: aligned as a page buffer is (the
/// compute kernels take their vectorised path only on aligned elements,
/// and a byte array may land at any address).
static ZERO_PAGE: &[u8; PAGE as usize] = &ZEROS.0;

#[repr(align(64))]
struct AlignedPage([u8; PAGE as usize]);

static ZEROS: AlignedPage = AlignedPage([0; PAGE as usize]);

type PageKey = (Space, u64);

/// One page buffer, shared by every page that holds the same bytes.
/// `triomphe`'s `Arc`, which has no weak count: the standard one's
/// `get_mut` (every write, to see that the buffer is unshared) is a
/// compare-exchange on the buffer's count, a locked instruction on a line
/// that is cold at hundreds of ranks; this one's is a load.
type Page = triomphe::Arc<[u8; PAGE as usize]>;

/// Bytes a DMA read and has not yet written: the source pages as they
/// were (`None`: unwritten), from `first` bytes into the first one.
pub struct Staged {
    first: u64,
    len: u64,
    /// Inline for the transfers of one or two pages (most messages).
    pages: smallvec::SmallVec<[Option<Page>; 2]>,
}

impl std::fmt::Debug for Staged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Staged {{ {} bytes from {} into a page }}",
            self.len, self.first
        )
    }
}

pub struct MemoryStore {
    pages: PageTable<Page>,
    spare: Vec<Page>,
    /// Distinct page buffers held (what the budget is charged for).
    buffers: u64,
    budget: Arc<MemoryBudget>,
    /// False for a timing-only store: nothing is ever written.
    keeps_bytes: bool,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new(Arc::new(MemoryBudget::unlimited()))
    }
}

impl Drop for MemoryStore {
    fn drop(&mut self) {
        self.budget
            .release(MemoryUse::SimulatedMemory, self.buffers * PAGE);
    }
}

/// Pieces of `len` bytes read or written at each of `offsets` at once,
/// none crossing a page boundary at any of them: (position in the range,
/// length).
fn pieces<const N: usize>(offsets: [u64; N], len: u64) -> impl Iterator<Item = (u64, u64)> {
    let mut done = 0u64;
    std::iter::from_fn(move || {
        if done >= len {
            return None;
        }
        let n = offsets
            .iter()
            .map(|o| PAGE - (o + done) % PAGE)
            .fold(len - done, u64::min);
        let item = (done, n);
        done += n;
        Some(item)
    })
}

/// Page and offset within it of byte `pos`.
fn page_of(pos: u64) -> (u64, usize) {
    (pos / PAGE, (pos % PAGE) as usize)
}

/// The page-sized pieces of `[offset, offset+len)`: (page, offset within
/// the page, position in the range, length).
fn chunks(offset: u64, len: u64) -> impl Iterator<Item = (u64, usize, usize, usize)> {
    pieces([offset], len).map(move |(at, n)| {
        let (page, within) = page_of(offset + at);
        (page, within, at as usize, n as usize)
    })
}

impl MemoryStore {
    pub fn new(budget: Arc<MemoryBudget>) -> Self {
        Self::with_pages(budget, PageTable::default())
    }

    /// A store for a machine of `pes` PEs in `dims` (cubes per SIP, PEs
    /// per cube) with TCMs of `tcm_bytes`: their pages are found by index
    /// (see [`PageTable::for_machine`]).
    pub fn for_machine(
        budget: Arc<MemoryBudget>,
        dims: (u32, u32),
        pes: u64,
        tcm_bytes: u64,
    ) -> Self {
        let table = PageTable::for_machine(dims, pes, tcm_bytes.div_ceil(PAGE));
        Self::with_pages(budget, table)
    }

    fn with_pages(budget: Arc<MemoryBudget>, pages: PageTable<Page>) -> Self {
        MemoryStore {
            pages,
            spare: Vec::new(),
            buffers: 0,
            budget,
            keeps_bytes: true,
        }
    }

    /// A store that keeps no bytes: writes are dropped, reads give zeros.
    pub fn timing_only(budget: Arc<MemoryBudget>) -> Self {
        let mut m = Self::new(budget);
        m.keeps_bytes = false;
        m
    }

    /// An empty store like this one: the same budget, page-table layout
    /// and keeping of bytes (another partition's shard of the machine's
    /// memory, see [`crate::hw::data_plane`]).
    pub fn sibling(&self) -> Self {
        let mut m = Self::with_pages(self.budget.clone(), self.pages.empty_like());
        m.keeps_bytes = self.keeps_bytes;
        m
    }

    /// Keep no bytes from now on, as [`MemoryStore::timing_only`]; what
    /// it held is dropped.
    pub fn keep_no_bytes(&mut self) {
        *self = Self::timing_only(self.budget.clone());
    }

    /// False for a [`MemoryStore::timing_only`] store.
    pub fn keeps_bytes(&self) -> bool {
        self.keeps_bytes
    }

    /// Pages currently materialised (a shared buffer counts once per page
    /// that holds it).
    pub fn pages(&self) -> usize {
        self.pages.len()
    }

    /// Distinct page buffers held (what the budget is charged for).
    pub fn buffers(&self) -> u64 {
        self.buffers
    }

    /// Read into `out` (its length is the length read).
    pub fn read_into(&self, space: Space, offset: u64, out: &mut [u8]) {
        for (page, within, at, n) in chunks(offset, out.len() as u64) {
            match self.pages.get(space, page) {
                Some(p) => out[at..at + n].copy_from_slice(&p[within..within + n]),
                None => out[at..at + n].fill(0),
            }
        }
    }

    pub fn read(&self, space: Space, offset: u64, len: u64) -> Vec<u8> {
        // Each byte is written once: copied from its page, or zero.
        let mut out = Vec::with_capacity(len as usize);
        for (page, within, _, n) in chunks(offset, len) {
            match self.pages.get(space, page) {
                Some(p) => out.extend_from_slice(&p[within..within + n]),
                None => out.resize(out.len() + n, 0),
            }
        }
        out
    }

    /// A buffer of our own for a page about to be written, charged to the
    /// budget: from the pool or new. Its bytes are `keep`'s (or zero)
    /// except where `overwritten` (a range the caller is about to write)
    /// says they need not be set. (A function of the fields it uses, so
    /// that it can run while the page table is borrowed.)
    fn fresh_buffer(
        (budget, spare, buffers): (&MemoryBudget, &mut Vec<Page>, &mut u64),
        space: Space,
        keep: Option<&[u8; PAGE as usize]>,
        overwritten: std::ops::Range<usize>,
    ) -> Result<Page, BudgetExceeded> {
        budget.charge(
            MemoryUse::SimulatedMemory,
            PAGE,
            format_args!("a write to {space}"),
        )?;
        *buffers += 1;
        let mut page = spare
            .pop()
            .unwrap_or_else(|| Page::new([0u8; PAGE as usize]));
        let buf = Page::get_mut(&mut page).expect("spare buffers are unshared");
        let src = keep.unwrap_or(ZERO_PAGE);
        buf[..overwritten.start].copy_from_slice(&src[..overwritten.start]);
        buf[overwritten.end..].copy_from_slice(&src[overwritten.end..]);
        Ok(page)
    }

    /// The page for a write, created (and charged) if needed, and made
    /// this page's own if its buffer is shared (copy-on-write). Its bytes
    /// are kept except where `overwritten` (a range the caller is about
    /// to write) says they need not be. One page-table lookup.
    fn page_mut(
        &mut self,
        space: Space,
        page: u64,
        overwritten: std::ops::Range<usize>,
    ) -> Result<&mut [u8; PAGE as usize], BudgetExceeded> {
        let MemoryStore {
            pages,
            spare,
            buffers,
            budget,
            ..
        } = self;
        let p = pages.get_or_try_insert_with(space, page, || {
            Self::fresh_buffer((budget, spare, buffers), space, None, overwritten.clone())
        })?;
        if Page::strong_count(p) != 1 {
            // Replaces a shared buffer: the others still hold it, so
            // nothing is released.
            let own = Self::fresh_buffer((budget, spare, buffers), space, Some(p), overwritten)?;
            *p = own;
        }
        Ok(Page::get_mut(p).expect("unshared"))
    }

    /// Forget a page buffer taken out of the map: its budget is released
    /// when no other page shares it.
    fn forget(&mut self, p: Page) {
        if Page::strong_count(&p) == 1 {
            self.buffers -= 1;
            self.budget.release(MemoryUse::SimulatedMemory, PAGE);
            if self.spare.len() < SPARE_PAGES {
                self.spare.push(p);
            }
        }
    }

    /// Drop a page (it reads as zero again).
    fn drop_page(&mut self, key: PageKey) {
        if let Some(p) = self.pages.remove(key.0, key.1) {
            self.forget(p);
        }
    }

    /// Make page `dst` share the buffer of page `src` (a whole-page copy).
    fn share(&mut self, src: PageKey, dst: PageKey) {
        let p = self.pages.get(src.0, src.1).expect("present").clone();
        if let Some(old) = self.pages.insert(dst.0, dst.1, p) {
            self.forget(old);
        }
    }

    /// The bytes of one piece that does not cross a page boundary.
    fn piece(&self, space: Space, pos: u64, n: u64) -> &[u8] {
        let (page, within) = page_of(pos);
        let p: &[u8] = match self.pages.get(space, page) {
            Some(p) => &p[..],
            None => ZERO_PAGE,
        };
        &p[within..within + n as usize]
    }

    /// Write `data`; all-zero pieces of unwritten pages stay unwritten.
    pub fn write(&mut self, space: Space, offset: u64, data: &[u8]) -> Result<(), BudgetExceeded> {
        if !self.keeps_bytes {
            return Ok(());
        }
        for (page, within, at, n) in chunks(offset, data.len() as u64) {
            let src = &data[at..at + n];
            if src.iter().all(|&b| b == 0) && !self.pages.contains(space, page) {
                continue;
            }
            self.page_mut(space, page, within..within + n)?[within..within + n]
                .copy_from_slice(src);
        }
        Ok(())
    }

    /// Make `[offset, offset+len)` read as zero; whole pages are dropped.
    /// Fails only when part of a shared page is zeroed and the budget
    /// refuses the page its own buffer.
    pub fn zero(&mut self, space: Space, offset: u64, len: u64) -> Result<(), BudgetExceeded> {
        for (page, within, _, n) in chunks(offset, len) {
            if n as u64 == PAGE {
                self.drop_page((space, page));
            } else if self.pages.contains(space, page) {
                // Part of a shared page: it gets its own buffer first.
                self.page_mut(space, page, within..within + n)?[within..within + n].fill(0);
            }
        }
        Ok(())
    }

    /// Copy `len` bytes from `src` to `dst` page to page, without
    /// materialising the range; overlapping ranges copy as `memmove` does
    /// (the result is the source as it was before the copy).
    pub fn copy(
        &mut self,
        src: (Space, u64),
        dst: (Space, u64),
        len: u64,
    ) -> Result<(), BudgetExceeded> {
        if !self.keeps_bytes {
            return Ok(());
        }
        let mut todo: Vec<(u64, u64)> = pieces([src.1, dst.1], len).collect();
        // Copying forward onto a later part of the same range would read
        // bytes already overwritten: go backwards then.
        if src.0 == dst.0 && dst.1 > src.1 && dst.1 < src.1 + len {
            todo.reverse();
        }
        for (at, n) in todo {
            let (sp, so) = page_of(src.1 + at);
            let (dp, doff) = page_of(dst.1 + at);
            let (skey, dkey) = ((src.0, sp), (dst.0, dp));
            let n = n as usize;
            if !self.pages.contains(skey.0, skey.1) {
                self.zero(dst.0, dst.1 + at, n as u64)?;
            } else if skey == dkey {
                self.page_mut(dst.0, dp, 0..0)?
                    .copy_within(so..so + n, doff);
            } else if n as u64 == PAGE {
                // A whole page: share its buffer (copy-on-write).
                self.share(skey, dkey);
            } else if !self.pages.contains(dkey.0, dkey.1)
                && self.pages.get(skey.0, skey.1).expect("present")[so..so + n]
                    .iter()
                    .all(|&b| b == 0)
            {
                // Zeros onto unwritten memory: nothing to do.
            } else {
                // The source buffer is held (not copied) while the
                // destination page is made writable.
                let s = self.pages.get(skey.0, skey.1).expect("present").clone();
                self.page_mut(dst.0, dp, doff..doff + n)?[doff..doff + n]
                    .copy_from_slice(&s[so..so + n]);
            }
        }
        Ok(())
    }

    /// Read `len` bytes at `space`+`offset` for a DMA in flight: the
    /// pages are held (copy-on-write), not copied, until [`Self::land`]
    /// writes them.
    pub fn stage(&self, space: Space, offset: u64, len: u64) -> Staged {
        if !self.keeps_bytes {
            return Staged {
                first: 0,
                len: 0,
                pages: smallvec::SmallVec::new(),
            };
        }
        let (first_page, first) = page_of(offset);
        let last_page = if len == 0 {
            first_page
        } else {
            (offset + len - 1) / PAGE
        };
        Staged {
            first: first as u64,
            len,
            pages: (first_page..=last_page)
                .map(|p| self.pages.get(space, p).cloned())
                .collect(),
        }
    }

    /// [`Self::stage`], the bytes copied into buffers of their own, which
    /// no page of this store shares and the budget is not charged for
    /// (bytes in flight to another store: see [`Self::land_copy`]).
    pub fn stage_copy(&self, space: Space, offset: u64, len: u64) -> Staged {
        let mut staged = self.stage(space, offset, len);
        for p in staged.pages.iter_mut().flatten() {
            *p = Page::new(**p);
        }
        staged
    }

    /// Write what [`Self::stage_copy`] (of this or another store) read to
    /// `dst`, into this store's own buffers: a buffer is never shared by
    /// two stores, so whether one is the last holder of a buffer (which
    /// releases its budget) is known to the one thread that holds the
    /// store.
    pub fn land_copy(&mut self, staged: Staged, dst: (Space, u64)) -> Result<(), BudgetExceeded> {
        if !self.keeps_bytes {
            return Ok(());
        }
        self.land_pieces(&staged, dst, false)
    }

    /// Write what [`Self::stage`] read to `dst`; whole pages are shared.
    pub fn land(&mut self, staged: Staged, dst: (Space, u64)) -> Result<(), BudgetExceeded> {
        if !self.keeps_bytes {
            return Ok(());
        }
        let result = self.land_pieces(&staged, dst, true);
        // The staged buffers are forgotten as any holder's are: the last
        // one out releases the budget.
        for p in staged.pages.into_iter().flatten() {
            self.forget(p);
        }
        result
    }

    /// Land `s` at `dst`; whole pages share `s`'s buffers if `share`,
    /// else are copied.
    fn land_pieces(
        &mut self,
        s: &Staged,
        dst: (Space, u64),
        share: bool,
    ) -> Result<(), BudgetExceeded> {
        for (at, n) in pieces([s.first, dst.1], s.len) {
            let (si, so) = page_of(s.first + at);
            let (dp, doff) = page_of(dst.1 + at);
            match &s.pages[si as usize] {
                None => self.zero(dst.0, dst.1 + at, n)?,
                Some(p) if share && n == PAGE => {
                    if let Some(old) = self.pages.insert(dst.0, dp, p.clone()) {
                        self.forget(old);
                    }
                }
                Some(p) => {
                    let n = n as usize;
                    let src = &p[so..so + n];
                    if src.iter().any(|&b| b != 0) || self.pages.contains(dst.0, dp) {
                        let p = p.clone();
                        self.page_mut(dst.0, dp, doff..doff + n)?[doff..doff + n]
                            .copy_from_slice(&p[so..so + n]);
                    }
                }
            }
        }
        Ok(())
    }

    /// `dst = f(inputs)` over `len` bytes of each, element-wise in units of
    /// `unit` bytes: inputs are read in place and the result is computed a
    /// page-sized piece at a time. Falls back to whole buffers when a
    /// piece could split an element or `dst` overlaps an input.
    pub fn apply<const N: usize>(
        &mut self,
        inputs: [(Space, u64); N],
        dst: (Space, u64),
        len: u64,
        unit: u64,
        mut f: impl FnMut([&[u8]; N], &mut [u8]),
    ) -> Result<(), BudgetExceeded> {
        if !self.keeps_bytes {
            return Ok(());
        }
        let aligned = inputs.iter().all(|i| i.1.is_multiple_of(unit)) && dst.1.is_multiple_of(unit);
        let overlaps = inputs
            .iter()
            .any(|i| i.0 == dst.0 && i.1 < dst.1 + len && dst.1 < i.1 + len);
        if !aligned || overlaps {
            let data = inputs.map(|(s, o)| self.read(s, o, len));
            let mut out = vec![0u8; len as usize];
            f(std::array::from_fn(|k| &data[k][..]), &mut out);
            return self.write(dst.0, dst.1, &out);
        }
        let mut offsets = [0u64; N];
        for (o, i) in offsets.iter_mut().zip(&inputs) {
            *o = i.1;
        }
        // A result computed aside (an input shares the destination page):
        // small ones, a ring step's, on the stack.
        let mut out: smallvec::SmallVec<[u8; 256]> =
            smallvec::smallvec![0u8; PAGE.min(len) as usize];
        for (at, n) in pieces(offsets, len).flat_map(|(at, n)| {
            // Split again at the destination's page boundaries.
            pieces([dst.1 + at], n).map(move |(a2, n2)| (at + a2, n2))
        }) {
            let (dp, doff) = page_of(dst.1 + at);
            let dkey = (dst.0, dp);
            let shares = inputs.iter().any(|&(sp, o)| (sp, (o + at) / PAGE) == dkey);
            if shares {
                // An input lives in the destination page (at other bytes):
                // compute aside, then write.
                let piece = &mut out[..n as usize];
                f(
                    std::array::from_fn(|k| self.piece(inputs[k].0, inputs[k].1 + at, n)),
                    piece,
                );
                self.write(dst.0, dst.1 + at, piece)?;
            } else {
                // Straight into the destination page (its own buffer, so
                // no input page shares it); the input buffers are held by
                // reference count while it is written. (Held first: a
                // buffer the destination shares with an input is shared
                // either way, so the destination gets its own all the same.)
                let range = doff..doff + n as usize;
                let held: [(Option<Page>, usize); N] = std::array::from_fn(|k| {
                    let (page, within) = page_of(inputs[k].1 + at);
                    (self.pages.get(inputs[k].0, page).cloned(), within)
                });
                let out = self.page_mut(dst.0, dp, range.clone())?;
                f(
                    std::array::from_fn(|k| {
                        let (p, within) = &held[k];
                        let p: &[u8] = p.as_deref().unwrap_or(ZERO_PAGE);
                        &p[*within..*within + n as usize]
                    }),
                    &mut out[range],
                );
            }
        }
        Ok(())
    }

    /// SHA-256 over every written page in (space, page) order: equal digests
    /// mean bit-identical memory.
    pub fn digest(&self) -> String {
        digest_of([self])
    }
}

/// [`MemoryStore::digest`] of the memory `stores` hold between them (each
/// page in one of them): the digest one store holding it all would give.
pub fn digest_of<'a>(stores: impl IntoIterator<Item = &'a MemoryStore>) -> String {
    use sha2::{Digest, Sha256};
    let mut pages: Vec<_> = stores.into_iter().flat_map(|m| m.pages.sorted()).collect();
    pages.sort_by_key(|&(k, _)| k);
    let mut h = Sha256::new();
    for (k, p) in pages {
        if p.iter().all(|&b| b == 0) {
            continue; // a zeroed page is the same memory as no page
        }
        h.update(format!("{}:{}", k.0, k.1).as_bytes());
        h.update(&p[..]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::PeCoord;

    /// Bytes staged as a copy in one store land in another in buffers of
    /// its own: no buffer is shared by the two (each store's count of
    /// buffers, and so the budget, stays its own thread's), and the two
    /// stores' digest is the one store's that holds the same memory.
    #[test]
    fn a_copied_transfer_shares_no_buffer_between_stores() {
        let budget = Arc::new(MemoryBudget::unlimited());
        let (a_space, b_space) = (
            Space::Hbm { sip: 0, cube: 0 },
            Space::Hbm { sip: 1, cube: 0 },
        );
        let mut a = MemoryStore::new(budget.clone());
        let mut b = a.sibling();
        let bytes: Vec<u8> = (0..3 * PAGE).map(|i| (i % 251) as u8 + 1).collect();
        a.write(a_space, 0, &bytes).unwrap();
        let staged = a.stage_copy(a_space, 0, 3 * PAGE);
        // Partition 0 goes on writing its page after the transfer started.
        a.write(a_space, 0, &[0xff; 16]).unwrap();
        b.land_copy(staged, (b_space, 0)).unwrap();
        assert_eq!(b.read(b_space, 0, 3 * PAGE), bytes, "as staged");
        assert_eq!((a.buffers(), b.buffers()), (3, 3));
        assert_eq!(budget.used_by(MemoryUse::SimulatedMemory), 6 * PAGE);
        let mut one = MemoryStore::new(Arc::new(MemoryBudget::unlimited()));
        one.write(a_space, 0, &a.read(a_space, 0, 3 * PAGE))
            .unwrap();
        one.write(b_space, 0, &bytes).unwrap();
        assert_eq!(digest_of([&a, &b]), one.digest());
        assert_eq!(digest_of([&b, &a]), one.digest());
        drop((a, b));
        assert_eq!(budget.used_by(MemoryUse::SimulatedMemory), 0);
    }

    #[test]
    fn unwritten_memory_reads_from_an_aligned_page() {
        // The vectorised kernels need aligned elements (see ZERO_PAGE).
        assert_eq!(ZERO_PAGE.as_ptr() as usize % 64, 0);
    }

    fn tcm() -> Space {
        Space::Tcm(PeCoord {
            sip: 0,
            cube: 0,
            pe: 0,
        })
    }

    /// A timing-only store holds nothing whatever is written, copied or
    /// computed into it, and reads zeros.
    #[test]
    fn a_timing_only_store_keeps_no_bytes() {
        let budget = Arc::new(MemoryBudget::new(4 * PAGE));
        let mut m = MemoryStore::timing_only(budget.clone());
        let (s, hbm) = (tcm(), Space::Hbm { sip: 0, cube: 0 });
        let big = vec![7u8; 64 * PAGE as usize]; // more than the budget
        m.write(s, 0, &big).unwrap();
        m.copy((s, 0), (hbm, 0), 64 * PAGE).unwrap();
        let staged = m.stage(s, 0, 64 * PAGE);
        m.land(staged, (hbm, 3)).unwrap();
        m.apply([(s, 0), (hbm, 0)], (hbm, 0), 64 * PAGE, 2, |[a, _], o| {
            o.copy_from_slice(a)
        })
        .unwrap();
        assert!(!m.keeps_bytes());
        assert_eq!((m.pages(), m.buffers()), (0, 0));
        assert!(m.read(hbm, 0, 3 * PAGE).iter().all(|&b| b == 0));
        assert_eq!(budget.peak(), 0);
    }

    /// A staged read keeps the bytes as they were when it was taken (a
    /// DMA reads at its start), whatever is written meanwhile; whole pages
    /// are shared; the budget is back where it was once all is dropped.
    #[test]
    fn a_staged_read_lands_the_bytes_as_they_were() {
        let budget = Arc::new(MemoryBudget::new(64 * PAGE));
        let mut m = MemoryStore::new(budget.clone());
        let (s, hbm) = (tcm(), Space::Hbm { sip: 0, cube: 0 });
        let old: Vec<u8> = (0..3 * PAGE as usize)
            .map(|i| (i % 253) as u8 + 1)
            .collect();
        m.write(s, 0, &old).unwrap();
        for (src, dst, len) in [(0, 0, 3 * PAGE), (5, 2 * PAGE + 9, 2 * PAGE), (0, 7, 10)] {
            let staged = m.stage(s, src, len);
            m.write(s, 0, &vec![0xee; 3 * PAGE as usize]).unwrap();
            m.land(staged, (hbm, dst)).unwrap();
            let want = &old[src as usize..(src + len) as usize];
            assert_eq!(m.read(hbm, dst, len), want, "{src} -> {dst}, {len} B");
            m.write(s, 0, &old).unwrap();
        }
        // Unwritten source bytes land as zeros over written ones.
        let staged = m.stage(Space::Sram { sip: 0, cube: 0 }, 0, 100);
        m.land(staged, (hbm, 0)).unwrap();
        assert_eq!(m.read(hbm, 0, 100), vec![0; 100]);
        let held = budget.used_by(MemoryUse::SimulatedMemory);
        m.zero(hbm, 0, 8 * PAGE).unwrap();
        m.zero(s, 0, 3 * PAGE).unwrap();
        assert!(budget.used_by(MemoryUse::SimulatedMemory) < held);
        assert_eq!(budget.used_by(MemoryUse::SimulatedMemory), 0);
        assert_eq!(m.buffers(), 0, "every staged buffer forgotten");
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
        m.zero(hbm, 0, 8 << 30).unwrap();
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

    /// `apply` gives what a whole-buffer computation gives, for ranges
    /// that straddle pages at different phases, unwritten inputs, an
    /// odd (element-splitting) offset and an output overlapping an input.
    #[test]
    fn piecewise_math_matches_whole_buffers() {
        let s = tcm();
        let h = Space::Hbm { sip: 0, cube: 0 };
        let len = 3 * PAGE + 10;
        let a: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
        let sum = |x: [&[u8]; 2], out: &mut [u8]| {
            for ((o, p), q) in out.iter_mut().zip(x[0]).zip(x[1]) {
                *o = p.wrapping_add(*q);
            }
        };
        for (a_at, b_at, dst, unit) in [
            ((s, 100), (h, 7 * PAGE - 36), (h, 2 * PAGE + 4), 2),
            ((s, 101), (h, 40), (s, 9 * PAGE), 2), // odd: whole buffers
            ((s, 100), (h, 40), (s, 200), 1),      // overlaps a
        ] {
            let mut m = MemoryStore::default();
            m.write(a_at.0, a_at.1, &a).unwrap();
            // b is unwritten but for one page in the middle.
            m.write(b_at.0, b_at.1 + PAGE, &[9; 64]).unwrap();
            let b = m.read(b_at.0, b_at.1, len);
            let mut want = vec![0u8; len as usize];
            sum([&a, &b], &mut want);
            m.apply([a_at, b_at], dst, len, unit, sum).unwrap();
            assert_eq!(m.read(dst.0, dst.1, len), want, "{a_at:?} {b_at:?} {dst:?}");
        }
    }

    /// Whole-page copies share one buffer, charged once; a write to
    /// either side gives it its own buffer and leaves the other as it was;
    /// the charge goes when the last page holding a buffer is dropped.
    #[test]
    fn whole_page_copies_share_buffers_until_written() {
        let budget = Arc::new(MemoryBudget::new(64 * PAGE));
        let mut m = MemoryStore::new(budget.clone());
        let (s, h) = (tcm(), Space::Hbm { sip: 0, cube: 0 });
        let data: Vec<u8> = (0..4 * PAGE).map(|i| (i % 251) as u8 + 1).collect();
        m.write(h, 0, &data).unwrap();
        assert_eq!(m.buffers(), 4);
        // Same phase: the four pages are shared, no bytes copied.
        m.copy((h, 0), (s, 8 * PAGE), 4 * PAGE).unwrap();
        assert_eq!((m.pages(), m.buffers()), (8, 4));
        assert_eq!(budget.used_by(MemoryUse::SimulatedMemory), 4 * PAGE);
        assert_eq!(m.read(s, 8 * PAGE, 4 * PAGE), data);
        // A copy of a copy shares too.
        m.copy((s, 8 * PAGE), (s, 0), 4 * PAGE).unwrap();
        assert_eq!((m.pages(), m.buffers()), (12, 4));
        // Writing one byte of a shared page un-shares that page only.
        m.write(s, 8 * PAGE + 5, &[0xEE]).unwrap();
        assert_eq!(m.buffers(), 5);
        assert_eq!(m.read(h, 0, 4 * PAGE), data, "the source is untouched");
        assert_eq!(m.read(s, 0, 4 * PAGE), data, "the other copy too");
        let mut want = data.clone();
        want[5] = 0xEE;
        assert_eq!(m.read(s, 8 * PAGE, 4 * PAGE), want);
        // Zeroing part of a shared page, a copy within one, and math into
        // one each un-share it and keep the rest of its bytes.
        m.zero(s, 10, 6).unwrap();
        m.copy((s, PAGE), (s, PAGE + 100), 50).unwrap();
        m.apply([(h, 2 * PAGE)], (s, 2 * PAGE), 8, 1, |[x], o| {
            for (o, x) in o.iter_mut().zip(x) {
                *o = x.wrapping_mul(2);
            }
        })
        .unwrap();
        assert_eq!(m.read(h, 0, 4 * PAGE), data, "the source is untouched");
        let mut want = data.clone();
        want[10..16].fill(0);
        want.copy_within(PAGE as usize..PAGE as usize + 50, PAGE as usize + 100);
        for i in 0..8 {
            want[2 * PAGE as usize + i] = data[2 * PAGE as usize + i].wrapping_mul(2);
        }
        assert_eq!(m.read(s, 0, 4 * PAGE), want);
        assert_eq!(m.buffers(), 8);
        // Dropping every holder releases each buffer exactly once.
        m.zero(h, 0, 4 * PAGE).unwrap();
        m.zero(s, 0, 16 * PAGE).unwrap();
        assert_eq!((m.pages(), m.buffers()), (0, 0));
        assert_eq!(budget.used_by(MemoryUse::SimulatedMemory), 0);
        // Un-sharing is charged: with no budget left it is refused.
        let tight = Arc::new(MemoryBudget::new(2 * PAGE));
        let mut m = MemoryStore::new(tight.clone());
        m.write(h, 0, &data[..PAGE as usize]).unwrap();
        m.copy((h, 0), (s, 0), PAGE).unwrap();
        m.write(h, PAGE, &[1]).unwrap();
        assert!(
            m.write(s, 3, &[1]).is_err(),
            "a third buffer is over the budget"
        );
        drop(m);
        assert_eq!(tight.in_use(), 0);
    }

    /// A page dropped and taken again (the pool) reads as zero outside
    /// what is written, and page-to-page copies keep memmove semantics.
    #[test]
    fn reused_pages_read_as_zero_and_copies_go_page_to_page() {
        let mut m = MemoryStore::default();
        let s = tcm();
        m.write(s, 0, &vec![7u8; PAGE as usize]).unwrap();
        m.zero(s, 0, PAGE).unwrap();
        assert_eq!(m.pages(), 0);
        m.write(s, 3 * PAGE + 5, &[1, 2, 3]).unwrap();
        let page = m.read(s, 3 * PAGE, PAGE);
        assert_eq!(&page[5..8], &[1, 2, 3]);
        assert!(page[..5].iter().chain(&page[8..]).all(|&b| b == 0));
        let h = Space::Hbm { sip: 0, cube: 0 };
        let data: Vec<u8> = (0..2 * PAGE).map(|i| (i % 251) as u8).collect();
        m.write(h, 30, &data).unwrap();
        m.copy((h, 30), (s, PAGE - 3), 2 * PAGE).unwrap();
        assert_eq!(m.read(s, PAGE - 3, 2 * PAGE), data);
        // Forward onto itself, overlapping: the source as it was.
        m.copy((h, 30), (h, 1030), 2 * PAGE).unwrap();
        assert_eq!(m.read(h, 1030, 2 * PAGE), data);
    }
}
