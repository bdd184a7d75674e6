//! Lower bounds of collectives on the modelled machine: the report's
//! `bound` column, which no algorithm can beat (efficiency = bound / time
//! is never above 100 %).
//!
//! All-reduce of `n` bytes per rank over `p ≥ 2` ranks (rank r on SIP r):
//!
//! * **Data.** Every element of rank r's result depends on the other
//!   ranks' inputs, which r does not hold: at least `n` bytes must enter
//!   r's SIP, through the inter-SIP links into it (total rate `B_in`), and
//!   none can arrive before one DMA set-up and one inter-SIP link latency:
//!   `T ≥ setup + λ + n / B_in`.
//! * **Distance.** Rank r's result depends on the farthest rank's input,
//!   which crosses at least `D` inter-SIP links (the SIP-hop diameter of
//!   the ranks): `T ≥ setup + D · λ`.
//!
//! `bound = max` of the two. It counts only inter-SIP figures (the NoC,
//! UCIe and HBM add to every real path), so it is a true bound but not a
//! tight one; the ring's α-β model is not a bound (the seed's naive ring
//! beats it at small sizes) and is not reported as one.
//!
//! The other collectives by the same two arguments, with the bytes that
//! must *enter* some rank's SIP (over `B_in`) and those that must *leave*
//! one (over `B_out`, the inter-SIP links out of the least connected
//! SIP), `S` being nccl-tests' size (the larger buffer of a rank):
//!
//! | collective | must enter | must leave | distance |
//! |---|---|---|---|
//! | all-reduce | S | S | D |
//! | all-gather | (p−1)/p·S (the others' blocks) | S/p (its block, once) | D |
//! | reduce-scatter | S/p (its block, combined) | (p−1)/p·S (every other block, in some form) | D |
//! | broadcast | S (a non-root) | S (the root) | ⌈D/2⌉ |
//! | reduce | S (the root) | S (a non-root) | ⌈D/2⌉ |
//! | all-to-all | (p−1)/p·S | (p−1)/p·S | D |
//! | sendrecv | S | S | 1 |
//!
//! A rooted collective's distance is the root's eccentricity, at least
//! the radius of the ranks' graph, which is at least half its diameter.
//! Sizes are what a rank's buffer holds; a block of `S/p` is rounded down.

use crate::ccl::collective::Collective;
use crate::config::topology::SipTopology;
use crate::topology::{LinkKind, Topology};
use crate::units::{Ps, Rate};

/// The machine figures the all-reduce bound needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CollectiveBound {
    /// DMA set-up of one command (ps).
    pub setup: Ps,
    /// Latency of one inter-SIP link (ps).
    pub link_latency: Ps,
    /// SIP-hop diameter of the ranks.
    pub diameter: u32,
    /// Total rate of the inter-SIP links into the least connected rank's
    /// SIP.
    pub ingress: Rate,
    /// Total rate of the inter-SIP links out of the least connected
    /// rank's SIP.
    pub egress: Rate,
}

impl CollectiveBound {
    /// The figures for ranks `0..world_size` on SIPs `0..world_size` of
    /// `topo` (None: fewer than two ranks, or no inter-SIP link).
    pub fn of(topo: &Topology, world_size: u32, setup: Ps) -> Option<CollectiveBound> {
        if world_size < 2 {
            return None;
        }
        let spec = &topo.spec;
        let mut ingress = vec![0.0f64; world_size as usize];
        let mut egress = vec![0.0f64; world_size as usize];
        let mut link_latency = Ps::MAX;
        for l in &topo.links {
            let (from, to) = topo.ends(l);
            let (from, to) = (from.sip(), to.sip());
            if l.kind == LinkKind::InterSip && from != to {
                if to < world_size {
                    ingress[to as usize] += l.rate.giga_per_s();
                    link_latency = link_latency.min(l.latency);
                }
                if from < world_size {
                    egress[from as usize] += l.rate.giga_per_s();
                }
            }
        }
        let least = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
        let (least_in, least_out) = (least(&ingress), least(&egress));
        if least_in <= 0.0 || least_out <= 0.0 {
            return None;
        }
        Some(CollectiveBound {
            setup,
            link_latency,
            diameter: sip_diameter(
                spec.system.sips.topology,
                spec.n_sips(),
                spec.sip_grid(),
                world_size,
            ),
            ingress: Rate::from_giga_per_s(least_in),
            egress: Rate::from_giga_per_s(least_out),
        })
    }

