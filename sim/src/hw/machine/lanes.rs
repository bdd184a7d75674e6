//! A PE's state per communicator ([`CommId`]): its IPCQ port, the
//! direction it last sent on, its receive claims, what its kernel is
//! blocked on and that kernel's commands in flight. The default communicator's lives in the PE's own state,
//! laid out for the ring step (see `PeState`); every other
//! communicator's is a [`Lane`] of its own, made when the communicator's
//! tables are installed on the PE (or first looked up), found by a short
//! search, so the default group pays one predictable branch.

use super::{Claim, PeState};
use crate::engine::lock::{Mutex, OneThread};
use crate::engine::Event;
use crate::hw::blocked::{Blocked, Dir};
use crate::hw::ipcq::{CommId, IpcqPort, SendTarget};
use std::collections::VecDeque;
use std::sync::Arc;

/// One non-default communicator's IPCQ state on a PE.
#[derive(Default)]
pub(super) struct Lane {
    ipcq: Mutex<Option<IpcqPort>>,
    last_tx: OneThread<Option<(Dir, SendTarget)>>,
    claims: OneThread<smallvec::SmallVec<[Claim; 2]>>,
    blocked_on: OneThread<Option<Blocked>>,
    /// Its kernel's commands in flight (see `PeState::outstanding`).
    outstanding: OneThread<VecDeque<Event>>,
}

/// The other communicators' lanes of a PE, by communicator (ascending, so
/// reports list them in a fixed order).
pub(super) type Lanes = Mutex<Vec<(CommId, Arc<Lane>)>>;

/// A PE's IPCQ state in one communicator.
pub(super) enum LaneRef<'a> {
    World(&'a PeState),
    Group(Arc<Lane>),
}

impl LaneRef<'_> {
    /// The PE's port in the communicator (`None`: no table installed).
    #[inline]
    pub(super) fn ipcq(&self) -> &Mutex<Option<IpcqPort>> {
        match self {
            LaneRef::World(st) => &st.ipcq,
            LaneRef::Group(l) => &l.ipcq,
        }
    }

    #[inline]
    pub(super) fn last_tx(&self) -> &OneThread<Option<(Dir, SendTarget)>> {
        match self {
            LaneRef::World(st) => &st.last_tx,
            LaneRef::Group(l) => &l.last_tx,
        }
    }

    #[inline]
    pub(super) fn claims(&self) -> &OneThread<smallvec::SmallVec<[Claim; 2]>> {
        match self {
            LaneRef::World(st) => &st.claims,
            LaneRef::Group(l) => &l.claims,
        }
    }

    #[inline]
    pub(super) fn outstanding(&self) -> &OneThread<VecDeque<Event>> {
        match self {
            LaneRef::World(st) => &st.outstanding,
            LaneRef::Group(l) => &l.outstanding,
        }
    }

    #[inline]
    pub(super) fn blocked_on(&self) -> &OneThread<Option<Blocked>> {
        match self {
            LaneRef::World(st) => &st.blocked_on,
            LaneRef::Group(l) => &l.blocked_on,
        }
    }
}

impl PeState {
    /// This PE's state in communicator `comm`, made empty if it has none.
    #[inline(always)]
    pub(super) fn lane(&self, comm: CommId) -> LaneRef<'_> {
        if comm == CommId::WORLD {
            return LaneRef::World(self);
        }
        LaneRef::Group(self.group_lane(comm))
    }

    /// This PE's state in communicator `comm`, if it has any.
    pub(super) fn find_lane(&self, comm: CommId) -> Option<LaneRef<'_>> {
        if comm == CommId::WORLD {
            return Some(LaneRef::World(self));
        }
        let lanes = self.lanes.lock();
        let i = lanes.binary_search_by_key(&comm, |(c, _)| *c).ok()?;
        Some(LaneRef::Group(lanes[i].1.clone()))
    }

    #[cold]
    fn group_lane(&self, comm: CommId) -> Arc<Lane> {
        let mut lanes = self.lanes.lock();
        match lanes.binary_search_by_key(&comm, |(c, _)| *c) {
            Ok(i) => lanes[i].1.clone(),
            Err(i) => {
                let lane = Arc::new(Lane::default());
                lanes.insert(i, (comm, lane.clone()));
                lane
            }
        }
    }

    /// Every communicator's state on this PE, the default's first, then
    /// by communicator.
    pub(super) fn every_lane(&self) -> Vec<(CommId, LaneRef<'_>)> {
        let mut all = vec![(CommId::WORLD, LaneRef::World(self))];
        all.extend(
            self.lanes
                .lock()
                .iter()
                .map(|(c, l)| (*c, LaneRef::Group(l.clone()))),
        );
        all
    }
}
