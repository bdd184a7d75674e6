//! What blocked PEs wait for, for deadlock and hang reports: the blocked
//! state a PE shows per communicator, described with the names of its
//! receive directions and the neighbours that send to them, and the
//! seed's pointer dump of every IPCQ ring.

use super::Machine;
use crate::hw::blocked::{Blocked, RxDir};
use crate::hw::ipcq::CommId;
use crate::topology::PeCoord;

impl Machine {
    /// Show `pe` as blocked (`Some`) in communicator `comm`, or not.
    #[inline]
    pub(super) fn set_blocked(&self, pe: PeCoord, comm: CommId, what: Option<Blocked>) {
        let st = self.pe(pe);
        if comm == CommId::WORLD {
            // The ring step's own field, without a lane to build and drop.
            *st.blocked_on.lock() = what;
        } else {
            *st.lane(comm).blocked_on().lock() = what;
        }
    }

    /// What each blocked PE is waiting for (for deadlock reports), a
    /// communicator other than the default one named.
    pub fn blocked_report(&self) -> Vec<(PeCoord, String)> {
        let mut blocked = Vec::new();
        for (pe, st) in self.pes() {
            for (comm, lane) in st.every_lane() {
                if let Some(w) = lane.blocked_on().lock().clone() {
                    blocked.push((pe, comm, w));
                }
            }
        }
        let mut v: Vec<_> = blocked
            .into_iter()
            .map(|(pe, comm, w)| {
                let rx_name = |rx: RxDir| self.rx_name(pe, comm, rx);
                let what = w.describe(rx_name, |dir| self.expected_senders(pe, comm, dir));
                let what = if comm == CommId::WORLD {
                    what
                } else {
                    format!("{comm}: {what}")
                };
                (pe, what)
            })
            .collect();
        v.sort();
        v
    }

    /// The name of `pe`'s receive direction `rx` in `comm` (`None`: any).
    fn rx_name(&self, pe: PeCoord, comm: CommId, rx: RxDir) -> Option<String> {
        let i = rx? as usize;
        let lane = self.pe(pe).lane(comm);
        let port = lane.ipcq().lock();
        port.as_ref()?.rx.get(i).map(|(name, _)| name.to_string())
    }

    /// The seed's pointer dump of every IPCQ ring at simulated time `now`:
    /// messages sent (tail) and taken (head), waiting, slots held, credits
    /// on their way back. A ring of a communicator other than the default
    /// one is named with it.
    pub fn ipcq_dump(&self, now: crate::units::Ps) -> Vec<String> {
        let mut out = Vec::new();
        for (pe, st) in self.pes() {
            for (comm, lane) in st.every_lane() {
                if let Some(port) = lane.ipcq().lock().as_ref() {
                    let group = if comm == CommId::WORLD {
                        String::new()
                    } else {
                        format!(" ({comm})")
                    };
                    for (dir, q) in &port.rx {
                        out.push(format!("{pe}{group} rx {dir}: {}", q.lock().pointers(now)));
                    }
                }
            }
        }
        out
    }

    fn expected_senders(&self, pe: PeCoord, comm: CommId, dir: Option<&str>) -> String {
        let mut senders = Vec::new();
        for (p, st) in self.pes() {
            let Some(lane) = st.find_lane(comm) else {
                continue;
            };
            let port = lane.ipcq().lock();
            for e in port.iter().flat_map(|port| port.tx.values()) {
                if e.peer == pe && dir.is_none_or(|want| &*e.peer_dir == want) {
                    senders.push(p.to_string());
                }
            }
        }
        senders.sort();
        if senders.is_empty() {
            "nobody (no neighbour sends to this direction)".into()
        } else {
            senders.join(" or ")
        }
    }
}