    /// The bound (ps) of `collective` (the name of a `torch.distributed`
    /// function, [`Collective::from_record_name`], or `sendrecv`) on
    /// `p` ranks moving `bytes` per rank (nccl-tests' size), by the table
    /// above; None for an unknown collective or past the clock's horizon.
    pub fn collective_ps(&self, collective: &str, bytes: u64, p: u32) -> Option<Ps> {
        let p64 = u64::from(p.max(1));
        let block = bytes / p64;
        let amount = |a: Amount| match a {
            Amount::All => bytes,
            Amount::Block => block,
            Amount::Others => bytes - block,
        };
        let row = Row::of(collective)?;
        let (enter, leave) = (amount(row.enter), amount(row.leave));
        let hops = match row.hops {
            Hops::Diameter => self.diameter,
            Hops::Half => self.diameter.div_ceil(2),
            Hops::One => 1,
        };
        let first = self.setup.checked_add(self.link_latency)?;
        let data = first
            .checked_add(self.ingress.duration_ps(enter).ok()?)?
            .max(first.checked_add(self.egress.duration_ps(leave).ok()?)?);
        let distance = self
            .setup
            .checked_add(self.link_latency.checked_mul(hops as u64)?)?;
        Some(data.max(distance))
    }
}

/// How much of a rank's `S` bytes a row of the table counts.
#[derive(Debug, Clone, Copy)]
enum Amount {
    All,
    Block,
    Others,
}

/// The distance a row of the table counts.
#[derive(Debug, Clone, Copy)]
enum Hops {
    Diameter,
    Half,
    One,
}

/// One row of the module's table.
#[derive(Debug, Clone, Copy)]
struct Row {
    enter: Amount,
    leave: Amount,
    hops: Hops,
}

impl Row {
    /// The row of `collective` (a `torch.distributed` function's name or
    /// `sendrecv`).
    fn of(collective: &str) -> Option<Row> {
        use Amount::*;
        let name = Collective::from_record_name(collective).map_or(collective, |c| c.name());
        let (enter, leave, hops) = match name {
            "all_reduce" => (All, All, Hops::Diameter),
            "all_gather" => (Others, Block, Hops::Diameter),
            "reduce_scatter" => (Block, Others, Hops::Diameter),
            "broadcast" | "reduce" => (All, All, Hops::Half),
            "all_to_all" => (Others, Others, Hops::Diameter),
            "sendrecv" => (All, All, Hops::One),
            _ => return None,
        };
        Some(Row { enter, leave, hops })
    }
}

/// The bytes `collective` must move into and out of a SIP and its
/// distance, as the report's header says them, e.g. `broadcast: S in, S
/// out, ceil(D/2) hops` (None for an unknown collective).
pub fn terms(collective: &str) -> Option<String> {
    let row = Row::of(collective)?;
    let amount = |a| match a {
        Amount::All => "S",
        Amount::Block => "S/p",
        Amount::Others => "(p-1)S/p",
    };
    let hops = match row.hops {
        Hops::Diameter => "D hops",
        Hops::Half => "ceil(D/2) hops",
        Hops::One => "1 hop",
    };
    Some(format!(
        "{collective}: {} in, {} out, {hops}",
        amount(row.enter),
        amount(row.leave)
    ))
}

