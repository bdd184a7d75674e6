//! Installing a communicator's IPCQ (seed ADR-0023): the neighbour
//! tables' rings built in each receiver's buffer space, extended by later
//! algorithms of the same group (rings shared where the directions are
//! equal), and charged to the run's memory budget — asked up front for a
//! full mesh, before its tables are made. Sending and receiving on the
//! rings is [`super::messaging`].

use super::{IpcqSettings, Machine};
use crate::ccl::tables::{Neighbour, NeighbourTables};
use crate::engine::Signal;
use crate::error::HwError;
use crate::hw::ipcq::{CommId, IpcqPort, RxQueue, SharedQueue, TxEntry};
use crate::topology::{NodeId, PeCoord};
use std::collections::BTreeMap;
use std::sync::Arc;

impl Machine {
    /// Install IPCQ neighbour tables in communicator `comm`. Receive
    /// queues are allocated in each receiver's buffer space.
    pub fn install_ipcq(
        &self,
        comm: CommId,
        tables: &NeighbourTables,
        s: IpcqSettings,
    ) -> Result<(), HwError> {
        self.extend_ipcq(comm, tables, s).map(|_| ())
    }

    /// Add the directions of `tables` to communicator `comm`'s installed
    /// IPCQ (the tables of another algorithm of the same process group).
    /// A direction already installed there is shared if it leads to the
    /// same peer, arrives under the same name and has the same slots
    /// (`s`); any other overlap is an [`HwError::IpcqConflict`], checked
    /// for every direction before anything is added. Other communicators'
    /// directions never conflict: each has its own. Returns the number of
    /// directions added.
    pub fn extend_ipcq(
        &self,
        comm: CommId,
        tables: &NeighbourTables,
        s: IpcqSettings,
    ) -> Result<usize, HwError> {
        self.check_routes(tables)?;
        // Which directions are new; conflicts first, before any change.
        let mut new = Vec::new();
        for (&pe, dirs) in tables {
            for n in dirs {
                let conflict = |why: String| HwError::IpcqConflict {
                    pe: pe.to_string(),
                    dir: n.dir.clone(),
                    why,
                };
                let installed = self
                    .pe(pe)
                    .lane(comm)
                    .ipcq()
                    .lock()
                    .as_ref()
                    .and_then(|p| p.tx.get(&n.dir).cloned());
                if let Some(entry) = installed {
                    entry
                        .shared_by(n.peer, &n.peer_dir, s.ring_into(n.peer))
                        .map_err(conflict)?;
                    continue;
                }
                let taken = self
                    .pe(n.peer)
                    .lane(comm)
                    .ipcq()
                    .lock()
                    .as_ref()
                    .is_some_and(|p| p.rx_index(&n.peer_dir).is_some());
                if taken {
                    return Err(conflict(format!(
                        "{} already receives another sender's messages as {}",
                        n.peer, n.peer_dir
                    )));
                }
                new.push((pe, n));
            }
        }
        // The host structures of the new rings, charged before any is
        // built: a full mesh's p(p - 1) rings are ~1 KiB each, so a run
        // that cannot hold them stops here, saying so, instead of
        // exhausting the machine.
        let (charge, who) = rings_charge(new.len() as u64, s.n_slots);
        self.budget
            .charge(crate::budget::MemoryUse::IpcqRings, charge, who)?;
        self.ipcq_charged
            .fetch_add(charge, std::sync::atomic::Ordering::Relaxed);
        // Each new direction's credit latency is a path search (below):
        // all of them first, on two threads where there are many.
        let pairs: Vec<(NodeId, NodeId)> = new
            .iter()
            .map(|&(pe, n)| (NodeId::Pe(pe), NodeId::Pe(n.peer)))
            .collect();
        self.router.find_paths(&pairs);
        let mut ports: BTreeMap<PeCoord, IpcqPort> = BTreeMap::new();
        for &(pe, n) in &new {
            let (queue, rx_queue) = self.new_ring(pe, n, &s)?;
            let peer_port = ports
                .entry(n.peer)
                .or_insert_with(|| self.port_to_extend(n.peer, comm));
            peer_port.rx.push((n.peer_dir.as_str().into(), rx_queue));
            let peer_notify = peer_port.rx_notify.clone();
            let entry = TxEntry {
                peer: n.peer,
                peer_dir: n.peer_dir.as_str().into(),
                queue,
                peer_notify,
                slot_size: s.slot_size,
            };
            let port = ports
                .entry(pe)
                .or_insert_with(|| self.port_to_extend(pe, comm));
            port.tx.insert(n.dir.clone(), Arc::new(entry));
        }
        for (pe, port) in ports {
            let lane = self.pe(pe).lane(comm);
            let mut slot = lane.ipcq().lock();
            match slot.as_mut() {
                None => *slot = Some(port),
                Some(have) => have.absorb(port),
            }
        }
        if !new.is_empty() {
            *self.ipcq_rings_of.lock().entry(comm).or_default() += new.len() as u64;
            self.ipcq_changes
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(new.len())
    }

    /// The ring of `pe`'s direction `n` as `s` shapes it: its slots in the
    /// peer's buffer space, its credit latency, its number; its sender's
    /// end and its receiver's (see [`RxQueue::ends`]).
    fn new_ring(
        &self,
        pe: PeCoord,
        n: &Neighbour,
        s: &IpcqSettings,
    ) -> Result<(SharedQueue, SharedQueue), HwError> {
        let shape = s.ring_into(n.peer);
        let (space, len) = (shape.space, shape.bytes());
        let base = {
            let alloc = self.allocator(space);
            let mut a = alloc.lock();
            a.alloc(len).ok_or_else(|| HwError::OutOfMemory {
                space: format!(
                    "{space} (IPCQ {} slots x {} bytes for {} dir {})",
                    s.n_slots, s.slot_size, n.peer, n.peer_dir
                ),
                len,
                free: a.free_bytes(),
            })?
        };
        {
            let mut held = self.ipcq_held.lock();
            let h = held.entry(space).or_default();
            *h = (h.0 + 1, h.1 + len);
        }
        // A credit goes back from the peer to the sender.
        let credit_latency = self
            .router
            .latency_back(NodeId::Pe(pe), NodeId::Pe(n.peer))?;
        // Numbered in the order the tables list them, so the same on a
        // machine split or not.
        let number = self
            .ipcq_rings
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let sender = (pe, n.dir.as_str().into());
        let ring = RxQueue::new(number, shape, base, credit_latency, sender);
        Ok(ring.ends(self.partition_of(pe.sip), self.partition_of(n.peer.sip)))
    }

    /// With links down (`overrides.links[].down`), every direction of
    /// `tables` must still have a route from its PE to its peer: refused
    /// here, naming the pair, rather than when a message is first sent.
    fn check_routes(&self, tables: &NeighbourTables) -> Result<(), HwError> {
        if !self.topo.spec.overrides.links.iter().any(|l| l.down) {
            return Ok(());
        }
        for (&pe, dirs) in tables {
            for n in dirs {
                if let Err(e) = self.router.find_path(NodeId::Pe(pe), NodeId::Pe(n.peer)) {
                    let down: Vec<_> = self
                        .topo
                        .spec
                        .overrides
                        .links
                        .iter()
                        .filter(|l| l.down)
                        .map(|l| l.between.clone())
                        .collect();
                    return Err(HwError::NoRoute(format!(
                        "IPCQ direction {} of {pe} leads to {}, which no route reaches with the \
                         links of overrides.links down ({down:?}): {e}; bring a link back up or \
                         choose an algorithm whose neighbours stay connected",
                        n.dir, n.peer
                    )));
                }
            }
        }
        Ok(())
    }

    /// Whether the run's budget could hold tables of up to `rings` IPCQ
    /// rings of `n_slots` slots now, besides those installed (nothing
    /// taken; [`Machine::extend_ipcq`] charges the new ones). Asked before
    /// a full mesh's neighbour tables are made: at 4096 ranks they and the
    /// install's checks alone are ~3.5 GB of the ~16 GiB its rings would
    /// need. The rings installed in communicator `comm` are taken off, as
    /// if the tables shared them: a second full-mesh algorithm of the same
    /// group adds none (another group's rings are its own).
    pub fn afford_ipcq(&self, comm: CommId, rings: u64, n_slots: u32) -> Result<(), HwError> {
        let installed = self.ipcq_rings_of.lock().get(&comm).copied().unwrap_or(0);
        let (bytes, who) = rings_charge(rings.saturating_sub(installed), n_slots);
        self.budget
            .afford(crate::budget::MemoryUse::IpcqRings, bytes, who)?;
        Ok(())
    }

    /// An empty port whose additions go to `pe`'s in `comm`: it shares the
    /// notification of that installed port, if any, so a sender's
    /// [`TxEntry::peer_notify`] is the one the receiver waits on.
    fn port_to_extend(&self, pe: PeCoord, comm: CommId) -> IpcqPort {
        let rx_notify = match self.pe(pe).lane(comm).ipcq().lock().as_ref() {
            Some(have) => have.rx_notify.clone(),
            None => Signal::new(),
        };
        IpcqPort {
            rx_notify,
            ..Default::default()
        }
    }
}

/// The budget charge of `rings` IPCQ rings of `n_slots` slots, and the
/// words that name it in a refusal.
fn rings_charge(rings: u64, n_slots: u32) -> (u64, impl std::fmt::Display) {
    let each = crate::hw::ipcq::ring_host_bytes(n_slots);
    let who = std::fmt::from_fn(move |f| {
        write!(
            f,
            "{rings} new rings of {n_slots} slots, {} of host memory each",
            crate::budget::human_bytes(each)
        )
    });
    (rings.saturating_mul(each), who)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ccl::{BufferKind, NeighbourTopology};
    use crate::config::TopologySpec;

    /// A full mesh's rings are charged to the run's budget before any is
    /// built: refused whole (nothing installed, nothing charged) when the
    /// budget cannot hold them, charged exactly and given back with the
    /// machine when it can.
    #[test]
    fn a_full_mesh_too_big_for_the_budget_is_refused_before_it_is_installed() {
        use crate::budget::{MemoryBudget, MemoryUse};
        let mut spec = TopologySpec::default_embedded();
        spec.system.sips.count = 16;
        let topo = Arc::new(crate::topology::build(&spec).unwrap());
        let pes = PeCoord::first_of_sips(16);
        let tables =
            crate::ccl::tables::builtin(NeighbourTopology::FullMesh, &pes, (16, 1)).unwrap();
        let settings = IpcqSettings::new(BufferKind::Hbm, 4, 1 << 10);
        let rings = 16 * 15;
        let needed = rings * crate::hw::ipcq::ring_host_bytes(4);
        assert_eq!(needed, rings * 1024);

        let budget = Arc::new(MemoryBudget::new(needed - 1));
        let small = Machine::with_options(topo.clone(), false, budget.clone());
        // Refused by the question asked before the tables are made, too.
        let full_mesh = crate::ccl::tables::rings_at_most(NeighbourTopology::FullMesh, 16);
        let asked = small
            .afford_ipcq(CommId::WORLD, full_mesh, 4)
            .unwrap_err()
            .to_string();
        assert!(asked.contains("240 new rings"), "{asked}");
        let err = small
            .install_ipcq(CommId::WORLD, &tables, settings)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("IPCQ rings (240 new rings of 4 slots, 1.0 KiB of host memory each) asked for 240.0 KiB"),
            "{err}"
        );
        assert_eq!(budget.used_by(MemoryUse::IpcqRings), 0);
        assert!(small.pe(pes[0]).ipcq.lock().is_none(), "nothing installed");

        let budget = Arc::new(MemoryBudget::new(needed));
        let machine = Machine::with_options(topo, false, budget.clone());
        machine.afford_ipcq(CommId::WORLD, full_mesh, 4).unwrap();
        machine
            .install_ipcq(CommId::WORLD, &tables, settings)
            .unwrap();
        assert_eq!(budget.used_by(MemoryUse::IpcqRings), needed);
        // A second full mesh of the same group would share every ring.
        machine.afford_ipcq(CommId::WORLD, full_mesh, 4).unwrap();
        // Installed again (another algorithm's same tables): shared, not
        // charged twice.
        assert_eq!(
            machine
                .extend_ipcq(CommId::WORLD, &tables, settings)
                .unwrap(),
            0
        );
        assert_eq!(budget.used_by(MemoryUse::IpcqRings), needed);
        drop(machine);
        assert_eq!(budget.used_by(MemoryUse::IpcqRings), 0);
    }
}
