//! A PE's DMA engine as a queue of command records, and the transfers in
//! flight, served by engine calls: no task, future or allocation per
//! command.
//!
//! The engine is in-order for its setup: its head command waits for its
//! inputs, keeps the engine busy for `dma.setup_ns`, then its transfer
//! starts (the bytes leave the source and the route is booked, see
//! [`crate::hw::link`]) and the engine takes its next command while the
//! transfer crosses the links; the bytes land at the transfer's end. The
//! queue follows the head with [`engine::Call`]s as
//! [`super::compute_unit`] does (at issue when idle, when an input is
//! set, at the end of the setup, after the command before it), and each
//! transfer with one more call at its end — each where the task per
//! command was polled, so every table and trace is as before.

use super::engine_calls::Served;
use super::in_order::{InOrderQueue, Step};
use super::partition::Partition;
use super::{DmaKind, Issuer, Machine, PeState};
use crate::address::Space;
use crate::engine::{self, Call, Event};
use crate::error::HwError;
use crate::hw::data_plane::{Culprit, DataOp};
use crate::hw::link::{Route, RouteHops};
use crate::hw::oplog::{Completed, IssueMarks, OpParams};
use crate::hw::tensor::Operands;
use crate::hw::trace::Track;
use crate::units::{Ps, TimeOverflow};
use std::sync::Arc;

/// One DMA command, from its issue to its landing: written once into the
/// machine's table of commands ([`DmaCommands`]) and read there in place
/// at each step (a record moved from queue to queue was copied each time).
pub(super) struct DmaCmd {
    /// The issuing PE's state index.
    pub(super) pe: usize,
    pub(super) what: DmaKind,
    pub(super) src: (Space, u64),
    pub(super) dst: (Space, u64),
    pub(super) nbytes: u64,
    /// Tensors it reads (held until its bytes have landed).
    inputs: Operands,
    /// Set when its bytes have landed (taken then).
    done: Option<Event>,
    /// Its route (until it is booked).
    path: Option<Route>,
    logged: Option<Box<IssueMarks>>,
    /// When the engine took it and when its bytes land.
    pub(super) span: (Ps, Ps),
    /// A send to a PE of another partition: that partition and the
    /// message (see [`super::crossings`]).
    pub(super) remote: Option<Box<(usize, crate::hw::mail::Message)>>,
    /// Its bytes land in another partition (which lands them).
    pub(super) lands_elsewhere: bool,
    /// Its bytes land in another SIP than its PE's (its landing is a
    /// keyed event, see [`DmaCmd::landing_key`]).
    pub(super) across: bool,
}

impl DmaCmd {
    /// The order of its landing among the keyed events of its picosecond,
    /// if it lands in another SIP than its PE's: by its PE. The same
    /// however the machine is split, so a partition sees its events of a
    /// picosecond in one order on one executor and on several (see
    /// `engine::keyed` and [`super::crossings`]). Landings of one PE at
    /// one picosecond keep the order they were set in, which is its
    /// engine's order on both: their transfers' starts in the issuing
    /// partition, and there the order of the mail that carries them,
    /// which leaves in that order.
    pub(super) fn landing_key(&self) -> Option<engine::OrderKey> {
        self.across.then_some(self.pe as u64)
    }
}

/// A PE's DMA engine: its commands (slots in [`DmaCommands`]) in issue
/// order, each holding the engine for the setup only. Its transfer
/// leaves the engine as it starts, so the next command sets up while the
/// bytes cross the links.
#[derive(Default)]
pub(super) struct DmaEngine {
    queue: InOrderQueue,
}

impl DmaEngine {
    /// Queue the command in `slot`; `true`: the engine was idle, send it
    /// a call.
    #[inline]
    fn issue(&mut self, slot: u32) -> bool {
        self.queue.push(slot)
    }

    /// A call at `now`: the head sets up for `setup` once `ready` says
    /// its inputs are set (see [`InOrderQueue::serve`]).
    #[inline]
    fn serve(&mut self, now: Ps, setup: Ps, ready: impl FnOnce(u32) -> bool) -> Step {
        self.queue.serve(now, ready, |_| setup)
    }

