//! Links under contention: a calendar of busy intervals per link, with
//! backfilling.
//!
//! A transfer of `s` bytes entering a path at time `t0` is cut-through
//! (pipelined): its head reaches link `i` after the latencies of links
//! `0..i`; link `i` is busy for `s / bandwidth_i` from when it can start
//! and cannot finish before the tail has left link `i−1`. Uncontended this
//! gives exactly `t0 + Σ latency + s / min(bandwidth)`.
//!
//! Each link keeps the intervals it is reserved for. A transfer takes, on
//! each link, the *earliest gap* at or after its head's arrival that is
//! long enough for it — so a link is only held while a transfer's bytes
//! cross it, and a later transfer may use an idle link before a
//! reservation that starts in the future (a short load is not held behind
//! a message still travelling towards the link). Intervals never overlap,
//! so the rate through a link never exceeds its bandwidth; two transfers
//! that want a link at the same time are served one after the other in
//! the order they were issued. Intervals that ended before the time of the
//! newest reservation are dropped (every later head arrives after it).
//! Cost is O(hops × log intervals) per transfer, independent of size.

use crate::topology::{LinkId, Topology};
use crate::units::{self, Ps, Rate, TimeOverflow};
use smallvec::SmallVec;
use std::sync::Arc;

/// The latest interval booked on a link (`(0, 0)`: none): all that the
/// common reservation reads and writes. 16 bytes, four to a cache line, in
/// the order links were first used: at hundreds of ranks the calendars no
/// longer fit in cache, and the walk of a 30-hop route was a fifth of all
/// cache misses of a run (callgrind's cache simulation, 512 ranks) while a
/// calendar took a line; with the intervals before it beside it (32 bytes,
/// two to a line) still ~21 misses per transfer at 256 ranks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(align(16))]
struct Last(Ps, Ps);

/// The intervals booked on a link before its [`Last`], oldest first: `None`
/// while the link is uncontended (it then holds one interval at a time,
/// the last transfer's). Kept apart from `Last`, read only when the last
/// interval is still live; it may still hold intervals that ended (the
/// next booking that reads it drops them), since the common booking does
/// not look at it.
type Earlier = Option<Box<Intervals>>;

/// One directed link's busy intervals, sorted by start and
/// non-overlapping: its [`Last`] and its [`Earlier`] ones, each borrowed
/// from its own table.
#[derive(Debug)]
struct Calendar<'a> {
    last: &'a mut Last,
    earlier: &'a mut Earlier,
}

/// Intervals of a link under contention (a few; one allocation).
type Intervals = SmallVec<[(Ps, Ps); 3]>;

