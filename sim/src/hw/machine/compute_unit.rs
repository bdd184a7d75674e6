//! A PE's compute unit (MATH or matrix) as a queue of command records
//! served by engine calls: no task, future or allocation per command.
//!
//! A unit is in-order: its head command waits for its inputs (and the
//! stage before it, for a composite's epilogue), keeps the unit busy for
//! its time, applies its effect, then the next one starts. The queue
//! follows each command through those phases with [`engine::Call`]s: a
//! call when the command reaches the head, one when each input it waited
//! for is set (a call waker left on the input's event), one when its busy
//! time ends (a timer). Each call comes exactly where a task per command
//! would have been polled — at issue when the unit is idle, when an
//! input is set, at the timer, and after the command before it completed
//! (before that command's waiters) — so every table and trace is the one
//! the task-per-command engine gave. The one difference: a command of no
//! duration that completes where it starts lets the next one start at
//! the end of the ready queue rather than where that one was issued.

use super::engine_calls::Served;
use super::in_order::{InOrderQueue, Step};
use super::partition::Partition;
use super::{EngineTiming, Issuer, Machine, PeState, TensorRef};
use crate::engine::{self, lock::OneThread, Call, Event};
use crate::error::HwError;
use crate::hw::compute_op::ComputeOp;
use crate::hw::data_plane::{ComputeWrite, Culprit, DataOp};
use crate::hw::oplog::{Completed, IssueMarks, OpParams};
use crate::hw::tensor::Operands;
use crate::hw::trace::Track;
use crate::topology::PeCoord;
use crate::units::{Ps, Rate, TimeOverflow};
use smallvec::SmallVec;
use std::sync::Arc;

/// A compute unit by name: one byte in a command's record, which names
/// it in traces, faults and counts.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum UnitKind {
    Math,
    Gemm,
}

impl UnitKind {
    /// The unit on `pe`.
    fn on(self, pe: &PeState) -> &OneThread<ComputeUnit> {
        match self {
            UnitKind::Math => &pe.math,
            UnitKind::Gemm => &pe.gemm,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            UnitKind::Math => "MATH",
            UnitKind::Gemm => "GEMM",
        }
    }

    /// What a call for this unit of the PE of state index `index` serves.
    fn served(self, index: usize) -> Served {
        match self {
            UnitKind::Math => Served::Math(index),
            UnitKind::Gemm => Served::Gemm(index),
        }
    }

    fn track(self, pe: PeCoord) -> Track {
        match self {
            UnitKind::Math => Track::Math(pe),
            UnitKind::Gemm => Track::Gemm(pe),
        }
    }
}

/// The unit a compute command runs on, and what its work costs there.
#[derive(Clone, Copy, Debug)]
pub(super) enum UnitCost {
    /// The vector unit: `overhead + elements / throughput`.
    Math,
    /// The matrix unit: `overhead + FLOPs / rate` (the rate of the inputs'
    /// dtype).
    Gemm(Rate),
}

impl UnitCost {
    /// The unit as its command's record keeps it (the rate is spent on
    /// the busy time at issue).
    pub(super) fn kind(self) -> UnitKind {
        match self {
            UnitCost::Math => UnitKind::Math,
            UnitCost::Gemm(_) => UnitKind::Gemm,
        }
    }

    /// How long `work` units of work keep the unit busy (DESIGN §4):
    /// `overhead + work / rate`.
    pub(super) fn busy(self, timing: &EngineTiming, work: u64) -> Result<Ps, TimeOverflow> {
        let (rate, overhead) = match self {
            UnitCost::Math => (timing.math_rate, timing.math_overhead),
            UnitCost::Gemm(rate) => (rate, timing.gemm_overhead),
        };
        rate.duration_ps(work)
            .and_then(|d| crate::units::add(d, overhead))
    }
}

/// A PE's compute unit (MATH or matrix): its commands (slots of
/// [`StageRecords`]) in issue order, each holding the unit for its whole
/// time and applying its effect as it leaves.
#[derive(Default)]
pub(super) struct ComputeUnit {
    queue: InOrderQueue,
}

impl ComputeUnit {
    /// Queue the record in `slot`; `true`: the unit was idle, send it a
    /// call.
    #[inline]
    fn issue(&mut self, slot: u32) -> bool {
        self.queue.push(slot)
    }

    /// A call at `now`: the head runs for its `busy` time once `ready`
    /// says its inputs are set (see [`InOrderQueue::serve`]).
    #[inline]
    fn serve(
        &mut self,
        now: Ps,
        ready: impl FnOnce(u32) -> bool,
        busy: impl FnOnce(u32) -> Ps,
    ) -> Step {
        self.queue.serve(now, ready, busy)
    }

    /// The head's busy time ended: it leaves; its slot.
    #[inline]
    fn complete(&mut self) -> u32 {
        self.queue.leave()
    }

    /// The head faulted: the unit stops serving (see
    /// [`InOrderQueue::stick`]).
    fn stick(&mut self) {
        self.queue.stick()
    }