/// Largest SIP-hop distance between two of the SIPs `0..ranks` of a
/// `kind` SIP network of `n` SIPs on a `w × h` grid.
pub fn sip_diameter(kind: SipTopology, n: u32, (w, h): (u32, u32), ranks: u32) -> u32 {
    let dist = |a: u32, b: u32| -> u32 {
        match kind {
            SipTopology::Ring1d => {
                let d = a.abs_diff(b);
                d.min(n - d)
            }
            SipTopology::Torus2d | SipTopology::Mesh2dNoWrap => {
                let (dx, dy) = ((a % w).abs_diff(b % w), (a / w).abs_diff(b / w));
                if kind == SipTopology::Torus2d {
                    dx.min(w - dx) + dy.min(h - dy)
                } else {
                    dx + dy
                }
            }
        }
    };
    if ranks == n {
        // Every SIP takes part: the network's own diameter.
        return match kind {
            SipTopology::Ring1d => n / 2,
            SipTopology::Torus2d => w / 2 + h / 2,
            SipTopology::Mesh2dNoWrap => (w - 1) + (h - 1),
        };
    }
    (0..ranks)
        .flat_map(|a| (a + 1..ranks).map(move |b| (a, b)))
        .map(|(a, b)| dist(a, b))
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TopologySpec;

    #[test]
    fn diameters_of_rings_tori_and_meshes() {
        use SipTopology::*;
        assert_eq!(sip_diameter(Ring1d, 8, (8, 1), 8), 4);
        assert_eq!(sip_diameter(Ring1d, 8, (8, 1), 3), 2);
        assert_eq!(sip_diameter(Torus2d, 16, (4, 4), 16), 4);
        assert_eq!(sip_diameter(Mesh2dNoWrap, 16, (4, 4), 16), 6);
        assert_eq!(
            sip_diameter(Mesh2dNoWrap, 16, (4, 4), 5),
            4,
            "0 and 4: (0,0)..(0,1) and 3..4"
        );
    }

    #[test]
    fn the_header_says_each_collective_s_own_terms() {
        assert_eq!(
            terms("all_reduce").unwrap(),
            "all_reduce: S in, S out, D hops"
        );
        assert_eq!(
            terms("broadcast").unwrap(),
            "broadcast: S in, S out, ceil(D/2) hops"
        );
        assert_eq!(
            terms("all_gather_into_tensor").unwrap(),
            "all_gather_into_tensor: (p-1)S/p in, S/p out, D hops"
        );
        assert_eq!(
            terms("reduce_scatter").unwrap(),
            "reduce_scatter: S/p in, (p-1)S/p out, D hops"
        );
        assert_eq!(terms("sendrecv").unwrap(), "sendrecv: S in, S out, 1 hop");
        assert_eq!(terms("gemm"), None);
    }

    #[test]
    fn the_default_ring_bound() {
        // 4 SIPs on a ring, 2 links of 100 GB/s into each, 500 ns each.
        let topo = crate::topology::build(&TopologySpec::default_embedded()).unwrap();
        let b = CollectiveBound::of(&topo, 4, 20_000).unwrap();
        assert_eq!((b.diameter, b.link_latency), (2, 500_000));
        assert_eq!(b.ingress.giga_per_s(), 200.0);
        // Small: two hops. Large: 1 MB through 200 GB/s = 5 us.
        let ar = |n| b.collective_ps("all_reduce", n, 4);
        assert_eq!(ar(16), Some(20_000 + 2 * 500_000));
        assert_eq!(ar(1_000_000), Some(20_000 + 500_000 + 5_000_000));
        // All-gather of 4 MB: 3 MB of the others' blocks enter a SIP.
        let ag = b.collective_ps("all_gather", 4_000_000, 4);
        assert_eq!(ag, Some(20_000 + 500_000 + 15_000_000));
        // Reduce-scatter of 4 MB: 3 MB of other blocks leave a SIP.
        assert_eq!(b.collective_ps("reduce_scatter", 4_000_000, 4), ag);
        // A broadcast's root is at least half the diameter from some rank.
        assert_eq!(
            b.collective_ps("broadcast", 16, 4),
            Some(20_000 + 500_000 + 80)
        );
        assert_eq!(
            b.collective_ps("sendrecv", 16, 4),
            Some(20_000 + 500_000 + 80)
        );
        assert_eq!(b.collective_ps("gossip", 16, 4), None);
        assert_eq!(CollectiveBound::of(&topo, 1, 20_000), None);
    }
}
