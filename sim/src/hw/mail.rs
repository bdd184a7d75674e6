//! What one partition of a split machine tells another (see
//! `hw::machine::partition`): mail posted through the windowed driver
//! ([`crate::engine::windows::Post`]) for a time at least the lookahead
//! ahead. A transfer whose route leaves its partition books every hop in
//! its own partition's link table, as one table would, and asks each
//! partition whose links it crossed to book the same intervals
//! ([`Mail::Book`]); one whose bytes land in another partition's memory
//! has them landed there ([`Mail::Land`]), with the IPCQ message they
//! are, if any; a freed slot of a ring whose sender is in another
//! partition goes back to the sender's copy of the ring ([`Mail::Credit`]).

use super::data_plane::{Culprit, StagedCell};
use super::dtype::Dtype;
use super::ipcq::SharedQueue;
use crate::address::Space;
use crate::engine::windows::Post;
use crate::engine::Signal;
use crate::topology::{LinkId, PeCoord};
use crate::units::Ps;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

/// See the module doc.
pub enum Mail {
    /// Intervals another partition's transfer holds on links of this one:
    /// (link, start, end).
    Book(Box<[(LinkId, Ps, Ps)]>),
    /// A transfer's bytes land in this partition's memory at the mail's
    /// time.
    Land(Box<Landing>),
    /// A slot of this partition's copy of a ring is free again (visible
    /// to the sender at the mail's time).
    Credit { queue: SharedQueue, slot: u32 },
}

/// A transfer landing in another partition.
pub struct Landing {
    /// Its source bytes, held when it started.
    pub staged: Arc<StagedCell>,
    pub dst: (Space, u64),
    pub who: Culprit,
    /// The IPCQ message it carries, if it is a send.
    pub message: Option<Message>,
    /// Its place among the keyed events of its picosecond (the
    /// transfer's [`crate::engine::OrderKey`], the same in both partitions).
    pub key: crate::engine::OrderKey,
}

/// An IPCQ message as its receiver's copy of the ring records it.
pub struct Message {
    /// The receiver's copy of the ring, and its port's notification.
    pub queue: SharedQueue,
    pub notify: Signal,
    pub slot: u32,
    pub shape: super::machine::Shape,
    pub dtype: Dtype,
    pub from: PeCoord,
    pub seq: u64,
}

thread_local! {
    /// Per partition this thread runs, its post (set when the partition
    /// is made).
    static POSTS: RefCell<Vec<Option<Rc<Post<Mail>>>>> = const { RefCell::new(Vec::new()) };
}

/// Make `post` the way partition `part` posts on this thread.
pub fn set_post(part: usize, post: Rc<Post<Mail>>) {
    POSTS.with(|p| {
        let mut p = p.borrow_mut();
        if p.len() <= part {
            p.resize(part + 1, None);
        }
        p[part] = Some(post);
    });
}

/// Post `mail` from the running executor's partition to partition `to`
/// for time `at`.
///
/// # Panics
///
/// Outside a windowed run's partition (no post was set), or sooner than
/// the lookahead: a bug of the machine model.
pub fn post(to: usize, at: Ps, mail: Mail) {
    let me = crate::engine::partition();
    POSTS.with(|p| {
        let p = p.borrow();
        let post = p
            .get(me)
            .and_then(Option::as_ref)
            .expect("mail for another partition outside a windowed run");
        post.send(to, at, mail);
    });
}
