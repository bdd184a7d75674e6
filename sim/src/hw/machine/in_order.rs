//! The discipline every PE engine keeps, whatever it executes: commands
//! one at a time in issue order. The head command waits for its inputs,
//! keeps the engine busy for its time, then leaves, and the next one's
//! turn comes before the leaving one's waiters run.
//!
//! [`InOrderQueue`] owns that discipline and nothing else: which slot is
//! at the head and where it is ([`Phase`]). It neither reads a clock nor
//! sends a call: it is told the time and whether the head's inputs are
//! ready, and answers with the [`Step`] its engine takes next. What a
//! command is, what its time is and what it does when it leaves belong to
//! the engines ([`super::dma_engine::DmaEngine`],
//! [`super::compute_unit::ComputeUnit`]); the calls that drive them to
//! [`super::engine_calls`].

use crate::units::Ps;
use std::collections::VecDeque;

/// Where the head command of an in-order engine is.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub(super) enum Phase {
    /// No command.
    #[default]
    Idle,
    /// A call is on its way to look at the head command.
    Scheduled,
    /// The head command waits for an input (a call waker is on it).
    Waiting,
    /// The head command keeps the engine busy until `end` (a timer call):
    /// a compute command's whole time, a DMA command's setup.
    Busy { start: Ps, end: Ps },
    /// The head command hit a fault (its time or its memory): the engine
    /// serves nothing more (the run stops with the fault).
    Stuck,
}

/// What an engine does after a call, as [`InOrderQueue::serve`] decides.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Step {
    /// Nothing: the head waits for an input (the `ready` check left a
    /// waker on it), or the call had nothing to do.
    Nothing,
    /// The head keeps the engine busy until this time: call again then.
    Sleep(Ps),
    /// The head's time is over: it leaves now (see
    /// [`InOrderQueue::leave`]); it held the engine over `span`.
    Leave { slot: u32, span: (Ps, Ps) },
    /// The head's end is past the last picosecond: it was taken off the
    /// queue and the engine is stuck. Its engine drops the command and
    /// reports the fault.
    Overflow { slot: u32, start: Ps },
}

/// An engine's commands (slots of its machine's table of records), oldest
/// first, and the head's phase.
#[derive(Default, Debug)]
pub(super) struct InOrderQueue {
    slots: VecDeque<u32>,
    phase: Phase,
}

impl InOrderQueue {
    /// Queue `slot` behind the commands before it; `true` when the engine
    /// was idle, so a call must be sent to serve it.
    #[inline]
    pub(super) fn push(&mut self, slot: u32) -> bool {
        self.slots.push_back(slot);
        let idle = self.phase == Phase::Idle;
        if idle {
            self.phase = Phase::Scheduled;
        }
        idle
    }

    /// A call at `now`: move the head on. `ready(slot)` says whether the
    /// head's inputs are all set (leaving a waker on the first that is
    /// not); `busy(slot)` is how long it keeps the engine once they are.
    #[inline]
    pub(super) fn serve(
        &mut self,
        now: Ps,
        ready: impl FnOnce(u32) -> bool,
        busy: impl FnOnce(u32) -> Ps,
    ) -> Step {
        match self.phase {
            Phase::Scheduled | Phase::Waiting => {
                let slot = *self
                    .slots
                    .front()
                    .expect("an engine with a phase has a command");
                if !ready(slot) {
                    self.phase = Phase::Waiting;
                    return Step::Nothing;
                }
                let Ok(end) = crate::units::add(now, busy(slot)) else {
                    self.phase = Phase::Stuck;
                    self.slots.pop_front();
                    return Step::Overflow { slot, start: now };
                };
                self.phase = Phase::Busy { start: now, end };
                if end > now {
                    Step::Sleep(end)
                } else {
                    // A sleep until now ends at once.
                    Step::Leave {
                        slot,
                        span: (now, end),
                    }
                }
            }
            Phase::Busy { start, end } if now >= end => Step::Leave {
                slot: *self.slots.front().expect("a busy engine has a command"),
                span: (start, end),
            },
            // A call with nothing to do (none is sent so; harmless).
            Phase::Busy { .. } | Phase::Idle | Phase::Stuck => Step::Nothing,
        }
    }

    /// The head (a [`Step::Leave`]) leaves the queue; its slot.
    #[inline]
    pub(super) fn leave(&mut self) -> u32 {
        self.slots
            .pop_front()
            .expect("a leaving command is at the head")
    }

