//! A first-fit range allocator with coalescing, used for TCM scratch, HBM
//! tensors and IPCQ slot regions.

use std::collections::BTreeMap;

#[derive(Debug)]
pub struct RangeAlloc {
    size: u64,
    free: BTreeMap<u64, u64>, // start -> len
}

/// Allocations are aligned to this many bytes.
pub const ALIGN: u64 = 64;

impl RangeAlloc {
    pub fn new(size: u64) -> Self {
        let mut free = BTreeMap::new();
        if size > 0 {
            free.insert(0, size);
        }
        RangeAlloc { size, free }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn free_bytes(&self) -> u64 {
        self.free.values().sum()
    }

    /// Allocate `len` bytes (rounded up to [`ALIGN`]); returns the offset.
    pub fn alloc(&mut self, len: u64) -> Option<u64> {
        let len = len.max(1).div_ceil(ALIGN) * ALIGN;
        let (&start, &flen) = self.free.iter().find(|(_, &l)| l >= len)?;
        self.free.remove(&start);
        if flen > len {
            self.free.insert(start + len, flen - len);
        }
        Some(start)
    }

    /// Return `[start, start+len)` (same `len` as allocated).
    pub fn free(&mut self, start: u64, len: u64) {
        let mut start = start;
        let mut len = len.max(1).div_ceil(ALIGN) * ALIGN;
        if let Some((&ps, &pl)) = self.free.range(..start).next_back() {
            if ps + pl == start {
                self.free.remove(&ps);
                start = ps;
                len += pl;
            }
        }
        if let Some(&nl) = self.free.get(&(start + len)) {
            self.free.remove(&(start + len));
            len += nl;
        }
        self.free.insert(start, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_free_coalesces() {
        let mut a = RangeAlloc::new(1024);
        let x = a.alloc(100).unwrap();
        let y = a.alloc(64).unwrap();
        let z = a.alloc(64).unwrap();
        assert_eq!((x, y, z), (0, 128, 192));
        a.free(y, 64);
        a.free(x, 100);
        a.free(z, 64);
        assert_eq!(a.free_bytes(), 1024);
        assert_eq!(a.alloc(1024), Some(0));
        assert_eq!(a.alloc(1), None);
    }
}