    /// The head's setup is over: its transfer starts and it leaves the
    /// engine. Its slot, and whether the next command's turn needs a call.
    #[inline]
    fn start_transfer(&mut self) -> (u32, bool) {
        let slot = self.queue.leave();
        (slot, self.queue.next_turn())
    }
}

/// Every DMA command issued and not landed, by slot (an engine's queue
/// and a landing call name their slots; a freed slot is used again first).
///
/// Not a `slab::Slab`: its `remove` moves the command out (a 144-byte
/// copy) to hand it back, and a landed command is only dropped. At 1024
/// ranks a command has often left the cache by the time it lands
/// (hundreds of other transfers ran meanwhile), and that copy read lines
/// nothing else needed: ~1 % of the engine thread's replay samples
/// (`perf`, 1024 x 16 B; 7 % in a profile of a slow hour). Here a command
/// is dropped where it lies: at 256 ranks under cachegrind, 14 fewer
/// instructions and 0.4 fewer last-level misses a ring step.
#[derive(Default)]
pub(super) struct DmaCommands {
    slots: Vec<Option<DmaCmd>>,
    /// Free slots, the latest freed last.
    free: Vec<u32>,
}

impl DmaCommands {
    /// Keep `cmd`; its slot.
    fn insert(&mut self, cmd: DmaCmd) -> usize {
        match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(cmd);
                slot as usize
            }
            None => {
                self.slots.push(Some(cmd));
                self.slots.len() - 1
            }
        }
    }

    /// Drop the command in `slot` (in place).
    pub(super) fn remove(&mut self, slot: usize) {
        let held = &mut self.slots[slot];
        assert!(held.is_some(), "DMA command slot {slot} removed twice");
        *held = None;
        self.free.push(slot as u32);
    }
}

impl std::ops::Index<usize> for DmaCommands {
    type Output = DmaCmd;
    fn index(&self, slot: usize) -> &DmaCmd {
        self.slots[slot].as_ref().expect("a DMA command in flight")
    }
}

impl std::ops::IndexMut<usize> for DmaCommands {
    fn index_mut(&mut self, slot: usize) -> &mut DmaCmd {
        self.slots[slot].as_mut().expect("a DMA command in flight")
    }
}

pub(super) fn time_fault(
    what: DmaKind,
    nbytes: u64,
    start: Ps,
) -> impl Fn(TimeOverflow) -> HwError {
    move |source| HwError::TimeOverflow {
        what: format!("a {} of {nbytes} bytes issued at {start} ps", what.name()),
        source,
    }
}