impl Calendar<'_> {
    /// Forget the intervals that ended by `now`, then take the earliest
    /// `start >= earliest` such that `[start, end)` is free, where
    /// `end = max(start + duration, min_end)`; reserves it. `now` is the
    /// time of the newest reservation: every later head arrives after it
    /// (`earliest >= now`).
    #[inline(always)]
    fn book(
        self,
        now: Ps,
        earliest: Ps,
        duration: Ps,
        min_end: Ps,
    ) -> Result<(Ps, Ps), TimeOverflow> {
        if self.last.1 > now {
            return self.book_live(now, earliest, duration, min_end);
        }
        // The common case (inlined in the walk of a route): everything on
        // the link is over, its last transfer's interval included, so the
        // new interval starts at `earliest` and is the only live one (the
        // earlier ones, if any, ended before `now`; left for the next
        // booking that reads them).
        let end = units::add(earliest, duration)?.max(min_end);
        *self.last = if end > earliest {
            Last(earliest, end)
        } else {
            Last(0, 0)
        };
        Ok((earliest, end))
    }

    /// [`Calendar::book`] on a link whose last interval is still live
    /// (ends after `now`).
    #[inline(never)]
    fn book_live(
        self,
        now: Ps,
        earliest: Ps,
        duration: Ps,
        min_end: Ps,
    ) -> Result<(Ps, Ps), TimeOverflow> {
        // Nothing on it after `earliest`: the interval starts then and
        // comes last (what the search below finds, without searching).
        if self.last.1 <= earliest {
            let end = units::add(earliest, duration)?.max(min_end);
            if end > earliest {
                // The last interval becomes an earlier one; those before
                // it that ended go.
                let mut before = self.earlier.take().unwrap_or_default();
                drop_ended(&mut before, now);
                before.push((self.last.0, self.last.1));
                *self.earlier = Some(before);
                *self.last = Last(earliest, end);
            } else if let Some(before) = self.earlier {
                drop_ended(before, now);
                if before.is_empty() {
                    *self.earlier = None;
                }
            }
            return Ok((earliest, end));
        }
        // Contended (`last_end > earliest >= now`: the last interval
        // stays): search all of them for a gap.
        let mut busy: Intervals = self.earlier.take().map(|b| *b).unwrap_or_default();
        busy.push((self.last.0, self.last.1));
        drop_ended(&mut busy, now);
        let mut start = earliest;
        // First interval that ends after `start`: the ones before it are
        // over by then (intervals are sorted and disjoint, so ends are too).
        let mut i = busy.partition_point(|&(_, e)| e <= start);
        let booked = loop {
            let end = match units::add(start, duration) {
                Ok(t) => t.max(min_end),
                // Refused: the calendar keeps what it had.
                Err(e) => break Err(e),
            };
            match busy.get(i) {
                // It is running at `start`, or begins before we would end.
                Some(&(s, e)) if s < end => {
                    start = start.max(e);
                    i += 1;
                }
                _ => {
                    if end > start {
                        busy.insert(i, (start, end));
                    }
                    break Ok((start, end));
                }
            }
        };
        let (start, end) = busy.pop().expect("the last interval stays");
        *self.last = Last(start, end);
        *self.earlier = (!busy.is_empty()).then(|| Box::new(busy));
        booked
    }
}

/// Drop the intervals of `busy` that ended by `now` (a prefix: sorted and
/// disjoint intervals have sorted ends).
fn drop_ended(busy: &mut Intervals, now: Ps) {
    let over = busy.iter().take_while(|&&(_, e)| e <= now).count();
    if over > 0 {
        busy.drain(..over);
    }
}

/// A time on a link and the same time one latency later, on the next.
type Crossing = (Ps, Ps);

/// Book one hop of a transfer whose head reaches it at `head` and whose
/// tail left the previous hop at `prev_tail` (`now`: the transfer's start):
/// returns its (start, start + latency) and (end, end + latency) — when
/// the link is busy and when the head and tail reach the next one.
#[inline(always)]
fn book_hop(
    lasts: &mut [Last],
    earlier: &mut [Earlier],
    classes: &[(Ps, Ps)],
    Hop { calendar, class }: Hop,
    now: Ps,
    head: Ps,
    prev_tail: Ps,
) -> Result<(Crossing, Crossing), TimeOverflow> {
    let (latency, duration) = classes[class as usize];
    let i = calendar as usize;
    // Borrowing `earlier[i]` reads nothing: only a live interval does.
    let calendar = Calendar {
        last: &mut lasts[i],
        earlier: &mut earlier[i],
    };
    let (start, end) = calendar.book(now, head, duration, prev_tail)?;
    Ok((
        (start, units::add(start, latency)?),
        (end, units::add(end, latency)?),
    ))
}

/// Occupancy of every directed link. Calendars are made on a link's first
/// use and laid out in the order links are first used, so the links of one
/// path sit together in memory: at thousands of ranks a transfer touches a
/// few consecutive cache lines instead of one scattered line (and often
/// one page) per hop, and links no transfer uses cost 4 bytes each.
#[derive(Debug)]
pub struct LinkTable {
    topo: Arc<Topology>,
    /// Link id → index in `lasts` and `earlier`, or [`UNUSED`].
    index: Vec<u32>,
    /// Per calendar, its [`Last`] interval and its [`Earlier`] ones.
    lasts: Vec<Last>,
    earlier: Vec<Earlier>,
}

