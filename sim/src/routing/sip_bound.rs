//! [`SipBound`]: the SIP-level facts the path search's A* bound reads
//! (each node's SIP, the least latency out of a SIP, which SIPs are
//! neighbours), and which searches the port tables bound instead.

use crate::topology::Topology;
use crate::units::Ps;

/// A lower bound on the latency left to a node's destination, for the A*
/// search: every node is in a SIP, and a path that starts outside the
/// destination's SIP leaves its SIP by a link of at least `leave_sip`
/// latency. The bound is consistent (it never drops by more than a link's
/// latency along a link), so the search pops every node in the order of
/// its (latency + bound, hops) and finds what Dijkstra finds (see
/// `PathRouter::shortest`) while it explores only the part of the
/// source's SIP from which the way out is short enough.
pub(super) struct SipBound {
    /// The SIP of each node (by node index).
    pub(super) sip_of: Vec<u32>,
    /// The least latency of a link between two SIPs (0: there is none).
    pub(super) leave_sip: Ps,
    /// Whether the bound of a node other than the destination is also at
    /// least the least latency of a link into the destination (every
    /// path to it ends with one). A PE's load from its own cube's HBM
    /// ends with the 100 ns HBM link: without this the search settled
    /// every node of the SIP within 100 ns (UCIe hops to other cubes
    /// included) before the HBM stack; with it, only those within the
    /// path's few NoC nanoseconds. The maximum of two consistent bounds
    /// is consistent. (Off in a test, to compare with the SIP bound
    /// alone.)
    pub(super) arrival_floor: bool,
    /// The SIPs each SIP has a link to, ascending.
    pub(super) neighbours: Vec<Vec<u32>>,
    /// Whether a search between SIPs that are not neighbours is bounded
    /// by `SipPorts` instead (off in a test, to compare with plain
    /// Dijkstra).
    pub(super) by_ports: bool,
}

impl SipBound {
    pub(super) fn new(t: &Topology) -> Self {
        let sip_of: Vec<u32> = t.graph.node_weights().map(|n| n.sip()).collect();
        let mut neighbours = vec![Vec::new(); t.spec.n_sips() as usize];
        let mut leave_sip = Ps::MAX;
        for l in &t.links {
            let (a, b) = (sip_of[l.from.index()], sip_of[l.to.index()]);
            if a != b {
                leave_sip = leave_sip.min(l.latency);
                neighbours[a as usize].push(b);
            }
        }
        for n in &mut neighbours {
            n.sort_unstable();
            n.dedup();
        }
        SipBound {
            sip_of,
            leave_sip: if leave_sip == Ps::MAX { 0 } else { leave_sip },
            arrival_floor: true,
            neighbours,
            by_ports: true,
        }
    }

    /// Whether a search from SIP `a` to SIP `b` is bounded by
    /// `SipPorts`: they are neither the same SIP nor neighbours. (Where
    /// they are, the SIP bound keeps the search to about the two SIPs, and
    /// the ring collectives make no port tables.)
    pub(super) fn by_ports(&self, a: u32, b: u32) -> bool {
        self.by_ports && a != b && self.neighbours[a as usize].binary_search(&b).is_err()
    }

    /// The bytes of the bound of a graph of `n` nodes.
    pub(super) fn bytes(n: u64) -> u64 {
        n * std::mem::size_of::<u32>() as u64
    }

    /// The bound from node `u` to a destination in SIP `to_sip`.
    pub(super) fn from(&self, u: usize, to_sip: u32) -> Ps {
        if self.sip_of[u] == to_sip {
            0
        } else {
            self.leave_sip
        }
    }
}
