//! The process's heap: small blocks from mimalloc, blocks of a simulated
//! page and more from the system allocator.
//!
//! A simulated run makes and frees a handful of small objects per command
//! (a tensor, its completion event, an engine task's future): glibc's
//! malloc and free were ~190 instructions a pair and an eighth of a ring
//! step, mimalloc's size-class free lists a fraction of that. A whole
//! switch to mimalloc (or jemalloc) was slower on large sizes, though: a
//! simulated 4 KiB page with its share count is a 4104-byte block, which
//! both put in a 5 KiB class, so pages straddle OS pages and the f16 adds
//! over them ran 20 % slower. So the split is by size, below a page and
//! from it. A block is always freed (and resized) with the layout it was
//! made with (`GlobalAlloc`'s contract), so its size says which allocator
//! owns it.

use std::alloc::{GlobalAlloc, Layout, System};

/// mimalloc's `mi_option_purge_delay` (the `mi_option_e` order of
/// mimalloc.h, v3): milliseconds before freed memory goes back to the OS.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Keep the small-block heap's freed memory for reuse instead of giving
/// it back to the OS a second later. A run frees most of its small
/// blocks at once (a collective's tensors, the recorded kernels' lists)
/// and makes as many again: with the default, every give-back was an
/// `madvise` and, with the kernel-recording thread alive, a TLB shootdown
/// on the other core (a 4096-rank `hello_send` spent 1.5 s in the kernel
/// instead of 1.15 s; peak RSS is the same either way). Call it first in
/// `main`, before other threads start (mimalloc's options are not
/// thread-safe to set).
pub fn keep_freed_memory() {
    // SAFETY: sets a plain option value; no thread allocates yet.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
}

/// Blocks of at least this many bytes come from the system allocator.
const LARGE: usize = 4096;

/// mimalloc's `MI_SMALL_SIZE_MAX` (128 words): the largest block
/// `mi_malloc_small` serves.
const MI_SMALL_SIZE_MAX: usize = 128 * std::mem::size_of::<usize>();

/// mimalloc's `MI_MAX_ALIGN_SIZE`: every block it hands out is aligned to
/// this or to its own size, whichever is less (its size classes above one
/// word are whole multiples of two words, in pages whose first block is
/// so aligned).
const MI_MAX_ALIGN_SIZE: usize = 16;

/// See the module doc.
pub struct SplitHeap;

fn small(layout: Layout) -> bool {
    layout.size() < LARGE
}

// SAFETY: every block is freed and resized by the allocator that made it:
// both are chosen by the block's size, which `GlobalAlloc` callers pass
// unchanged to `dealloc` and `realloc`; a `realloc` that crosses the
// threshold allocates in the other, copies and frees in the first.
unsafe impl GlobalAlloc for SplitHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if small(layout) {
            // Most blocks of a run (a tensor, an event, a task's future)
            // are a few words, of an alignment every mimalloc block has:
            // its size-class path takes them without the aligned entry's
            // checks (`mimalloc::MiMalloc` calls `mi_malloc_aligned` for
            // every block: ~49 instructions a block, ~13 this way; a
            // 256-rank `ring_native` of 65 536 steps 706.4 -> 698.8 M
            // instructions, callgrind).
            // A block at least as large as its alignment, of at most 16
            // bytes' alignment, is aligned as asked (see MI_MAX_ALIGN_SIZE;
            // a `Layout` may be smaller than its alignment: those, and the
            // larger alignments, take the aligned entry).
            let size = layout.size();
            if layout.align() <= MI_MAX_ALIGN_SIZE
                && layout.align() <= size
                && size <= MI_SMALL_SIZE_MAX
            {
                return unsafe { libmimalloc_sys::mi_malloc_small(size).cast() };
            }
            unsafe { mimalloc::MiMalloc.alloc(layout) }
        } else {
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if small(layout) {
            unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
        } else {
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if small(layout) {
            unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
        } else {
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let was_small = small(layout);
        if was_small == (new_size < LARGE) {
            return if was_small {
                unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
            } else {
                unsafe { System.realloc(ptr, layout, new_size) }
            };
        }
        // SAFETY (of the layout): the caller guarantees `new_size`, rounded
        // up to `layout.align()`, does not overflow `isize`.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_option_is_the_one_we_set() {
        // Its default (1000 ms in mimalloc v3) at its index: a mimalloc
        // with another option order fails here, not silently.
        let default = std::env::var("MIMALLOC_PURGE_DELAY")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1000);
        let now = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(now, default, "mimalloc's option {MI_OPTION_PURGE_DELAY}");
    }

    #[test]
    fn every_small_block_is_aligned_as_asked() {
        // Each size and alignment of the size-class path and beside it,
        // many blocks of each (a page's later blocks, not only its first).
        let h = SplitHeap;
        for align in [1, 2, 4, 8, 16, 32, 64] {
            for size in (1..=MI_SMALL_SIZE_MAX + 64).filter(|s| s % 8 == 0 || *s < 32) {
                let l = Layout::from_size_align(size, align).unwrap();
                let blocks: Vec<*mut u8> = (0..40).map(|_| unsafe { h.alloc(l) }).collect();
                for &p in &blocks {
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size}, alignment {align}");
                    // The whole block is ours to write.
                    unsafe { std::ptr::write_bytes(p, 0xa5, size) };
                }
                for p in blocks {
                    unsafe { h.dealloc(p, l) };
                }
            }
        }
    }

    #[test]
    fn a_block_resized_across_the_threshold_keeps_its_bytes() {
        let h = SplitHeap;
        unsafe {
            let l = Layout::from_size_align(100, 8).unwrap();
            let p = h.alloc(l);
            for i in 0..100 {
                *p.add(i) = i as u8;
            }
            // Small → large → small: each crossing copies.
            let p = h.realloc(p, l, 10_000);
            let l = Layout::from_size_align(10_000, 8).unwrap();
            assert!((0..100).all(|i| *p.add(i) == i as u8));
            *p.add(9_999) = 7;
            let p = h.realloc(p, l, 50);
            let l = Layout::from_size_align(50, 8).unwrap();
            assert!((0..50).all(|i| *p.add(i) == i as u8));
            h.dealloc(p, l);
            // Zeroed, both sides.
            for size in [16, LARGE, 3 * LARGE] {
                let l = Layout::from_size_align(size, 64).unwrap();
                let p = h.alloc_zeroed(l);
                assert_eq!(p as usize % 64, 0);
                assert!((0..size).all(|i| *p.add(i) == 0));
                h.dealloc(p, l);
            }
        }
    }
}