/// One hop of a [`Route`]: its link's calendar in the table, and which
/// of the route's (latency, rate) classes the link has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Hop {
    calendar: u32,
    class: u32,
}

/// A path resolved to the calendars of one [`LinkTable`]: what a
/// reservation walks. A hop is 8 bytes (a route of 30 hops is four cache
/// lines): the links' figures, a handful of distinct ones, are kept once
/// per route.
#[derive(Debug, PartialEq, Eq)]
pub struct RouteHops {
    hops: Box<[Hop]>,
    /// The distinct (latency, rate) of its links.
    classes: SmallVec<[(Ps, Rate); 4]>,
    /// Its links in order (for the trace).
    links: Box<[LinkId]>,
}

impl RouteHops {
    /// The links crossed, in order.
    pub fn links(&self) -> &[LinkId] {
        &self.links
    }

    pub fn is_empty(&self) -> bool {
        self.hops.is_empty()
    }
}

/// A path resolved to the calendars of one [`LinkTable`] (shared by the
/// commands that take it).
pub type Route = Arc<RouteHops>;

/// A link no transfer has used yet.
const UNUSED: u32 = u32::MAX;

impl LinkTable {
    pub fn new(topo: Arc<Topology>) -> Self {
        LinkTable {
            index: vec![UNUSED; topo.links.len()],
            lasts: Vec::new(),
            earlier: Vec::new(),
            topo,
        }
    }

    /// Where link `id`'s calendar is in `lasts` and `earlier`, made on
    /// first use.
    fn calendar_index(&mut self, id: LinkId) -> u32 {
        let slot = &mut self.index[id as usize];
        if *slot == UNUSED {
            *slot = self.lasts.len() as u32;
            self.lasts.push(Last::default());
            self.earlier.push(None);
        }
        *slot
    }

    /// `path` as this table's calendars: what [`LinkTable::reserve`]
    /// walks. A route made once per path (callers keep it) spares every
    /// transfer a lookup per hop in a table of every link of the machine:
    /// at thousands of ranks that lookup was a cache miss per hop, and the
    /// calendars of one path, made together, sit together.
    pub fn route(&mut self, path: &[LinkId]) -> Route {
        let mut classes: SmallVec<[(Ps, Rate); 4]> = SmallVec::new();
        let hops = path
            .iter()
            .map(|&link| {
                let calendar = self.calendar_index(link);
                let l = &self.topo.links[link as usize];
                let figures = (l.latency, l.rate);
                let class = match classes.iter().position(|&c| c == figures) {
                    Some(i) => i,
                    None => {
                        classes.push(figures);
                        classes.len() - 1
                    }
                };
                Hop {
                    calendar,
                    class: class as u32,
                }
            })
            .collect();
        Arc::new(RouteHops {
            hops,
            classes,
            links: path.into(),
        })
    }