    /// After [`ComputeUnit::complete`]: `true` when a next command waits
    /// and the unit needs a call for it.
    #[inline]
    fn next_turn(&mut self) -> bool {
        self.queue.next_turn()
    }
}

/// One command (or one stage of a composite) waiting for or on its unit.
pub(super) struct StageRecord {
    /// `overhead + work / rate`.
    pub busy: Ps,
    /// Units of work (the trace names it).
    pub work: u64,
    /// An earlier stage of the same command to wait for.
    pub after: Option<Event>,
    pub op: ComputeOp,
    pub inputs: Operands,
    /// The output it writes (`None`: the stage only takes time, e.g. a
    /// composite's product).
    pub out: Option<TensorRef>,
    /// Set when it completes.
    pub done: Event,
    /// What the op log needs (`None`: not recording).
    pub logged: Option<Box<IssueMarks>>,
}

/// Every compute record issued and not completed, by slot: one table for
/// all PEs, like the DMA commands. A freed slot is used again first, so a
/// record is written into memory the step before wrote (in cache); a
/// queue of records per PE was written where that PE's last step left
/// it, long out of cache at hundreds of ranks.
pub(super) type StageRecords = slab::Slab<StageRecord>;

/// A stage as traces and errors name it.
pub(super) fn describe(op: &ComputeOp, out: &Option<TensorRef>) -> String {
    match (out, op) {
        (Some(_), _) | (None, ComputeOp::Charge { .. }) => op.describe(),
        (None, _) => format!("{} (product)", op.describe()),
    }
}

impl Machine {
    /// Queue `record` on `pe`'s `unit`; it runs when the commands before
    /// it have.
    pub(super) fn enqueue_stage(
        self: &Arc<Self>,
        at: Issuer,
        unit: UnitKind,
        record: StageRecord,
    ) -> Result<(), HwError> {
        let pe = at.pe;
        let part = self.part_of(pe)?;
        let st = self.pe(pe);
        self.track(st, at.comm, &record.done);
        let slot = part.stage_records.lock().insert(record);
        let slot = u32::try_from(slot).expect("fewer than 2^32 compute records in flight");
        if unit.on(st).lock().issue(slot) {
            let index = self.pe_index(pe);
            engine::call_soon(self.engine_call(part, unit.served(index)));
        }
        Ok(())
    }

    /// A call for `unit` of the PE of state index `index`: move its head
    /// command on.
    pub(super) fn serve_unit(
        self: &Arc<Self>,
        part: &Partition,
        call: Call,
        index: usize,
        unit: UnitKind,
    ) {
        let st = self.state_at(index);
        let step = unit.on(st).lock().serve(
            engine::now(),
            |slot| {
                let records = part.stage_records.lock();
                let head = &records[slot as usize];
                // Its inputs in order, as a task awaiting each would.
                let waker = engine::call_waker(call);
                let mut waits = head
                    .after
                    .iter()
                    .chain(head.inputs.iter().map(|t| &t.ready));
                waits.all(|e| e.is_set_or_wake(&waker))
            },
            |slot| part.stage_records.lock()[slot as usize].busy,
        );
        match step {
            Step::Nothing => {}
            Step::Sleep(end) => engine::call_at(end, call),
            Step::Leave { span, .. } => self.complete_head(part, (index, st), unit, call, span),
            Step::Overflow { slot, start } => {
                let head = part.stage_records.lock().remove(slot as usize);
                let what = format!("{} issued at {start} ps", describe(&head.op, &head.out));
                drop(head);
                let source = TimeOverflow;
                let fault = HwError::TimeOverflow { what, source };
                self.set_fault(self.pe_at(index), unit.name(), fault);
            }
        }
    }

