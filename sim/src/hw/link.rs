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
//! Intervals that touch are kept as one (only their union is read), so a
//! saturated link's back-to-back bookings are one interval to step over.
//! A transfer of no bytes holds a link for no time and waits for none: it
//! passes when its head arrives (and the tail of its previous hop has
//! left).
//! Cost per transfer is independent of its size: per hop, O(1) when the
//! link is free from the head's arrival on (the common case), else a
//! binary search for the first interval in the way, a walk over those in
//! the way and an insert that shifts the later ones — linear in the
//! link's live intervals at worst (~24 a calendar, ~1 step of walk, in
//! a 4 KiB rabenseifner at 128 SIPs, where most hops book this way).

use crate::topology::{LinkId, Topology};
use crate::units::{self, Ps, Rate, TimeOverflow};
use smallvec::SmallVec;
use std::sync::Arc;

/// The latest interval booked on a link (`end == 0`: none): all that the
/// common reservation reads and writes. Kept as its end and its length,
/// 12 bytes: at hundreds of ranks the calendars no longer fit in cache,
/// and the walk of a 30-hop route was a fifth of all cache misses of a run
/// (callgrind's cache simulation, 512 ranks) while a calendar took a line;
/// with the intervals before it beside it (32 bytes, two to a line) still
/// ~21 misses per transfer at 256 ranks; as (start, end), 16 bytes, 7.6
/// misses a ring step. A length that does not fit 32 bits (an interval of
/// more than 4.29 ms) is [`LONG`], its start kept in the table's
/// [`LongStarts`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C, packed(4))]
struct Last {
    end: Ps,
    len: u32,
}

/// [`Last::len`] of an interval whose start is in [`LongStarts`].
const LONG: u32 = u32::MAX;

/// The starts of the [`Last`] intervals too long for their `len`, by
/// calendar index (entries of calendars whose last interval is short
/// again are stale, and not read).
type LongStarts = rustc_hash::FxHashMap<u32, Ps>;

/// The intervals booked on a link before its [`Last`], oldest first: `None`
/// while the link is uncontended (it then holds one interval at a time,
/// the last transfer's). Kept apart from `Last`, read only when the last
/// interval is still live; it may still hold intervals that ended (the
/// next booking that reads it drops them), since the common booking does
/// not look at it.
type Earlier = Option<Box<Intervals>>;

/// One directed link's busy intervals, sorted by start and
/// non-overlapping: its [`Last`] and its [`Earlier`] ones, each borrowed
/// from its own table, and the table's [`LongStarts`] with its index there.
#[derive(Debug)]
struct Calendar<'a> {
    last: &'a mut Last,
    earlier: &'a mut Earlier,
    long: &'a mut LongStarts,
    index: u32,
}

/// Intervals of a link under contention (a few; one allocation).
type Intervals = SmallVec<[(Ps, Ps); 3]>;

