//! The per-SIP virtual address map (seed ADR-0050 D3/D4): a placed tensor
//! has one virtual range on its SIP, made of its shards one after another,
//! and each shard's part of the range maps to the shard's block in its own
//! cube's HBM. Kernels get the virtual base as `t_ptr` and reach shard `k`
//! at `t_ptr + offset_k`; the machine translates every access through this
//! map and charges the routed path to the physical stack.
//!
//! Owns: virtual address allocation per SIP, the mappings, translation and
//! its errors, and [`PlacedTensor`], which keeps a tensor's shards and its
//! mappings alive together.

use super::alloc::RangeAlloc;
use super::machine::TensorRef;
use crate::address::{self, Space, VA_SPAN};
use crate::engine::lock::Mutex;
use crate::error::HwError;
use crate::placement::ShardSpec;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// One mapped shard: `len` bytes of virtual space backed by `space` from
/// `offset`.
#[derive(Debug, Clone)]
struct Mapping {
    len: u64,
    space: Space,
    offset: u64,
    tensor: Arc<str>,
    cube: u32,
    pe: u32,
}

/// The address map of every SIP.
#[derive(Debug, Default)]
pub struct VirtualMap {
    /// Per SIP: mappings by virtual start.
    maps: HashMap<u32, BTreeMap<u64, Mapping>>,
    /// Per SIP: free virtual space.
    free: HashMap<u32, RangeAlloc>,
    /// Per SIP: mappings made and removed so far (see
    /// [`VirtualMap::changes`]).
    changes: HashMap<u32, u64>,
}

/// Virtual addresses start here (not 0, so that a small integer mistaken
/// for a pointer is not a valid address).
const VA_BASE: u64 = 1 << 32;

impl VirtualMap {
    /// Reserve `len` bytes of virtual space on `sip`; returns the offset
    /// in the SIP's virtual space.
    fn reserve(&mut self, sip: u32, len: u64) -> Result<u64, HwError> {
        let a = self
            .free
            .entry(sip)
            .or_insert_with(|| RangeAlloc::new(VA_SPAN - VA_BASE));
        a.alloc(len)
            .map(|o| o + VA_BASE)
            .ok_or_else(|| HwError::OutOfMemory {
                space: format!("the virtual address space of SIP {sip}"),
                len,
                free: a.free_bytes(),
            })
    }

    /// How many times `sip`'s map has changed (a tensor mapped or
    /// unmapped): equal counts, equal maps.
    pub fn changes(&self, sip: u32) -> u64 {
        self.changes.get(&sip).copied().unwrap_or(0)
    }

    /// Remove the mappings of `[va, va + len)` on `sip` and free the space.
    fn release(&mut self, sip: u32, va: u64, len: u64) {
        *self.changes.entry(sip).or_default() += 1;
        if let Some(m) = self.maps.get_mut(&sip) {
            let starts: Vec<u64> = m.range(va..va + len.max(1)).map(|(&s, _)| s).collect();
            for s in starts {
                m.remove(&s);
            }
        }
        if let Some(a) = self.free.get_mut(&sip) {
            a.free(va - VA_BASE, len);
        }
    }

    /// The physical `(space, offset)` of `[addr, addr + len)`, a virtual
    /// address; the whole access must lie in one shard.
    pub fn translate(&self, addr: u64, len: u64) -> Result<(Space, u64), HwError> {
        let (sip, va) = address::as_virtual(addr).ok_or_else(|| HwError::BadAddress {
            addr,
            reason: "not a virtual address".into(),
        })?;
        let bad = |reason: String| HwError::BadAddress { addr, reason };
        let map = self.maps.get(&sip);
        let hit = map.and_then(|m| m.range(..=va).next_back());
        match hit {
            Some((&start, m)) if va < start + m.len => {
                let end = va.checked_add(len);
                if end.is_none_or(|e| e > start + m.len) {
                    return Err(bad(format!(
                        "the access of {len} bytes runs past the end of tensor '{}' shard (cube {}, pe {}) \
                         [{:#x}, {:#x}); an access may not span two shards",
                        m.tensor,
                        m.cube,
                        m.pe,
                        address::virtual_addr(sip, start),
                        address::virtual_addr(sip, start + m.len)
                    )));
                }
                Ok((m.space, m.offset + (va - start)))
            }
            _ => {
                let near = map
                    .and_then(|m| {
                        let before = m.range(..=va).next_back();
                        let after = m.range(va..).next();
                        before.or(after)
                    })
                    .map(|(&s, m)| {
                        format!(
                            "; the nearest is tensor '{}' at [{:#x}, {:#x})",
                            m.tensor,
                            address::virtual_addr(sip, s),
                            address::virtual_addr(sip, s + m.len)
                        )
                    })
                    .unwrap_or_else(|| "; nothing is mapped there".into());
                Err(bad(format!(
                    "no tensor is mapped at this virtual address of SIP {sip}{near}"
                )))
            }
        }
    }
}

/// A tensor placed with a DPPolicy: its shards (blocks in their cubes'
/// HBM) and its virtual range on its SIP. Dropping it unmaps the range;
/// each shard's memory goes when the last reference to it does.
pub struct PlacedTensor {
    pub sip: u32,
    /// Offset of the virtual range in the SIP's virtual space.
    va: u64,
    len: u64,
    pub specs: Vec<ShardSpec>,
    /// The memory of `specs[i]`.
    pub blocks: Vec<TensorRef>,
    map: Arc<Mutex<VirtualMap>>,
}