    /// The head command of `pe`'s `unit` ends its busy `span`: its effect,
    /// its counts and log, the next command's turn, then its waiters.
    fn complete_head(
        self: &Arc<Self>,
        part: &Partition,
        (index, st): (usize, &PeState),
        unit: UnitKind,
        call: Call,
        span: (Ps, Ps),
    ) {
        // Named only by the trace, the log and a fault.
        let pe = || self.pe_at(index);
        let (start, end) = span;
        let slot = unit.on(st).lock().complete();
        let record = part.stage_records.lock().remove(slot as usize);
        let StageRecord {
            work,
            op,
            inputs,
            out,
            done,
            logged,
            ..
        } = record;
        if let Some(tr) = &self.trace {
            tr.record(
                unit.track(pe()),
                format!("{} x{work}", describe(&op, &out)),
                start,
                engine::now(),
            );
        }
        if let Some(out) = &out {
            let regions: SmallVec<[_; 3]> = inputs
                .iter()
                .map(|t| (t.space, t.offset, t.nbytes()))
                .collect();
            let dst = (out.space, out.offset, out.nbytes());
            if self.parts.count() > 1 {
                let spaces = regions.iter().map(|r| r.0).chain([dst.0]);
                self.note_foreign_operands(part, unit.name(), pe, spaces);
            }
            let unit_bytes = out.dtype.itemsize();
            let written = self.data.submit(DataOp::Compute(ComputeWrite {
                op: op.clone(),
                inputs: regions,
                out: dst,
                unit: unit_bytes,
                who: Culprit {
                    pe: index,
                    what: unit.name(),
                    at: end,
                },
            }));
            if let Err(f) = written {
                unit.on(st).lock().stick();
                return self.set_fault(pe(), unit.name(), f.error.into());
            }
        }
        match unit {
            UnitKind::Math => part.stats.lock().math_commands += 1,
            UnitKind::Gemm => part.stats.lock().gemm_commands += 1,
        }
        if let (Some(out), Some(marks)) = (out, logged) {
            self.log_op(|| Completed {
                op: op.log_name(),
                pe: Some(pe()),
                comm: marks.comm,
                unit: Some(unit.name()),
                span: (start, end),
                after: marks.after,
                queue_prev: None,
                inputs: inputs.iter().map(|t| t.ready.clone()).collect(),
                produces: Some(done.clone()),
                params: OpParams::Compute {
                    inputs: inputs
                        .iter()
                        .map(|t| (t.space, t.offset, t.nbytes()))
                        .collect(),
                    out: (out.space, out.offset, out.nbytes()),
                    op,
                },
            });
        }
        // The next command's turn comes before this one's waiters run.
        if unit.on(st).lock().next_turn() {
            engine::call_soon(call);
        }
        drop(inputs);
        done.set();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::Space;
    use crate::engine::{Executor, RunOutcome};
    use crate::hw::dtype::{BinOp, Dtype};

    /// The MATH unit serves in issue order: a command whose inputs are
    /// ready waits behind an earlier one still waiting for its input,
    /// then each keeps the unit busy for its own time.
    #[test]
    fn a_unit_serves_its_commands_in_order_each_after_its_inputs() {
        let (m, pe) = super::super::test_machine();
        let hbm = Space::Hbm { sip: 0, cube: 0 };
        let n = 64u32;
        let src = m.alloc_tensor(hbm, &[n], Dtype::F16).unwrap();
        let ready = m.alloc_tensor(Space::Tcm(pe), &[n], Dtype::F16).unwrap();
        let ex = Executor::new();
        let mm = m.clone();
        let h = ex.spawn(async move {
            // A load: its tensor is ready only when the DMA lands.
            let late = mm.load(pe, src.addr(), &[n], Dtype::F16).unwrap();
            let first = mm.binary(pe, BinOp::Add, &late, &ready).unwrap();
            let second = mm.binary(pe, BinOp::Add, &ready, &ready).unwrap();
            let mut at = Vec::new();
            for t in [&late, &first, &second] {
                t.ready.wait().await;
                at.push(engine::now());
            }
            at
        });
        assert_eq!(ex.run(), RunOutcome::Finished);
        let at = h.try_take().unwrap();
        let busy = m.timing.math_overhead + m.timing.math_rate.duration_ps(n as u64).unwrap();
        assert!(at[0] > 0, "the load takes time");
        assert_eq!(at[1], at[0] + busy, "the first starts when its input lands");
        assert_eq!(at[2], at[1] + busy, "the second waits for the first");
        assert_eq!(m.stats().math_commands, 2);
    }

    /// A unit's time is `overhead + work / rate`: the MATH unit's own
    /// figures, the matrix unit's overhead with the rate of its inputs'
    /// dtype; a time past the last picosecond is an error, not a wrap.
    #[test]
    fn a_unit_s_time_is_its_overhead_plus_its_work_at_its_rate() {
        let (m, _) = super::super::test_machine();
        let t = &m.timing;
        let math = t.math_overhead + t.math_rate.duration_ps(1000).unwrap();
        assert_eq!(UnitCost::Math.busy(t, 1000), Ok(math));
        let rate = Rate::from_giga_per_s(2000.0); // 2 units a ps
        let gemm = UnitCost::Gemm(rate).busy(t, 4_000);
        assert_eq!(gemm, Ok(t.gemm_overhead + 2_000));
        let slow = UnitCost::Gemm(Rate::from_giga_per_s(1e-3));
        assert!(slow.busy(t, u64::MAX).is_err());
    }

    /// A fill has no inputs: it starts at once on the MATH unit and takes
    /// `overhead + elements / throughput`, one element of work each.
    #[test]
    fn a_fill_takes_the_unit_for_its_elements_and_nothing_else() {
        let (m, pe) = super::super::test_machine();
        let n = 96u32;
        let ex = Executor::new();
        let mm = m.clone();
        let h = ex.spawn(async move {
            let t = mm.fill(pe, &[n / 2, 2], Dtype::Bf16, 1.0 / 3.0).unwrap();
            t.ready.wait().await;
            (engine::now(), t.shape.to_vec(), t.dtype)
        });
        assert_eq!(ex.run(), RunOutcome::Finished);
        let busy = m.timing.math_overhead + m.timing.math_rate.duration_ps(n as u64).unwrap();
        assert_eq!(h.try_take().unwrap(), (busy, vec![n / 2, 2], Dtype::Bf16));
        assert_eq!(m.stats().math_commands, 1);
    }
}
