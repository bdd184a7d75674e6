//! Routing: which directed links a transfer from node A to node B uses,
//! and where an address lives. Nothing else.
//!
//! - [`PathRouter`] answers path queries over the four view projections
//!   of the graph ([`crate::topology::View`]: full, noc, m_cpu_dma,
//!   cube_local), each an adjacency list that leaves out the view's
//!   excluded edge kinds.
//! - [`AddressResolver`] maps a physical address to its memory space and
//!   node, and finds a cube's M_CPU, a SIP's IO_CPU and PCIe endpoints.
//! - [`metrics`] computes the PE-to-PE diameter for `topology show`.
//! - Inside: `adjacency` (each view's out-links), `sip_bound` (the SIP
//!   facts of the A* bound) and `sip_ports` (exact least latencies between
//!   SIPs that are not neighbours, and the bound of their searches).
//!
//! **Path choice** (documented contract, tested): the shortest path by
//! total link latency, then by hop count. Among paths equal in both, at
//! every node the path arrives by a north–south link (a NoC hop in y,
//! an N/S UCIe link, an N/S inter-SIP link) rather than any other, then by
//! the link with the lowest id (build order). Inside one cube's NoC (a
//! full router grid) this is dimension-order X-then-Y routing. The rule is
//! local to each node, so across cubes it does not give a dimension order
//! at the cube level: from cube (0,0) to cube (1,1) of the default chip,
//! the destination PE is reached from its cube's west side, so the path
//! goes south first, then east (pinned by a test).

mod adjacency;
pub mod metrics;
mod paths;
mod resolver;
mod sip_bound;
mod sip_ports;

pub use paths::{Distance, Path, PathRouter, Warming};
pub use resolver::{AddressResolver, Resolved};

use crate::error::HwError;

/// A path query that cannot be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("unknown node {0}")]
    UnknownNode(String),
    #[error("no path from {from} to {to} in view '{view}'")]
    NoPath {
        from: String,
        to: String,
        view: &'static str,
    },
    #[error(transparent)]
    Address(#[from] HwError),
}