impl PlacedTensor {
    /// Map `blocks` (the memory of `specs`, in order) as one virtual range
    /// on `sip`, named `tensor` in errors.
    pub(crate) fn map(
        map: Arc<Mutex<VirtualMap>>,
        sip: u32,
        specs: Vec<ShardSpec>,
        blocks: Vec<TensorRef>,
        tensor: &str,
    ) -> Result<PlacedTensor, HwError> {
        let len = specs.iter().map(|s| s.nbytes).sum::<u64>();
        let name: Arc<str> = Arc::from(tensor);
        let va = {
            let mut m = map.lock();
            let va = m.reserve(sip, len)?;
            *m.changes.entry(sip).or_default() += 1;
            let sip_map = m.maps.entry(sip).or_default();
            for (s, b) in specs.iter().zip(&blocks) {
                if s.nbytes > 0 {
                    sip_map.insert(
                        va + s.offset_bytes,
                        Mapping {
                            len: s.nbytes,
                            space: b.space,
                            offset: b.offset,
                            tensor: name.clone(),
                            cube: s.cube,
                            pe: s.pe,
                        },
                    );
                }
            }
            va
        };
        Ok(PlacedTensor {
            sip,
            va,
            len,
            specs,
            blocks,
            map,
        })
    }

    /// The virtual base address (`t_ptr`, `tensor.data_ptr()`).
    pub fn addr(&self) -> u64 {
        address::virtual_addr(self.sip, self.va)
    }

    /// Bytes of the virtual range (all shards).
    pub fn nbytes(&self) -> u64 {
        self.len
    }
}

impl Drop for PlacedTensor {
    fn drop(&mut self) {
        self.map.lock().release(self.sip, self.va, self.len);
    }
}

#[cfg(test)]
mod tests {
    use crate::address::Space;
    use crate::config::TopologySpec;
    use crate::hw::{Dtype, Machine};
    use crate::placement::{resolve, DpMode, DpPolicy};
    use std::sync::Arc;

    #[test]
    fn shards_are_reached_at_t_ptr_plus_offset_in_their_own_cube() {
        let spec = TopologySpec::default_embedded();
        let m = Machine::new(Arc::new(crate::topology::build(&spec).unwrap()));
        let dp = DpPolicy {
            cube: DpMode::RowWise,
            pe: DpMode::Replicate,
            num_cubes: 4,
            num_pes: 1,
        };
        let specs = resolve(&dp, &[4, 8], 2, 1, &spec).unwrap();
        let t = m.place_tensor(specs, Dtype::F16, "x").unwrap();
        let nbytes = 16;
        for cube in 0..4u32 {
            let v = m
                .view(t.addr() + cube as u64 * nbytes + 2, &[7], Dtype::F16)
                .unwrap();
            assert_eq!(v.space, Space::Hbm { sip: 1, cube });
            assert_eq!(v.offset, t.blocks[cube as usize].offset + 2);
        }
        // Spanning two shards, past the end, and after the drop.
        let e = m
            .view(t.addr() + 8, &[8], Dtype::F16)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("tensor 'x' shard (cube 0, pe 0)") && e.contains("span two shards"),
            "{e}"
        );
        let past = t.addr() + 4 * nbytes;
        let e = m.view(past, &[1], Dtype::F16).unwrap_err().to_string();
        assert!(
            e.contains("no tensor is mapped") && e.contains("nearest is tensor 'x'"),
            "{e}"
        );
        let base = t.addr();
        drop(t);
        let e = m.view(base, &[1], Dtype::F16).unwrap_err().to_string();
        assert!(e.contains("nothing is mapped there"), "{e}");
        // The virtual space is reused.
        let specs = resolve(&DpPolicy::SINGLE, &[8], 2, 1, &spec).unwrap();
        assert_eq!(m.place_tensor(specs, Dtype::F16, "y").unwrap().addr(), base);
    }

    #[test]
    fn a_load_at_a_virtual_address_is_charged_the_path_to_the_physical_stack() {
        use crate::engine::Executor;
        use crate::topology::{NodeId, PeCoord};
        let spec = TopologySpec::default_embedded();
        let m = Machine::new(Arc::new(crate::topology::build(&spec).unwrap()));
        let dp = DpPolicy {
            cube: DpMode::RowWise,
            pe: DpMode::Replicate,
            num_cubes: 16,
            num_pes: 1,
        };
        let n = 4096u32;
        let specs = resolve(&dp, &[16, n], 2, 0, &spec).unwrap();
        let t = m.place_tensor(specs, Dtype::F16, "x").unwrap();
        let pe = PeCoord {
            sip: 0,
            cube: 0,
            pe: 0,
        };
        for cube in [0u32, 5, 15] {
            // One load at a time: each starts on idle links.
            let ex = Executor::new();
            let (m2, addr) = (m.clone(), t.addr() + cube as u64 * n as u64 * 2);
            let h = ex.spawn(async move {
                crate::engine::sleep(cube as u64 * 1_000_000_000).await;
                let start = crate::engine::now();
                let x = m2.load(pe, addr, &[n], Dtype::F16).unwrap();
                x.ready.wait().await;
                crate::engine::now() - start
            });
            ex.run();
            let stack = NodeId::Hbm {
                sip: 0,
                cube,
                stack: 0,
            };
            let path = m.router.find_path(stack, NodeId::Pe(pe)).unwrap();
            let d = m.router.distance(&path);
            let expect = m.timing.dma_setup
                + d.latency_ps
                + d.bottleneck.unwrap().duration_ps(n as u64 * 2).unwrap();
            assert_eq!(h.try_take(), Some(expect), "shard in cube {cube}");
        }
    }
}
