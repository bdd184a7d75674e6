//! The memory store: real bytes keyed by (space, offset), in sparse 64 KiB
//! pages. Never-written bytes read as zero.

use crate::address::Space;
use std::collections::HashMap;

const PAGE: u64 = 64 * 1024;

#[derive(Default)]
pub struct MemoryStore {
    pages: HashMap<(Space, u64), Box<[u8]>>,
}

impl MemoryStore {
    pub fn read(&self, space: Space, offset: u64, len: u64) -> Vec<u8> {
        let mut out = vec![0u8; len as usize];
        let mut done = 0u64;
        while done < len {
            let pos = offset + done;
            let (page, within) = (pos / PAGE, pos % PAGE);
            let n = (PAGE - within).min(len - done);
            if let Some(p) = self.pages.get(&(space, page)) {
                out[done as usize..(done + n) as usize]
                    .copy_from_slice(&p[within as usize..(within + n) as usize]);
            }
            done += n;
        }
        out
    }

    pub fn write(&mut self, space: Space, offset: u64, data: &[u8]) {
        let len = data.len() as u64;
        let mut done = 0u64;
        while done < len {
            let pos = offset + done;
            let (page, within) = (pos / PAGE, pos % PAGE);
            let n = (PAGE - within).min(len - done);
            let p = self
                .pages
                .entry((space, page))
                .or_insert_with(|| vec![0u8; PAGE as usize].into_boxed_slice());
            p[within as usize..(within + n) as usize]
                .copy_from_slice(&data[done as usize..(done + n) as usize]);
            done += n;
        }
    }

    /// SHA-256 over every written page in (space, page) order: equal digests
    /// mean bit-identical memory.
    pub fn digest(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut keys: Vec<&(Space, u64)> = self.pages.keys().collect();
        keys.sort();
        let mut h = Sha256::new();
        for k in keys {
            h.update(format!("{}:{}", k.0, k.1).as_bytes());
            h.update(&self.pages[k]);
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::PeCoord;

    #[test]
    fn writes_across_pages_read_back() {
        let mut m = MemoryStore::default();
        let s = Space::Tcm(PeCoord {
            sip: 0,
            cube: 0,
            pe: 0,
        });
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        m.write(s, PAGE - 7, &data);
        assert_eq!(m.read(s, PAGE - 7, data.len() as u64), data);
        assert_eq!(m.read(s, 0, 4), vec![0; 4]);
        assert_eq!(m.read(Space::Hbm { sip: 0, cube: 0 }, PAGE, 4), vec![0; 4]);
    }
}