impl Calendar<'_> {
    /// The last interval as (start, end); `(0, 0)`: none.
    #[inline(always)]
    fn last(&self) -> (Ps, Ps) {
        let Last { end, len } = *self.last;
        match len {
            LONG => (self.long[&self.index], end),
            len => (end - Ps::from(len), end),
        }
    }

    /// Make `[start, end)` the last interval (`start <= end`; empty: none).
    #[inline(always)]
    fn set_last(&mut self, start: Ps, end: Ps) {
        set_last(self.last, self.long, self.index, start, end);
    }

    /// Forget the intervals that ended by `now`, then take the earliest
    /// `start >= earliest` such that `[start, end)` is free, where
    /// `end = max(start + duration, min_end)`; reserves it. `now` is the
    /// time of the newest reservation: every later head arrives after it
    /// (`earliest >= now`). A booking of no `duration` takes
    /// `[earliest, max(earliest, min_end))` and reserves nothing.
    #[inline(always)]
    fn book(
        mut self,
        now: Ps,
        earliest: Ps,
        duration: Ps,
        min_end: Ps,
    ) -> Result<(Ps, Ps), TimeOverflow> {
        if duration == 0 {
            // No bytes: the link is held for no time, and nothing waits.
            return Ok((earliest, earliest.max(min_end)));
        }
        if { self.last.end } > now {
            return self.book_live(now, earliest, duration, min_end);
        }
        // The common case (inlined in the walk of a route): everything on
        // the link is over, its last transfer's interval included, so the
        // new interval starts at `earliest` and is the only live one (the
        // earlier ones, if any, ended before `now`; left for the next
        // booking that reads them).
        let end = units::add(earliest, duration)?.max(min_end);
        self.set_last(earliest, end);
        Ok((earliest, end))
    }

    /// [`Calendar::book`] on a link whose last interval is still live
    /// (ends after `now`).
    #[inline(never)]
    fn book_live(
        mut self,
        now: Ps,
        earliest: Ps,
        duration: Ps,
        min_end: Ps,
    ) -> Result<(Ps, Ps), TimeOverflow> {
        // Nothing on it after `earliest`: the interval starts then and
        // comes last (what the search below finds, without searching).
        let last = self.last();
        if last.1 <= earliest {
            let end = units::add(earliest, duration)?.max(min_end);
            if last.1 == earliest {
                // It follows the last one without a gap: one interval.
                self.set_last(last.0, end);
            } else {
                // The last interval becomes an earlier one; those before
                // it that ended go.
                let mut before = self.earlier.take().unwrap_or_default();
                drop_ended(&mut before, now);
                before.push(last);
                *self.earlier = Some(before);
                self.set_last(earliest, end);
            }
            return Ok((earliest, end));
        }
        // Contended (`last_end > earliest >= now`: the last interval
        // stays): search all of them for a gap, in place (on the inter-SIP
        // routes of a full mesh most hops book here, before the last
        // interval: a box made anew each time was a malloc and a free a
        // hop).
        let busy = self.earlier.get_or_insert_with(Box::default);
        busy.push(last);
        drop_ended(busy, now);
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
                        insert_joined(busy, i, (start, end));
                    }
                    break Ok((start, end));
                }
            }
        };
        let (start, end) = busy.pop().expect("the last interval stays");
        if busy.is_empty() {
            *self.earlier = None;
        }
        self.set_last(start, end);
        booked
    }
}

/// Make `[start, end)` (`start <= end`) the last interval of calendar
/// `index`, whose [`Last`] is `last`; an empty one leaves none (it holds
/// the link for no time).
#[inline(always)]
fn set_last(last: &mut Last, long: &mut LongStarts, index: u32, start: Ps, end: Ps) {
    *last = match u32::try_from(end - start) {
        Ok(0) => Last::default(),
        Ok(len) if len != LONG => Last { end, len },
        _ => {
            long.insert(index, start);
            Last { end, len: LONG }
        }
    };
}