    /// The next command's turn, once the head has left: `true` when one is
    /// queued, so a call must be sent to serve it (before the leaving
    /// command's waiters run, where a task per command was woken).
    #[inline]
    pub(super) fn next_turn(&mut self) -> bool {
        let more = !self.slots.is_empty();
        self.phase = if more { Phase::Scheduled } else { Phase::Idle };
        more
    }

    /// The command that left hit a fault applying its effect: the engine
    /// serves nothing more.
    pub(super) fn stick(&mut self) {
        self.phase = Phase::Stuck;
    }

    #[cfg(test)]
    pub(super) fn phase(&self) -> Phase {
        self.phase
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a queue by hand: the time, and which slots have their inputs.
    fn serve(q: &mut InOrderQueue, now: Ps, ready: &[u32], busy: Ps) -> Step {
        q.serve(now, |s| ready.contains(&s), |_| busy)
    }

    /// Only the push that finds the engine idle asks for a call; the
    /// commands then go one at a time, in issue order, each busy for its
    /// own time from when the one before it left.
    #[test]
    fn commands_run_one_at_a_time_in_issue_order() {
        let mut q = InOrderQueue::default();
        assert!(q.push(7), "an idle engine needs a call");
        assert!(!q.push(3), "a busy one does not");
        assert_eq!(serve(&mut q, 10, &[7, 3], 5), Step::Sleep(15));
        assert_eq!(serve(&mut q, 12, &[7, 3], 5), Step::Nothing, "too early");
        let leave = Step::Leave {
            slot: 7,
            span: (10, 15),
        };
        assert_eq!(serve(&mut q, 15, &[7, 3], 5), leave);
        assert_eq!(q.leave(), 7);
        assert!(q.next_turn(), "slot 3 is queued: its turn");
        assert_eq!(serve(&mut q, 15, &[7, 3], 2), Step::Sleep(17));
        assert_eq!(serve(&mut q, 17, &[], 0), leave_of(3, (15, 17)));
        assert_eq!(q.leave(), 3);
        assert!(!q.next_turn());
        assert_eq!(q.phase(), Phase::Idle);
        assert!(q.push(4), "idle again");
    }

    fn leave_of(slot: u32, span: (Ps, Ps)) -> Step {
        Step::Leave { slot, span }
    }

    /// A head whose input is not ready waits, and the command behind it
    /// waits too even when its own inputs are ready; the head's time
    /// starts when its input comes, not when it was issued.
    #[test]
    fn the_head_waits_for_its_inputs_and_holds_the_rest_back() {
        let mut q = InOrderQueue::default();
        q.push(1);
        q.push(2);
        assert_eq!(serve(&mut q, 0, &[2], 4), Step::Nothing);
        assert_eq!(q.phase(), Phase::Waiting);
        assert_eq!(serve(&mut q, 9, &[1, 2], 4), Step::Sleep(13));
        assert_eq!(serve(&mut q, 13, &[1, 2], 4), leave_of(1, (9, 13)));
    }

    /// A command of no time leaves in the call that starts it.
    #[test]
    fn a_command_of_no_time_leaves_at_once() {
        let mut q = InOrderQueue::default();
        q.push(5);
        assert_eq!(serve(&mut q, 8, &[5], 0), leave_of(5, (8, 8)));
    }

    /// A time past the last picosecond takes the head off and stops the
    /// engine: later calls and commands do nothing.
    #[test]
    fn an_overflowing_time_sticks_the_engine() {
        let mut q = InOrderQueue::default();
        q.push(1);
        q.push(2);
        let step = serve(&mut q, Ps::MAX - 1, &[1, 2], 2);
        assert_eq!(
            step,
            Step::Overflow {
                slot: 1,
                start: Ps::MAX - 1
            }
        );
        assert_eq!(q.phase(), Phase::Stuck);
        assert!(!q.push(3), "a stuck engine asks for no call");
        assert_eq!(serve(&mut q, 0, &[2, 3], 1), Step::Nothing);
    }

    /// A fault in the leaving command's effect stops the engine too.
    #[test]
    fn a_fault_on_leaving_sticks_the_engine() {
        let mut q = InOrderQueue::default();
        q.push(1);
        q.push(2);
        assert_eq!(serve(&mut q, 0, &[1], 0), leave_of(1, (0, 0)));
        q.leave();
        q.stick();
        assert_eq!(serve(&mut q, 1, &[2], 1), Step::Nothing);
    }
}