impl Machine {
    /// A DMA command on `pe`'s DMA engine copying `src` to `dst`; `what`
    /// names it in the trace.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn dma(
        self: &Arc<Self>,
        what: DmaKind,
        at: Issuer,
        src: (Space, u64),
        dst: (Space, u64),
        nbytes: u64,
        inputs: Operands,
        done: Event,
    ) -> Result<(), HwError> {
        self.dma_with(what, at, (src, dst), nbytes, inputs, done, None)
    }

    /// [`Machine::dma`], with the message it carries to a PE of another
    /// partition, if it does.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn dma_with(
        self: &Arc<Self>,
        what: DmaKind,
        at: Issuer,
        (src, dst): ((Space, u64), (Space, u64)),
        nbytes: u64,
        inputs: Operands,
        done: Event,
        remote: Option<Box<(usize, crate::hw::mail::Message)>>,
    ) -> Result<(), HwError> {
        let pe = at.pe;
        let spec = &self.topo.spec;
        let st = self.pe(pe);
        let part = self.part_of(pe)?;
        let path = st.routes.lock().get(
            &self.router,
            &part.links,
            src.0.node_at(src.1, spec),
            dst.0.node_at(dst.1, spec),
        )?;
        self.track(st, at.comm, &done);
        let logged = self.issue_marks(at, Some(&done));
        let index = self.pe_index(pe);
        let slot = part.dma_commands.lock().insert(DmaCmd {
            pe: index,
            what,
            src,
            dst,
            nbytes,
            inputs,
            done: Some(done),
            path: Some(path),
            logged,
            span: (0, 0),
            remote,
            lands_elsewhere: false,
            across: dst.0.sip() != pe.sip,
        });
        let slot = u32::try_from(slot).expect("fewer than 2^32 commands in flight");
        if st.dma.lock().issue(slot) {
            engine::call_soon(self.engine_call(part, Served::Dma(index)));
        }
        Ok(())
    }

    /// A call for the DMA engine of the PE of state index `index`: move
    /// its head command on.
    pub(super) fn serve_dma(self: &Arc<Self>, part: &Partition, call: Call, index: usize) {
        let st = self.state_at(index);
        let step = st
            .dma
            .lock()
            .serve(engine::now(), self.timing.dma_setup, |slot| {
                let cmds = part.dma_commands.lock();
                let waker = engine::call_waker(call);
                let inputs = &cmds[slot as usize].inputs;
                inputs.iter().all(|t| t.ready.is_set_or_wake(&waker))
            });
        match step {
            Step::Nothing => {}
            Step::Sleep(set_up) => engine::call_at(set_up, call),
            Step::Leave { span, .. } => self.start_transfer(part, st, call, span.0),
            Step::Overflow { slot, start } => {
                let mut cmds = part.dma_commands.lock();
                let (what, nbytes) = (cmds[slot as usize].what, cmds[slot as usize].nbytes);
                cmds.remove(slot as usize);
                drop(cmds);
                let fail = time_fault(what, nbytes, start);
                self.set_fault(self.pe_at(index), what.name(), fail(TimeOverflow));
            }
        }
    }

    /// The head command of the DMA engine of `st` ends its setup (begun
    /// at `start`): the engine's next command's turn, then the transfer
    /// starts — its bytes leave the source (seed 003 §8 item 6) and its
    /// route is booked — to land at its end.
    fn start_transfer(self: &Arc<Self>, part: &Partition, st: &PeState, call: Call, start: Ps) {
        let (slot, more) = st.dma.lock().start_transfer();
        if more {
            engine::call_soon(call);
        }
        let slot = slot as usize;
        let mut cmds = part.dma_commands.lock();
        let cmd = &mut cmds[slot];
        let (what, src, dst, nbytes) = (cmd.what, cmd.src, cmd.dst, cmd.nbytes);
        let path = cmd.path.take().expect("a command is booked once");
        if !path.foreign().is_empty() {
            drop(cmds);
            return self.start_crossing(part, call, slot, start, path);
        }
        let staged = self.data.submit(DataOp::Stage {
            slot: slot as u32,
            src,
            len: nbytes,
        });
        debug_assert!(staged.is_ok(), "reading memory does not fail");
        let pe = cmd.pe;
        drop(cmds);
        let booked = self.book_transfer(part, (what, pe), &path, (src.0, dst.0), nbytes, start);
        drop(path);
        let end = match booked {
            Ok(t) => t,
            Err(e) => {
                part.dma_commands.lock().remove(slot);
                let fail = time_fault(what, nbytes, start);
                return self.set_fault(self.pe_at(pe), what.name(), fail(e));
            }
        };
        let key = {
            let mut cmds = part.dma_commands.lock();
            cmds[slot].span = (start, end);
            cmds[slot].landing_key()
        };
        if end > engine::now() {
            Machine::land_at(end, key, Machine::sibling_call(call, Served::Landing(slot)));
        } else {
            self.land_transfer(part, slot);
        }
    }

    /// A call for the transfer of the command in `slot`: its bytes land,
    /// then its counts and log, then its waiters.
    pub(super) fn land_transfer(&self, part: &Partition, slot: usize) {
        let mut cmds = part.dma_commands.lock();
        let cmd = &mut cmds[slot];
        let (pe, what, src, dst, nbytes, span) =
            (cmd.pe, cmd.what, cmd.src, cmd.dst, cmd.nbytes, cmd.span);
        let landed = match cmd.lands_elsewhere {
            // Its partition lands the bytes (see `super::crossings`).
            true => Ok(()),
            false => self.data.submit(DataOp::Land {
                slot: slot as u32,
                dst,
                who: Culprit {
                    pe,
                    what: what.name(),
                    at: engine::now(),
                },
            }),
        };
        if let Err(f) = landed {
            cmds.remove(slot);
            drop(cmds);
            return self.set_fault(self.pe_at(pe), what.name(), f.error.into());
        }
        {
            let mut s = part.stats.lock();
            s.dma_commands += 1;
            s.bytes_moved += nbytes;
        }
        let done = cmd.done.take().expect("a command completes once");
        if let Some(marks) = cmd.logged.take() {
            self.log_op(|| Completed {
                op: what.log_name(),
                pe: Some(self.pe_at(pe)),
                comm: marks.comm,
                unit: None,
                span,
                after: marks.after,
                queue_prev: marks.queue_prev,
                inputs: cmd.inputs.iter().map(|t| t.ready.clone()).collect(),
                produces: Some(done.clone()),
                params: OpParams::Copy {
                    src: (src.0, src.1, nbytes),
                    dst: (dst.0, dst.1, nbytes),
                },
            });
        }
        // Its inputs go (in place) before its waiters run.
        let inputs = std::mem::take(&mut cmd.inputs);
        cmds.remove(slot);
        drop(cmds);
        drop(inputs);
        done.set();
    }

    /// Schedule a transfer's landing `call` at `end`: a keyed event if it
    /// has a key (see [`DmaCmd::landing_key`]).
    pub(super) fn land_at(end: Ps, key: Option<engine::OrderKey>, call: Call) {
        match key {
            Some(key) => engine::call_keyed_at(end, key, call),
            None => engine::call_at(end, call),
        }
    }

    /// Book a DMA's transfer on its path from now: its end. With a trace,
    /// the engine's span from `start` and each link's busy interval.
    fn book_transfer(
        &self,
        part: &Partition,
        (what, pe): (DmaKind, usize),
        path: &RouteHops,
        (from, to): (Space, Space),
        nbytes: u64,
        start: Ps,
    ) -> Result<Ps, crate::units::TimeOverflow> {
        let now = engine::now();
        let rate = self.timing.local_rate;
        let Some(tr) = &self.trace else {
            return part.links.lock().reserve(path, now, nbytes, rate, None);
        };
        let mut busy = Vec::new();
        let end = part
            .links
            .lock()
            .reserve(path, now, nbytes, rate, Some(&mut busy))?;
        let name = format!("{} {nbytes} B {from} -> {to}", what.name());
        tr.record(Track::Dma(self.pe_at(pe)), name.clone(), start, end);
        for (link, a, b) in busy {
            tr.record(Track::Link(link), name.clone(), a, b);
        }
        Ok(end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Executor, RunOutcome};
    use crate::hw::dtype::Dtype;
    use crate::topology::PeCoord;

    /// The test machine, its first PE, 8 f16 in HBM to load, an executor.
    fn machine_with_a_source() -> (Arc<Machine>, PeCoord, crate::hw::TensorRef, Executor) {
        let (m, pe) = super::super::test_machine();
        let src = m
            .alloc_tensor(Space::Hbm { sip: 0, cube: 0 }, &[8], Dtype::F16)
            .unwrap();
        (m, pe, src, Executor::new())
    }

    /// The engine is busy for a command's setup only: the next command's
    /// setup starts while the first one's bytes are still in flight, so
    /// two small loads land one setup apart.
    #[test]
    fn the_next_command_sets_up_while_the_transfer_is_in_flight() {
        let (m, pe, src, ex) = machine_with_a_source();
        let mm = m.clone();
        let h = ex.spawn(async move {
            let a = mm.load(pe, src.addr(), &[8], Dtype::F16).unwrap();
            let b = mm.load(pe, src.addr(), &[8], Dtype::F16).unwrap();
            a.ready.wait().await;
            let first = engine::now();
            b.ready.wait().await;
            (first, engine::now())
        });
        assert_eq!(ex.run(), RunOutcome::Finished);
        let (first, second) = h.try_take().unwrap();
        let setup = m.timing.dma_setup;
        assert!(
            setup > 0 && first > setup,
            "a load sets up, then crosses links"
        );
        assert!(first - setup > 0, "16 bytes take time on the path");
        assert_eq!(
            second - first,
            setup,
            "the second transfer starts one setup later"
        );
        assert_eq!(m.stats().dma_commands, 2);
    }

    /// A landing the host-memory budget refuses is the run's fault, the
    /// same (time, PE, unit, budget) whether the engine thread wrote the
    /// bytes or the data thread did and the engine found out later.
    #[test]
    fn a_refused_landing_is_the_same_fault_on_either_thread() {
        let fault = |threaded: bool| {
            let spec = crate::config::TopologySpec::default_embedded();
            let topo = Arc::new(crate::topology::build(&spec).unwrap());
            // One page: the source's, written below.
            let budget = Arc::new(crate::budget::MemoryBudget::new(4096));
            let m = Machine::with_options(topo, false, budget);
            if threaded {
                m.move_bytes_on_a_thread();
            }
            let hbm = Space::Hbm { sip: 0, cube: 0 };
            let src = m.alloc_tensor(hbm, &[8], Dtype::F16).unwrap();
            m.host_write(hbm, src.offset, &Dtype::F16.from_f64(&[1.0; 8]))
                .unwrap();
            let pe = PeCoord {
                sip: 0,
                cube: 0,
                pe: 0,
            };
            let ex = Executor::new();
            let mm = m.clone();
            ex.spawn(async move {
                let t = mm.load(pe, src.addr(), &[8], Dtype::F16).unwrap();
                t.ready.wait().await;
            });
            ex.run();
            m.settle_data();
            m.fault().expect("the landing was refused")
        };
        let (inline, threaded) = (fault(false), fault(true));
        assert!(inline.0 > 0, "{inline:?}");
        assert!(inline.1.contains("host memory budget"), "{inline:?}");
        assert_eq!(inline, threaded);
    }

    /// Commands that finish in issue order are forgotten as the next is
    /// issued: a long kernel's list of commands in flight stays short
    /// (the scan of every event held happened at 64, 128, ... before).
    #[test]
    fn commands_finished_in_order_are_forgotten_at_once() {
        let (m, pe, src, ex) = machine_with_a_source();
        let mm = m.clone();
        let h = ex.spawn(async move {
            let mut longest = 0;
            for _ in 0..200 {
                let t = mm.load(pe, src.addr(), &[8], Dtype::F16).unwrap();
                longest = longest.max(mm.pe(pe).outstanding.lock().len());
                t.ready.wait().await;
            }
            (longest, mm.take_outstanding(pe).len())
        });
        assert_eq!(ex.run(), RunOutcome::Finished);
        assert_eq!(h.try_take().unwrap(), (1, 1), "only the last load is held");
    }

    /// A landed command is dropped in its slot (its operands with it),
    /// the slot is used again first, and removing it twice is a bug
    /// caught at once.
    #[test]
    fn command_slots_drop_in_place_and_are_used_again_first() {
        let (m, _, src, _) = machine_with_a_source();
        let cmd = |nbytes| DmaCmd {
            pe: 0,
            what: DmaKind::Load,
            src: (src.space, src.offset),
            dst: (src.space, src.offset),
            nbytes,
            inputs: std::iter::once(src.clone()).collect(),
            done: None,
            path: None,
            logged: None,
            span: (0, 0),
            remote: None,
            lands_elsewhere: false,
            across: false,
        };
        let mut cmds = DmaCommands::default();
        let (a, b) = (cmds.insert(cmd(1)), cmds.insert(cmd(2)));
        assert_eq!((a, b, cmds[b].nbytes), (0, 1, 2));
        assert_eq!(Arc::strong_count(&src), 3);
        cmds.remove(a);
        assert_eq!(Arc::strong_count(&src), 2, "its operand is released");
        assert_eq!(cmds.insert(cmd(3)), a);
        assert_eq!(cmds[a].nbytes, 3);
        cmds.remove(b);
        let twice = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cmds.remove(b)));
        assert!(twice.is_err());
        drop((cmds, m));
    }
}