/// Insert `[start, end)` at `i` of `busy`, where it fits between its
/// neighbours, as one interval with each of them it touches. A calendar
/// keeps no two intervals that touch: where a link is saturated its
/// bookings follow one another without a gap, and each kept apart made
/// the calendar longer to search, insert into and drop from (a 4 KiB
/// rabenseifner all-reduce at 128 SIPs books 22 M hops here, ~24
/// intervals a calendar once joined; 1.46 -> 1.14 s with the joins).
/// Only the union of the intervals is ever read, so the bookings of
/// transfers of bytes are the same.
fn insert_joined(busy: &mut Intervals, i: usize, (start, end): (Ps, Ps)) {
    let joins_before = i > 0 && busy[i - 1].1 == start;
    let joins_after = busy.get(i).is_some_and(|&(s, _)| s == end);
    match (joins_before, joins_after) {
        (true, true) => {
            busy[i - 1].1 = busy[i].1;
            busy.remove(i);
        }
        (true, false) => busy[i - 1].1 = end,
        (false, true) => busy[i].0 = start,
        (false, false) => busy.insert(i, (start, end)),
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

/// Book one hop of a transfer on `calendar`, a link of `(latency,
/// duration)` for its bytes, whose head reaches it at `head` and whose
/// tail left the previous hop at `prev_tail` (`now`: the transfer's
/// start): returns its (start, start + latency) and (end, end + latency) —
/// when the link is busy and when the head and tail reach the next one.
#[inline(always)]
fn book_hop(
    calendar: Calendar<'_>,
    (latency, duration): (Ps, Ps),
    now: Ps,
    head: Ps,
    prev_tail: Ps,
) -> Result<(Crossing, Crossing), TimeOverflow> {
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
    /// Link id → index in `lasts`, `earlier` and `figure`, or [`UNUSED`].
    index: Vec<u32>,
    /// Per calendar, its [`Last`] interval and its [`Earlier`] ones.
    lasts: Vec<Last>,
    earlier: Vec<Earlier>,
    long: LongStarts,
    /// Per calendar, its link's (latency, rate) as an index into
    /// `figures`: a byte per hop beside the calendars, where a route's
    /// own table of hops took four cache lines per 30 hops.
    figure: Vec<u8>,
    /// The distinct (latency, rate) of the links used so far: one per
    /// link kind at most (a link's figures are its kind's), so a handful.
    figures: SmallVec<[(Ps, Rate); 16]>,
    /// On a machine split into partitions: each SIP's partition and this
    /// table's (see [`LinkTable::for_partition`]).
    owners: Option<(Arc<[u32]>, u32)>,
}

/// A path resolved to the calendars of one [`LinkTable`]: what a
/// reservation walks. The calendars of a path are made together on its
/// first use, so they are consecutive: a route is a few runs of them (a
/// 30-hop neighbour send of the default mesh is one), and its links'
/// figures are read beside the calendars.
#[derive(Debug, PartialEq, Eq)]
pub struct RouteHops {
    /// Its calendars in order, as runs `(first, count)` of consecutive
    /// indices.
    runs: SmallVec<[(u32, u32); 2]>,
    /// The figures (indices into [`LinkTable::figures`]) its links have,
    /// and how many of its links have each: the serialisation times a
    /// transfer computes, once each, and the bound of an uncontended
    /// transfer's times (see [`LinkTable::walk`]).
    uses: SmallVec<[(u8, u32); 4]>,
    /// Its links in order (for the trace).
    links: Box<[LinkId]>,
    /// Its hops whose links another partition owns (see
    /// [`LinkTable::for_partition`]): (hop, partition), in order; empty
    /// on a machine that is not split.
    foreign: Box<[(u32, u32)]>,
}

impl RouteHops {
    /// The links crossed, in order.
    pub fn links(&self) -> &[LinkId] {
        &self.links
    }

    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// Its hops on links of other partitions: (hop, partition).
    pub fn foreign(&self) -> &[(u32, u32)] {
        &self.foreign
    }
}

/// A path resolved to the calendars of one [`LinkTable`] (shared by the
/// commands that take it).
pub type Route = Arc<RouteHops>;

/// A link no transfer has used yet.
const UNUSED: u32 = u32::MAX;

/// Distinct link figures whose times a reservation keeps on the stack
/// (one per link kind at most: eleven).
const FIGURES_ON_STACK: usize = 16;
const _: () = assert!(
    FIGURES_ON_STACK.is_power_of_two(),
    "the idle walk masks a figure into the array"
);

/// A reservation's (latency, serialisation time) per figure: all of them,
/// and the same in a fixed array when they fit one (the idle walk's).
#[derive(Clone, Copy)]
struct Times<'a> {
    all: &'a [(Ps, Ps)],
    on_stack: Option<&'a [(Ps, Ps); FIGURES_ON_STACK]>,
}

impl LinkTable {
    pub fn new(topo: Arc<Topology>) -> Self {
        Self::for_partition(topo, None)
    }

    /// The table of partition `me` of a machine whose SIP `s` is in
    /// partition `of_sip[s]` (`None`: not split). A directed link is the
    /// partition's of the SIP it leaves from; the routes it makes name
    /// their hops on other partitions' links ([`RouteHops::foreign`]).
    pub fn for_partition(topo: Arc<Topology>, owners: Option<(Arc<[u32]>, u32)>) -> Self {
        LinkTable {
            owners,
            index: vec![UNUSED; topo.links.len()],
            lasts: Vec::new(),
            earlier: Vec::new(),
            long: LongStarts::default(),
            figure: Vec::new(),
            figures: SmallVec::new(),
            topo,
        }
    }

    /// Where link `id`'s calendar is in `lasts`, `earlier` and `figure`,
    /// made on first use.
    fn calendar_index(&mut self, id: LinkId) -> u32 {
        let slot = &mut self.index[id as usize];
        if *slot == UNUSED {
            *slot = self.lasts.len() as u32;
            let l = &self.topo.links[id as usize];
            let figures = (l.latency, l.rate);
            let figure = match self.figures.iter().position(|&f| f == figures) {
                Some(i) => i,
                None => {
                    self.figures.push(figures);
                    self.figures.len() - 1
                }
            };
            self.lasts.push(Last::default());
            self.earlier.push(None);
            self.figure
                .push(u8::try_from(figure).expect("a link's figures are its kind's: a handful"));
        }
        *slot
    }

    /// `path` as this table's calendars: what [`LinkTable::reserve`]
    /// walks. A route made once per path (callers keep it) spares every
    /// transfer a lookup per hop in a table of every link of the machine:
    /// at thousands of ranks that lookup was a cache miss per hop, and the
    /// calendars of one path, made together, sit together.
    pub fn route(&mut self, path: &[LinkId]) -> Route {
        let mut runs: SmallVec<[(u32, u32); 2]> = SmallVec::new();
        let mut uses: SmallVec<[(u8, u32); 4]> = SmallVec::new();
        for &link in path {
            let calendar = self.calendar_index(link);
            match runs.last_mut() {
                Some((first, count)) if *first + *count == calendar => *count += 1,
                _ => runs.push((calendar, 1)),
            }
            let figure = self.figure[calendar as usize];
            match uses.iter_mut().find(|(f, _)| *f == figure) {
                Some((_, n)) => *n += 1,
                None => uses.push((figure, 1)),
            }
        }
        let foreign = match &self.owners {
            None => Box::default(),
            Some((of_sip, me)) => (0u32..)
                .zip(path)
                .filter_map(|(hop, &link)| {
                    let from = self.topo.node(self.topo.links[link as usize].from);
                    let part = of_sip[from.sip() as usize];
                    (part != *me).then_some((hop, part))
                })
                .collect(),
        };
        Arc::new(RouteHops {
            runs,
            uses,
            links: path.into(),
            foreign,
        })
    }

    /// Book exactly `[start, end)` on `link` (`now`: the current simulated
    /// time, at most `start`), as another partition's transfer booked it
    /// in its own table; false if the link is busy for any of it (then the
    /// calendar holds the interval a transfer arriving at `start` would
    /// have taken instead, and the run is no longer the one-table run).
    pub fn book_exact(
        &mut self,
        link: LinkId,
        now: Ps,
        (start, end): (Ps, Ps),
    ) -> Result<bool, TimeOverflow> {
        let index = self.calendar_index(link);
        let calendar = Calendar {
            last: &mut self.lasts[index as usize],
            earlier: &mut self.earlier[index as usize],
            long: &mut self.long,
            index,
        };
        let got = calendar.book(now.min(start), start, end - start, end)?;
        Ok(got == (start, end))
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
        // A path has a handful of distinct (latency, rate) figures over
        // tens of hops: each serialisation time is computed once. The sum
        // of every hop's latency and serialisation bounds the times of an
        // uncontended walk (`None`: past the clock's horizon).
        // On the stack, not a `SmallVec` made by value: its 264 bytes were
        // moved into place with a `memcpy` every transfer.
        let mut on_stack = [(0, 0); FIGURES_ON_STACK];
        let mut spilled = Vec::new();
        let n_figures = self.figures.len();
        let fit_on_stack = n_figures <= FIGURES_ON_STACK;
        let times: &mut [(Ps, Ps)] = if fit_on_stack {
            &mut on_stack[..n_figures]
        } else {
            spilled.resize(n_figures, (0, 0));
            &mut spilled
        };
        let mut bound = Some(t0);
        for &(f, n) in &route.uses {
            let (latency, rate) = self.figures[f as usize];
            let duration = rate.duration_ps(bytes)?;
            times[f as usize] = (latency, duration);
            bound = bound.and_then(|b| {
                Ps::from(n)
                    .checked_mul(latency.checked_add(duration)?)?
                    .checked_add(b)
            });
        }
        let fits = bound.is_some();
        let times = Times {
            all: if fit_on_stack {
                &on_stack[..n_figures]
            } else {
                &spilled
            },
            on_stack: fit_on_stack.then_some(&on_stack),
        };
        match busy {
            None => self.walk(route, times, t0, fits, |_, _| ()),
            Some(b) => {
                let mut links = route.links.iter();
                self.walk(route, times, t0, fits, |start, end| {
                    if let Some(&link) = links.next() {
                        b.push((link, start, end));
                    }
                })
            }
        }
    }

    /// Book each hop of `route` in turn (`times`: (latency, serialisation
    /// time) per figure), telling `booked` each hop's interval; returns
    /// when the tail leaves the last. Generic over `booked` so that the
    /// walk without a trace has no per-hop branch: it is one of the
    /// hottest loops of a run (tens of hops per transfer).
    ///
    /// A hop whose link is idle (its last interval ended by `t0`) is
    /// booked in place: its interval starts when the head arrives and
    /// ends when its bytes have crossed, not before the tail left the hop
    /// before (what [`Calendar::book`] gives such a link). While every
    /// hop so far was idle, each time of the walk is at most `t0` plus
    /// the latencies and serialisation times of the hops so far, so with
    /// `fits` (that sum over the whole route fits the clock) those hops
    /// need no overflow checks (a 30-hop walk's instructions 1629 -> 1510,
    /// cachegrind). The first busy hop goes through [`Calendar::book`],
    /// checked, and so does every hop after it.
    ///
    /// The idle hops at the start of each run of calendars are booked by a
    /// loop of their own over the run's intervals and figures, with the
    /// figures' times in a fixed array (no bounds check per hop) and the
    /// rare interval too long for a [`Last`] left to the general loop:
    /// a 30-hop neighbour send ~45 -> ~33 instructions a hop (callgrind,
    /// `ring_native`).
    #[inline(always)]
    fn walk(
        &mut self,
        route: &RouteHops,
        times: Times<'_>,
        t0: Ps,
        fits: bool,
        mut booked: impl FnMut(Ps, Ps),
    ) -> Result<Ps, TimeOverflow> {
        let mut head = t0; // when the head reaches the current link
        let mut prev_tail: Ps = t0; // when the tail left the previous link
        let mut idle_so_far = fits;
        for &(first, count) in &route.runs {
            let run = first as usize..(first + count) as usize;
            let lasts = &mut self.lasts[run.clone()];
            let earlier = &mut self.earlier[run.clone()];
            let figure = &self.figure[run];
            // Hops of this run booked by the idle loop.
            let mut idle = 0;
            if let (true, Some(times)) = (idle_so_far, times.on_stack) {
                for (last, &f) in lasts.iter_mut().zip(figure) {
                    if { last.end } > t0 {
                        break;
                    }
                    // The mask keeps a figure that fits the array as it
                    // is, and spares the bounds check.
                    let (latency, duration) = times[usize::from(f) & (FIGURES_ON_STACK - 1)];
                    let end = (head + duration).max(prev_tail);
                    let len = end - head;
                    if len >= Ps::from(LONG) {
                        break;
                    }
                    *last = match len {
                        0 => Last::default(),
                        len => Last {
                            end,
                            len: len as u32,
                        },
                    };
                    booked(head, end);
                    (head, prev_tail) = (head + latency, end + latency);
                    idle += 1;
                }
            }
            let hops = lasts[idle..]
                .iter_mut()
                .zip(&mut earlier[idle..])
                .zip(&figure[idle..]);
            for (index, ((last, earlier), &f)) in (first + idle as u32..).zip(hops) {
                let (latency, duration) = times.all[f as usize];
                if idle_so_far && { last.end } <= t0 {
                    let end = (head + duration).max(prev_tail);
                    set_last(last, &mut self.long, index, head, end);
                    booked(head, end);
                    (head, prev_tail) = (head + latency, end + latency);
                    continue;
                }
                idle_so_far = false;
                let calendar = Calendar {
                    last,
                    earlier,
                    long: &mut self.long,
                    index,
                };
                let (start, end) = book_hop(calendar, (latency, duration), t0, head, prev_tail)?;
                (head, prev_tail) = (start.1, end.1);
                booked(start.0, end.0);
            }
        }
        Ok(prev_tail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Another partition's interval is taken exactly when the link is
    /// free for all of it (before, between or after what it holds), and
    /// refused when it overlaps anything.
    #[test]
    fn an_exact_booking_is_taken_only_where_the_link_is_free() {
        let topo = Arc::new(
            crate::topology::build(&crate::config::TopologySpec::default_embedded()).unwrap(),
        );
        let mut t = LinkTable::new(topo);
        assert_eq!(t.book_exact(3, 0, (100, 200)), Ok(true));
        assert_eq!(
            t.book_exact(3, 0, (150, 250)),
            Ok(false),
            "overlaps the first"
        );
        let mut t2 = LinkTable::new(t.topo.clone());
        assert_eq!(t2.book_exact(3, 0, (100, 200)), Ok(true));
        assert_eq!(t2.book_exact(3, 0, (300, 400)), Ok(true), "after");
        assert_eq!(t2.book_exact(3, 0, (200, 300)), Ok(true), "between");
        assert_eq!(t2.book_exact(3, 0, (40, 100)), Ok(true), "before");
        assert_eq!(
            t2.book_exact(3, 0, (399, 401)),
            Ok(false),
            "overlaps the last"
        );
        assert_eq!(t2.book_exact(4, 0, (150, 250)), Ok(true), "another link");
    }
    use crate::config::TopologySpec;
    use crate::routing::{Distance, PathRouter};
    use crate::topology::build;
    use std::sync::Arc;

    /// The sip0 → sip1 PE path and its (Σ latency, bottleneck).
    fn setup() -> (Arc<Topology>, crate::routing::Path, (Ps, Option<Rate>)) {
        let t = Arc::new(build(&TopologySpec::default_embedded()).unwrap());
        let (p, d) = path(&t, "sip0.cube0.pe0", "sip1.cube0.pe0");
        (t, p, (d.latency_ps, d.bottleneck))
    }

    /// The path from `a` to `b` and its figures.
    fn path(t: &Arc<Topology>, a: &str, b: &str) -> (crate::routing::Path, Distance) {
        let r = PathRouter::new(t.clone());
        let p = r.find_path(a.parse().unwrap(), b.parse().unwrap()).unwrap();
        let d = r.distance(&p);
        (p, d)
    }

    #[test]
    fn a_last_interval_is_twelve_bytes() {
        // The reservation walk's cache misses scale with it.
        assert_eq!(std::mem::size_of::<Last>(), 12);
    }

    /// A calendar owned in one piece, for the tests of its rule.
    #[derive(Default)]
    struct Owned {
        last: Last,
        earlier: Earlier,
        long: LongStarts,
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
                long: &mut self.long,
                index: 7,
            }
            .book(now, earliest, duration, min_end)
        }

        /// Its last interval, `None` when it has none.
        fn last(&mut self) -> Option<(Ps, Ps)> {
            let cal = Calendar {
                last: &mut self.last,
                earlier: &mut self.earlier,
                long: &mut self.long,
                index: 7,
            };
            (*cal.last != Last::default()).then(|| cal.last())
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
        if duration == 0 {
            return (earliest, earliest.max(min_end));
        }
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

    /// `busy` (sorted, disjoint) with the intervals that touch made one.
    fn joined(busy: &[(Ps, Ps)]) -> Vec<(Ps, Ps)> {
        let mut out: Vec<(Ps, Ps)> = Vec::new();
        for &(s, e) in busy {
            match out.last_mut() {
                Some(last) if last.1 == s => last.1 = e,
                _ => out.push((s, e)),
            }
        }
        out
    }

    #[test]
    fn a_calendar_books_what_the_plain_rule_books() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        for _ in 0..2000 {
            let (mut cal, mut plain) = (Owned::default(), Vec::new());
            let mut now = 0;
            // Half the calendars on a grid whose intervals are too long
            // for a `Last`'s length (their starts kept aside).
            let unit: u64 = if rng.random_bool(0.5) { 10 } else { 1 << 31 };
            for _ in 0..40 {
                // Times on a coarse grid, so that ties and touching
                // intervals happen; zero-length bookings included.
                now += rng.random_range(0..4u64) * unit;
                let earliest = now + rng.random_range(0..6u64) * unit;
                let duration = rng.random_range(0..5u64) * unit;
                let min_end = earliest + rng.random_range(0..4u64) * unit;
                let got = cal.book(now, earliest, duration, min_end).unwrap();
                let want = book_by_the_rule(&mut plain, now, earliest, duration, min_end);
                assert_eq!(got, want);
                let mut held: Vec<(Ps, Ps)> =
                    cal.earlier.iter().flat_map(|b| b.iter().copied()).collect();
                held.extend(cal.last());
                // The same live time busy (the calendar may still hold
                // intervals that ended by `now`: the next booking drops
                // them), in intervals none of which touch. A joined
                // interval may have begun before `now` with one that
                // ended: compared from `now` on, which is all a booking
                // reads (`earliest >= now`).
                held.retain(|&(_, e)| e > now);
                assert!(held.windows(2).all(|w| w[0].1 < w[1].0), "{held:?}");
                let from_now = |v: &[(Ps, Ps)]| -> Vec<(Ps, Ps)> {
                    v.iter().map(|&(s, e)| (s.max(now), e)).collect()
                };
                assert_eq!(from_now(&held), joined(&from_now(&plain)));
            }
        }
    }

    /// An interval longer than a `Last`'s length holds (4.29 ms) keeps
    /// its exact start: a short transfer that wants the link while it runs
    /// goes after it, not into a gap that is not there.
    #[test]
    fn a_long_interval_keeps_its_start() {
        let mut cal = Owned::default();
        let long = 5_000_000_000; // 5 ms
        assert_eq!(cal.book(0, 100, long, 0).unwrap(), (100, 100 + long));
        assert_eq!(cal.last(), Some((100, 100 + long)));
        assert_eq!(cal.book(0, 200, 10, 0).unwrap(), (100 + long, 110 + long));
        // The gap before it is still there.
        assert_eq!(cal.book(0, 0, 50, 0).unwrap(), (0, 50));
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
        assert_eq!((cal.last, cal.earlier.clone()), before);
        assert_eq!(cal.last(), Some((40, 50)));
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

    /// A route whose links were partly made for an earlier route is
    /// several runs of calendars; booked, it gives the closed form all the
    /// same, and its links (for the trace) in path order.
    #[test]
    fn a_route_of_several_runs_books_each_hop_in_path_order() {
        let t = Arc::new(build(&TopologySpec::default_embedded()).unwrap());
        let (p, d) = path(&t, "sip0.cube0.pe0", "sip1.cube0.pe0");
        let (other, _) = path(&t, "sip0.cube0.pe0", "sip0.cube1.pe0");
        let mut table = LinkTable::new(t.clone());
        let first = table.route(&other);
        let route = table.route(&p);
        assert_eq!(first.runs.len(), 1);
        assert!(route.runs.len() > 1, "{:?}", route.runs);
        assert_eq!(
            route.runs.iter().map(|r| r.1 as usize).sum::<usize>(),
            p.len()
        );
        let mut busy = Vec::new();
        let done = table
            .reserve(
                &route,
                1000,
                64,
                Rate::from_giga_per_s(1.0),
                Some(&mut busy),
            )
            .unwrap();
        let want = 1000 + d.latency_ps + d.bottleneck.unwrap().duration_ps(64).unwrap();
        assert_eq!(done, want);
        let links: Vec<LinkId> = busy.iter().map(|b| b.0).collect();
        assert_eq!(links, &p[..]);
        // Each hop starts no earlier than the one before it.
        assert!(busy.windows(2).all(|w| w[0].1 <= w[1].1), "{busy:?}");
    }

    /// The walk's unchecked path for idle hops (its idle loop and the
    /// general loop's in-place booking) books what the checked one (every
    /// hop through `Calendar::book`) books, on routes that share links,
    /// idle and busy, with long intervals too (3 GiB at 1 GB/s: a
    /// [`LONG`] one, which the idle loop leaves to the general loop).
    #[test]
    fn an_idle_hop_booked_in_place_is_booked_as_the_calendar_books_it() {
        use rand::{RngExt, SeedableRng};
        let t = Arc::new(build(&TopologySpec::default_embedded()).unwrap());
        let paths = [
            path(&t, "sip0.cube0.pe0", "sip1.cube0.pe0").0,
            path(&t, "sip0.cube1.pe0", "sip1.cube0.pe0").0,
            path(&t, "sip0.cube0.pe0", "sip0.cube1.pe0").0,
        ];
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for _ in 0..50 {
            let (mut fast, mut checked) = (LinkTable::new(t.clone()), LinkTable::new(t.clone()));
            let routes: Vec<_> = paths
                .iter()
                .map(|p| (fast.route(p), checked.route(p)))
                .collect();
            let mut t0: Ps = 0;
            for _ in 0..60 {
                t0 += rng.random_range(0..3u64) * rng.random_range(1..2_000_000u64);
                let bytes = [16u64, 4096, 1 << 20, 3 << 30][rng.random_range(0..4)];
                let (a, b) = &routes[rng.random_range(0..routes.len())];
                let time = |table: &mut LinkTable, r: &RouteHops, fits: bool| {
                    let mut times = [(0, 0); FIGURES_ON_STACK];
                    for &(f, _) in &r.uses {
                        let (latency, rate) = table.figures[f as usize];
                        times[f as usize] = (latency, rate.duration_ps(bytes).unwrap());
                    }
                    // The unchecked walk with its idle loop, or the
                    // general loop alone, checked.
                    let times = Times {
                        all: &times[..table.figures.len()],
                        on_stack: fits.then_some(&times),
                    };
                    let mut busy = Vec::new();
                    let done = table
                        .walk(r, times, t0, fits, |s, e| busy.push((s, e)))
                        .unwrap();
                    (done, busy)
                };
                assert_eq!(time(&mut fast, a, true), time(&mut checked, b, false));
            }
            assert_eq!(fast.lasts, checked.lasts);
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