    /// Reserve `route` for `bytes` starting at `t0` (the current simulated
    /// time); returns when the last byte arrives. An empty route (a copy
    /// within one PE) takes `bytes / local_rate`.
    /// When `busy` is given, each link's reserved interval is appended to
    /// it (for the trace).
    pub fn reserve(
        &mut self,
        route: &RouteHops,
        t0: Ps,
        bytes: u64,
        local_rate: Rate,
        busy: Option<&mut Vec<(LinkId, Ps, Ps)>>,
    ) -> Result<Ps, TimeOverflow> {
        if route.is_empty() {
            return units::add(t0, local_rate.duration_ps(bytes)?);
        }
        // A path has a handful of distinct (latency, rate) classes over
        // tens of hops: each serialisation time is computed once.
        let classes = route
            .classes
            .iter()
            .map(|&(latency, rate)| Ok((latency, rate.duration_ps(bytes)?)))
            .collect::<Result<SmallVec<[(Ps, Ps); 4]>, TimeOverflow>>()?;
        // Plain slices in the walk: it is one of the hottest loops of a
        // run (tens of hops per transfer), and the trace's loop is apart.
        let classes = &classes[..];
        let (lasts, earlier) = (&mut self.lasts[..], &mut self.earlier[..]);
        let mut head = t0; // when the head reaches the current link
        let mut prev_tail: Ps = t0; // when the tail left the previous link
        match busy {
            None => {
                for &hop in route.hops.iter() {
                    let (start, end) = book_hop(lasts, earlier, classes, hop, t0, head, prev_tail)?;
                    (head, prev_tail) = (start.1, end.1);
                }
            }
            Some(b) => {
                for (&hop, &link) in route.hops.iter().zip(route.links.iter()) {
                    let (start, end) = book_hop(lasts, earlier, classes, hop, t0, head, prev_tail)?;
                    (head, prev_tail) = (start.1, end.1);
                    b.push((link, start.0, end.0));
                }
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
    fn a_last_interval_is_a_quarter_of_a_cache_line() {
        // Four to a line, each within one: the reservation walk's cache
        // misses scale with it.
        assert_eq!(std::mem::size_of::<Last>(), 16);
        assert_eq!(std::mem::align_of::<Last>(), 16);
    }

    /// A calendar owned in one piece, for the tests of its rule.
    #[derive(Default)]
    struct Owned {
        last: Last,
        earlier: Earlier,
    }

    impl Owned {
        fn book(
            &mut self,
            now: Ps,
            earliest: Ps,
            duration: Ps,
            min_end: Ps,
        ) -> Result<(Ps, Ps), TimeOverflow> {
            Calendar {
                last: &mut self.last,
                earlier: &mut self.earlier,
            }
            .book(now, earliest, duration, min_end)
        }
    }

    /// The rule a calendar keeps, on a plain sorted vector: drop what
    /// ended by `now`, then the earliest gap at or after `earliest`.
    fn book_by_the_rule(
        busy: &mut Vec<(Ps, Ps)>,
        now: Ps,
        earliest: Ps,
        duration: Ps,
        min_end: Ps,
    ) -> (Ps, Ps) {
        busy.retain(|&(_, e)| e > now);
        let mut start = earliest;
        loop {
            let end = (start + duration).max(min_end);
            match busy.iter().find(|&&(s, e)| e > start && s < end) {
                Some(&(_, e)) => start = e,
                None => {
                    if end > start {
                        busy.push((start, end));
                        busy.sort();
                    }
                    return (start, end);
                }
            }
        }
    }

    #[test]
    fn a_calendar_books_what_the_plain_rule_books() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        for _ in 0..2000 {
            let (mut cal, mut plain) = (Owned::default(), Vec::new());
            let mut now = 0;
            for _ in 0..40 {
                // Times on a coarse grid, so that ties and touching
                // intervals happen; zero-length bookings included.
                now += rng.random_range(0..4u64) * 10;
                let earliest = now + rng.random_range(0..6u64) * 10;
                let duration = rng.random_range(0..5u64) * 10;
                let min_end = earliest + rng.random_range(0..4u64) * 10;
                let got = cal.book(now, earliest, duration, min_end).unwrap();
                let want = book_by_the_rule(&mut plain, now, earliest, duration, min_end);
                assert_eq!(got, want);
                let mut held: Vec<(Ps, Ps)> =
                    cal.earlier.iter().flat_map(|b| b.iter().copied()).collect();
                if cal.last != Last(0, 0) {
                    held.push((cal.last.0, cal.last.1));
                }
                // The same live intervals (the calendar may still hold
                // ones that ended by `now`: the next booking drops them).
                held.retain(|&(_, e)| e > now);
                assert_eq!(held, plain);
            }
        }
    }

    #[test]
    fn a_refused_booking_leaves_the_calendar_as_it_was() {
        let mut cal = Owned::default();
        cal.book(0, 0, 10, 0).unwrap();
        cal.book(0, 20, 10, 0).unwrap();
        cal.book(0, 40, 10, 0).unwrap();
        let before = (cal.last, cal.earlier.clone());
        // Contended (the link is busy at 5) and past the clock's horizon.
        assert!(cal.book(0, 5, u64::MAX - 8, 0).is_err());
        assert_eq!((cal.last, cal.earlier), before);
        assert_eq!(before.0, Last(40, 50));
        assert_eq!(
            before.1.as_deref().map(|v| v.to_vec()),
            Some(vec![(0, 10), (20, 30)])
        );
    }

    #[test]
    fn uncontended_transfer_matches_closed_form_exactly() {
        let (t, p, (lat, bw)) = setup();
        for bytes in [1u64, 8, 1000, 1 << 20] {
            let mut fresh = LinkTable::new(t.clone());
            let r = fresh.route(&p);
            let done = fresh
                .reserve(&r, 1000, bytes, Rate::from_giga_per_s(1.0), None)
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
        let mut lt = LinkTable::new(t.clone());
        let s = 1 << 20;
        let one = Rate::from_giga_per_s(1.0);
        let p = lt.route(&p);
        let a = lt.reserve(&p, 0, s, one, None).unwrap();
        let b = lt.reserve(&p, 0, s, one, None).unwrap();
        let per = bw.unwrap().duration_ps(s).unwrap();
        assert_eq!(a, lat + per);
        // The second one waits for the first on every link: it ends one
        // bottleneck-serialisation later (rate through a link <= bandwidth).
        assert_eq!(b, a + per);
        // A transfer that would end past the clock's horizon is refused.
        assert!(lt.reserve(&p, u64::MAX - 5, s, one, None).is_err());
    }

    #[test]
    fn an_idle_link_is_not_held_by_a_future_reservation() {
        let (t, p, _) = setup();
        let one = Rate::from_giga_per_s(1.0);
        let last = *p.last().unwrap();
        let link = &t.links[last as usize];
        // When A's head reaches the last link of its path.
        let a_arrives: Ps = p[..p.len() - 1]
            .iter()
            .map(|&id| t.links[id as usize].latency)
            .sum();
        let mut lt = LinkTable::new(t.clone());
        let a_bytes = 1 << 20;
        let route = lt.route(&p);
        let a = lt.reserve(&route, 0, a_bytes, one, None).unwrap();
        let only_last = lt.route(&[last]);
        // B needs only the last link, which is idle until A gets there:
        // it crosses at once instead of queueing behind A.
        let b_bytes = 64;
        let b_time = link.rate.duration_ps(b_bytes).unwrap();
        assert!(b_time <= a_arrives, "the test needs a gap");
        let mut busy = Vec::new();
        let b = lt
            .reserve(&only_last, 0, b_bytes, one, Some(&mut busy))
            .unwrap();
        assert_eq!(busy, vec![(last, 0, b_time)]);
        assert_eq!(b, b_time + link.latency);
        // A is untouched: a fresh table gives it the same time.
        let mut fresh = LinkTable::new(t.clone());
        let route = fresh.route(&p);
        let alone = fresh.reserve(&route, 0, a_bytes, one, None).unwrap();
        assert_eq!(a, alone);
        // C does not fit in the gap: it waits for A's interval to end.
        let c_bytes = 1 << 20;
        let mut busy = Vec::new();
        lt.reserve(&only_last, 0, c_bytes, one, Some(&mut busy))
            .unwrap();
        let a_end_on_last = a - link.latency;
        assert_eq!(busy[0].1, a_end_on_last, "after A's interval");
    }
}
