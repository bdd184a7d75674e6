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
//!
//! A process group (`dist.new_group(ranks)`) is a map of its own
//! ([`RankMap::group`]): its rank g is world rank `ranks[g]`, run by that
//! rank's PEs. Its tables are laid over [`RankMap::laid_out`]'s
//! coordinates — where its PEs would be in a world of its size, rank g on
//! SIP g — and then moved onto its real PEs, so every table kind serves
//! any group (contiguous, strided, of one rank).

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
    /// A process group's world ranks, in group order (None: the world,
    /// whose rank r is world rank r).
    members: Option<std::sync::Arc<[u32]>>,
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
            members: None,
        })
    }

    /// The map of the process group of world ranks `members` (in group
    /// order) of this world: each distinct and a rank of the world.
    pub fn group(&self, members: &[u32]) -> Result<RankMap, RankError> {
        if self.members.is_some() {
            return Err(RankError(
                "a process group is made from the world's ranks, not another group's".into(),
            ));
        }
        if members.is_empty() {
            return Err(RankError("a process group needs at least one rank".into()));
        }
        let mut seen = std::collections::BTreeSet::new();
        for &r in members {
            if r >= self.world_size {
                return Err(RankError(format!(
                    "rank {r} is not a rank of the world (world_size {}: ranks 0..{})",
                    self.world_size,
                    self.world_size - 1
                )));
            }
            if !seen.insert(r) {
                return Err(RankError(format!("rank {r} is named twice")));
            }
        }
        Ok(RankMap {
            world_size: members.len() as u32,
            members: Some(members.into()),
            ..self.clone()
        })
    }

    /// A process group's world ranks in group order; None for the world.
    pub fn members(&self) -> Option<&[u32]> {
        self.members.as_deref()
    }

    /// The world rank of rank `rank` of this map.
    pub fn world_rank(&self, rank: u32) -> u32 {
        self.members.as_ref().map_or(rank, |m| m[rank as usize])
    }

    /// The rank in this map of world rank `world` (None: not a member).
    pub fn group_rank(&self, world: u32) -> Option<u32> {
        match &self.members {
            None => (world < self.world_size).then_some(world),
            Some(m) => m.iter().position(|&r| r == world).map(|g| g as u32),
        }
    }

    /// The PEs that run rank `rank`'s kernel.
    pub fn participants(&self, rank: u32) -> Vec<PeCoord> {
        self.placed(self.world_rank(rank))
    }

    /// Where the PEs of rank `rank` would be in a world of this map's
    /// size (its rank g on SIP g): the coordinates a group's tables are
    /// laid over before [`RankMap::real_pes`] moves them onto its PEs.
    pub fn laid_out(&self, rank: u32) -> Vec<PeCoord> {
        self.placed(rank)
    }

    /// Each of [`RankMap::laid_out`]'s coordinates with the PE it stands
    /// for (the identity for the world).
    pub fn real_pes(&self) -> std::collections::BTreeMap<PeCoord, PeCoord> {
        (0..self.world_size)
            .flat_map(|g| self.laid_out(g).into_iter().zip(self.participants(g)))
            .collect()
    }

    /// The PEs of world rank `rank`.
    fn placed(&self, rank: u32) -> Vec<PeCoord> {
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
            RankMode::Sip(Mapper::LeaderOnly) => vec![pe(0, 0)],
            RankMode::FlatPe => vec![PeCoord::from_flat_index(rank as u64, self.dims)],
        }
    }

    /// The first of rank `rank`'s PEs.
    pub fn first_pe(&self, rank: u32) -> PeCoord {
        let rank = self.world_rank(rank);
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
        let rank = self.world_rank(rank);
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

    /// A group's rank g is world rank `members[g]`, run by that rank's
    /// PEs; its tables are laid out as a world of its size would be and
    /// moved onto those PEs.
    #[test]
    fn a_group_s_ranks_are_its_members_in_group_order() {
        let spec = TopologySpec::default_embedded(); // 4 SIPs x 16 cubes x 4 PEs
        let world = RankMap::new(4, Mapper::CubeLeaders, &spec).unwrap();
        let g = world.group(&[3, 1]).unwrap();
        assert_eq!(g.world_size, 2);
        assert_eq!((g.world_rank(0), g.world_rank(1)), (3, 1));
        assert_eq!(
            (g.group_rank(1), g.group_rank(3), g.group_rank(0)),
            (Some(1), Some(0), None)
        );
        assert_eq!(g.first_pe(0), pe(3, 0, 0));
        assert_eq!(g.sip(1), 1);
        assert_eq!(g.participants(1).len(), 16);
        assert!(g.participants(1).iter().all(|p| p.sip == 1 && p.pe == 0));
        assert_eq!(g.all().len(), 32);
        assert_eq!(g.laid_out(1)[2], pe(1, 2, 0));
        let real = g.real_pes();
        assert_eq!(
            (real.len(), real[&pe(0, 5, 0)], real[&pe(1, 5, 0)]),
            (32, pe(3, 5, 0), pe(1, 5, 0))
        );
        assert!(world.real_pes().iter().all(|(a, b)| a == b));
        assert!(
            g.misplaced(0, 0).starts_with("rank 3 runs on SIP 3"),
            "{}",
            g.misplaced(0, 0)
        );
        // Ranks = flat PE indices: a group of them too.
        let flat = RankMap::new(70, Mapper::LeaderOnly, &spec).unwrap();
        let g = flat.group(&[69, 5]).unwrap();
        assert_eq!(
            (g.participants(0), g.laid_out(0)),
            (vec![pe(1, 1, 1)], vec![pe(0, 0, 0)])
        );
        for (bad, why) in [
            (vec![], "at least one rank"),
            (
                vec![1, 4],
                "rank 4 is not a rank of the world (world_size 4: ranks 0..3)",
            ),
            (vec![2, 2], "rank 2 is named twice"),
        ] {
            let e = world.group(&bad).unwrap_err();
            assert!(e.0.contains(why), "{e}");
        }
        assert!(world.group(&[0]).unwrap().group(&[0]).is_err());
    }
}
