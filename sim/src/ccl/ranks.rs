//! Which PEs run a collective's kernels: the rank ↔ (SIP, cube, PE)
//! mapping of a process group (seed ADR-0024 D1, seed 004 D5, ADR-0050 D7).
//!
//! * **rank = SIP** (world size ≤ SIP count, the default): rank r is SIP r;
//!   the mapper picks the PEs of that SIP that run the kernel —
//!   `leader_only`: cube 0, PE 0; `all_pes`: every PE of every cube, in
//!   (cube, PE) order; `cube_leaders`: PE 0 of every cube.
//! * **rank = flat PE index** (world size above the SIP count, the seed's
//!   legacy mode): rank r is the r-th PE of the machine in (SIP, cube, PE)
//!   order, one PE per rank whatever the mapper.
//!
//! The participants of all ranks, rank after rank, are the flat order the
//! IPCQ tables are laid over ([`crate::ccl::tables`]).

use crate::config::ccl::Mapper;
use crate::config::TopologySpec;
use crate::topology::PeCoord;

/// How ranks are placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankMode {
    /// Rank r is SIP r; the mapper picks its PEs.
    Sip(Mapper),
    /// Rank r is the r-th PE of the machine.
    FlatPe,
}

/// The rank ↔ PE mapping of a process group.
#[derive(Debug, Clone)]
pub struct RankMap {
    pub world_size: u32,
    pub mode: RankMode,
    /// (cubes per SIP, PEs per cube).
    dims: (u32, u32),
    /// The machine's SIPs.
    sips: u32,
}

/// A world size the machine cannot hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RankError(pub String);

impl RankMap {
    pub fn new(world_size: u32, mapper: Mapper, spec: &TopologySpec) -> Result<RankMap, RankError> {
        let (sips, cubes, pes) = (spec.n_sips(), spec.cubes_per_sip(), spec.pes_per_cube());
        let total = sips as u64 * cubes as u64 * pes as u64;
        let mode = if world_size <= sips {
            RankMode::Sip(mapper)
        } else if world_size as u64 <= total {
            RankMode::FlatPe
        } else {
            return Err(RankError(format!(
                "world_size {world_size} exceeds the {total} PEs of the topology ({sips} SIPs x {cubes} cubes x {pes} PEs): \
                 ranks map to SIPs (rank = SIP) or, above {sips}, to single PEs (rank = flat PE index)"
            )));
        };
        Ok(RankMap {
            world_size,
            mode,
            dims: spec.pe_dims(),
            sips,
        })
    }

    /// The PEs that run rank `rank`'s kernel.
    pub fn participants(&self, rank: u32) -> Vec<PeCoord> {
        let (cubes, pes) = self.dims;
        let pe = |cube, pe| PeCoord {
            sip: rank,
            cube,
            pe,
        };
        match self.mode {
            RankMode::Sip(Mapper::AllPes) => (0..cubes)
                .flat_map(|c| (0..pes).map(move |p| pe(c, p)))
                .collect(),
            RankMode::Sip(Mapper::CubeLeaders) => (0..cubes).map(|c| pe(c, 0)).collect(),
            RankMode::Sip(Mapper::LeaderOnly) | RankMode::FlatPe => vec![self.first_pe(rank)],
        }
    }

    /// The first of rank `rank`'s PEs.
    pub fn first_pe(&self, rank: u32) -> PeCoord {
        match self.mode {
            RankMode::Sip(_) => PeCoord {
                sip: rank,
                cube: 0,
                pe: 0,
            },
            RankMode::FlatPe => PeCoord::from_flat_index(rank as u64, self.dims),
        }
    }

    /// The SIP rank `rank` runs on.
    pub fn sip(&self, rank: u32) -> u32 {
        self.first_pe(rank).sip
    }

    /// Every participant, rank after rank.
    pub fn all(&self) -> Vec<PeCoord> {
        (0..self.world_size)
            .flat_map(|r| self.participants(r))
            .collect()
    }

    /// Why rank `rank`'s tensor on SIP `tensor_sip` is not where the rank
    /// runs, blaming what is to blame: a bench that placed one rank per
    /// SIP (`set_device(rank)`) in a world larger than the machine's SIPs
    /// is the config's world size, not the bench.
    pub fn misplaced(&self, rank: u32, tensor_sip: u32) -> String {
        let sip = self.sip(rank);
        if self.mode == RankMode::FlatPe && tensor_sip == rank {
            format!(
                "rank {rank} runs on SIP {sip}, not SIP {rank} where its tensor lives: world_size {} \
                 is more than the {} SIPs of the topology, so ranks are single PEs (rank = flat PE \
                 index, the seed's single-driver mode), while this bench puts one rank per SIP. \
                 Set world_size to at most {} in the ccl.yaml, or use a topology of {} SIPs",
                self.world_size, self.sips, self.sips, self.world_size
            )
        } else {
            format!(
                "rank {rank} runs on SIP {sip} but its tensor lives on SIP {tensor_sip}: call \
                 torch.ahbm.set_device({sip}) before creating the tensor"
            )
        }
    }

    /// How the mapping is described in messages.
    pub fn describe(&self) -> String {
        match self.mode {
            RankMode::Sip(m) => format!("rank = SIP, mapper {}", m.name()),
            RankMode::FlatPe => "rank = flat PE index".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pe(sip: u32, cube: u32, pe: u32) -> PeCoord {
        PeCoord { sip, cube, pe }
    }

    #[test]
    fn a_misplaced_tensor_blames_the_world_size_when_ranks_outgrew_the_sips() {
        let spec = TopologySpec::default_embedded(); // 4 SIPs
        let flat = RankMap::new(100, Mapper::LeaderOnly, &spec).unwrap();
        // The bench put rank 1's tensor on SIP 1 (set_device(rank)).
        let e = flat.misplaced(1, 1);
        assert!(
            e.contains("world_size 100 is more than the 4 SIPs")
                && e.contains("Set world_size to at most 4"),
            "{e}"
        );
        // Rank = SIP, a bench that did not set its device: the bench.
        let sips = RankMap::new(4, Mapper::LeaderOnly, &spec).unwrap();
        let e = sips.misplaced(2, 0);
        assert!(e.contains("call torch.ahbm.set_device(2)"), "{e}");
    }

    #[test]
    fn ranks_are_sips_until_the_world_outgrows_them() {
        let spec = TopologySpec::default_embedded(); // 4 SIPs x 16 cubes x 4 PEs
        let m = RankMap::new(4, Mapper::LeaderOnly, &spec).unwrap();
        assert_eq!(m.all(), (0..4).map(|s| pe(s, 0, 0)).collect::<Vec<_>>());
        let m = RankMap::new(2, Mapper::AllPes, &spec).unwrap();
        let all = m.all();
        assert_eq!(
            (all.len(), all[0], all[5], all[64]),
            (128, pe(0, 0, 0), pe(0, 1, 1), pe(1, 0, 0))
        );
        let m = RankMap::new(70, Mapper::AllPes, &spec).unwrap();
        assert_eq!(m.mode, RankMode::FlatPe);
        assert_eq!(
            (m.participants(5), m.participants(69)),
            (vec![pe(0, 1, 1)], vec![pe(1, 1, 1)])
        );
        assert_eq!(m.sip(69), 1);
        let e = RankMap::new(257, Mapper::LeaderOnly, &spec).unwrap_err();
        assert!(e.0.contains("exceeds the 256 PEs"), "{e}");
    }
}
