//! A first-fit range allocator with coalescing, used for TCM scratch, HBM
//! tensors and IPCQ slot regions.

/// Free ranges are a vector sorted by start: a scratch allocator holds a
/// handful, and its alloc / free pair runs once per MATH command (a
/// `BTreeMap` cost ~600 instructions a pair; a first-fit scan is linear
/// in either). The ranges it hands out are the same.
#[derive(Debug)]
pub struct RangeAlloc {
    size: u64,
    /// (start, len), sorted by start, none adjacent.
    free: Vec<(u64, u64)>,
}

/// Allocations are aligned to this many bytes.
pub const ALIGN: u64 = 64;

impl RangeAlloc {
    pub fn new(size: u64) -> Self {
        let free = if size > 0 {
            vec![(0, size)]
        } else {
            Vec::new()
        };
        RangeAlloc { size, free }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn free_bytes(&self) -> u64 {
        self.free.iter().map(|&(_, l)| l).sum()
    }

    /// Allocate `len` bytes (rounded up to [`ALIGN`]) at the lowest free
    /// address that fits; returns the offset.
    pub fn alloc(&mut self, len: u64) -> Option<u64> {
        let len = len.max(1).div_ceil(ALIGN) * ALIGN;
        let i = self.free.iter().position(|&(_, l)| l >= len)?;
        let (start, flen) = self.free[i];
        if flen > len {
            self.free[i] = (start + len, flen - len);
        } else {
            self.free.remove(i);
        }
        Some(start)
    }

    /// Return `[start, start+len)` (same `len` as allocated).
    pub fn free(&mut self, start: u64, len: u64) {
        let len = len.max(1).div_ceil(ALIGN) * ALIGN;
        let i = self.free.partition_point(|&(s, _)| s < start);
        let joins_prev = i > 0 && {
            let (ps, pl) = self.free[i - 1];
            ps + pl == start
        };
        let joins_next = self.free.get(i).is_some_and(|&(ns, _)| start + len == ns);
        match (joins_prev, joins_next) {
            (true, true) => {
                let (_, nl) = self.free.remove(i);
                self.free[i - 1].1 += len + nl;
            }
            (true, false) => self.free[i - 1].1 += len,
            (false, true) => {
                let (_, nl) = self.free[i];
                self.free[i] = (start, len + nl);
            }
            (false, false) => self.free.insert(i, (start, len)),
        }
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

    /// The same offsets as a map-based first-fit allocator, over a long
    /// random run of allocations and frees (every join case included).
    #[test]
    fn hands_out_what_a_map_based_first_fit_does() {
        use std::collections::BTreeMap;
        let mut reference: BTreeMap<u64, u64> = BTreeMap::from([(0, 1 << 20)]);
        let mut a = RangeAlloc::new(1 << 20);
        let mut live: Vec<(u64, u64)> = Vec::new();
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(12345);
        for step in 0..20_000 {
            if rng.random_range(0..3) != 0 || live.is_empty() {
                let len = rng.random_range(1..=5000u64);
                let want = len.div_ceil(ALIGN) * ALIGN;
                let fit = reference
                    .iter()
                    .find(|(_, &l)| l >= want)
                    .map(|(&s, &l)| (s, l));
                let got = a.alloc(len);
                assert_eq!(got, fit.map(|(s, _)| s), "step {step}");
                if let Some((s, l)) = fit {
                    reference.remove(&s);
                    if l > want {
                        reference.insert(s + want, l - want);
                    }
                    live.push((s, len));
                }
            } else {
                let (s, len) = live.swap_remove(rng.random_range(0..live.len()));
                a.free(s, len);
                let (mut s, mut l) = (s, len.div_ceil(ALIGN) * ALIGN);
                if let Some((&ps, &pl)) = reference.range(..s).next_back() {
                    if ps + pl == s {
                        reference.remove(&ps);
                        (s, l) = (ps, l + pl);
                    }
                }
                if let Some(nl) = reference.remove(&(s + l)) {
                    l += nl;
                }
                reference.insert(s, l);
            }
            assert_eq!(
                a.free,
                reference.iter().map(|(&s, &l)| (s, l)).collect::<Vec<_>>()
            );
        }
    }
}
