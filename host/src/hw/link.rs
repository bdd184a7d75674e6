//! Links under contention: per-link FIFO reservation (as ASTRA-sim's
//! analytical backend does).
//!
//! A transfer of `s` bytes entering a path at time `t0` is cut-through
//! (pipelined): its head reaches link `i` after the latencies of links
//! `0..i`; link `i` is busy for `s / bandwidth_i` from when it can start
//! (head arrived and link free) and cannot finish before the tail has left
//! link `i−1`. Uncontended this gives exactly
//! `t0 + Σ latency + s / min(bandwidth)`; under contention a link serves
//! reservations one after another, so its rate never exceeds its bandwidth.
//! Reservations are made when a transfer starts, in simulated-time order.
//! Cost is O(hops) per transfer, independent of size.

use crate::topology::{LinkId, Topology};
use crate::units::{self, Ps, Rate, TimeOverflow};

#[derive(Debug, Clone, Default)]
struct LinkState {
    free_at: Ps,
}

/// Occupancy of every directed link.
#[derive(Debug)]
pub struct LinkTable {
    state: Vec<LinkState>,
}

impl LinkTable {
    pub fn new(topo: &Topology) -> Self {
        LinkTable {
            state: vec![LinkState::default(); topo.links.len()],
        }
    }

    /// Reserve `path` for `bytes` starting at `t0`; returns when the last
    /// byte arrives. An empty path (a copy within one PE) takes
    /// `bytes / local_rate`.
    /// When `busy` is given, each link's reserved interval is appended to
    /// it (for the trace).
    pub fn reserve(
        &mut self,
        topo: &Topology,
        path: &[LinkId],
        t0: Ps,
        bytes: u64,
        local_rate: Rate,
        mut busy: Option<&mut Vec<(LinkId, Ps, Ps)>>,
    ) -> Result<Ps, TimeOverflow> {
        if path.is_empty() {
            return units::add(t0, local_rate.duration_ps(bytes)?);
        }
        let mut head = t0; // when the head reaches the current link
        let mut prev_tail: Ps = t0; // when the tail left the previous link
        for &id in path {
            let link = &topo.links[id as usize];
            let st = &mut self.state[id as usize];
            let start = head.max(st.free_at);
            let end = units::add(start, link.rate.duration_ps(bytes)?)?.max(prev_tail);
            head = units::add(start, link.latency)?;
            prev_tail = units::add(end, link.latency)?;
            st.free_at = end;
            if let Some(b) = busy.as_deref_mut() {
                b.push((id, start, end));
            }
        }
        Ok(prev_tail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TopologySpec;
    use crate::routing::PathRouter;
    use crate::topology::build;
    use std::sync::Arc;

    /// The sip0 → sip1 PE path and its (Σ latency, bottleneck).
    fn setup() -> (Arc<Topology>, crate::routing::Path, (Ps, Option<Rate>)) {
        let t = Arc::new(build(&TopologySpec::default_embedded()).unwrap());
        let r = PathRouter::new(t.clone());
        let p = r
            .find_path(
                "sip0.cube0.pe0".parse().unwrap(),
                "sip1.cube0.pe0".parse().unwrap(),
            )
            .unwrap();
        let d = r.distance(&p);
        (t, p, (d.latency_ps, d.bottleneck))
    }

    #[test]
    fn uncontended_transfer_matches_closed_form_exactly() {
        let (t, p, (lat, bw)) = setup();
        for bytes in [1u64, 8, 1000, 1 << 20] {
            let mut fresh = LinkTable::new(&t);
            let done = fresh
                .reserve(&t, &p, 1000, bytes, Rate::from_giga_per_s(1.0), None)
                .unwrap();
            assert_eq!(
                done,
                1000 + lat + bw.unwrap().duration_ps(bytes).unwrap(),
                "{bytes} bytes"
            );
        }
    }

    #[test]
    fn two_transfers_share_the_bottleneck() {
        let (t, p, (lat, bw)) = setup();
        let mut lt = LinkTable::new(&t);
        let s = 1 << 20;
        let one = Rate::from_giga_per_s(1.0);
        let a = lt.reserve(&t, &p, 0, s, one, None).unwrap();
        let b = lt.reserve(&t, &p, 0, s, one, None).unwrap();
        let per = bw.unwrap().duration_ps(s).unwrap();
        assert_eq!(a, lat + per);
        // The second one waits for the first on every link: it ends one
        // bottleneck-serialisation later (rate through a link <= bandwidth).
        assert_eq!(b, a + per);
        // A transfer that would end past the clock's horizon is refused.
        assert!(lt.reserve(&t, &p, u64::MAX - 5, s, one, None).is_err());
    }
}
