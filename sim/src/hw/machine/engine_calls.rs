//! The machine's one engine handler: which [`engine::Call`] serves which
//! PE engine. A call's argument names the engine (two low bits) and the
//! PE's state index or the DMA command whose transfer lands (the rest);
//! the handler is registered on each executor the machine runs on, once.

use super::partition::Partition;
use super::Machine;
use crate::engine::{self, Call, HandlerId};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

/// The machine's engine handler on the executor it was last registered
/// on (executor ids start at 1: 0 is none). Read without a lock on every
/// command an idle engine takes; only the engine thread writes it.
#[derive(Default)]
pub(super) struct HandlerSlot {
    executor: AtomicUsize,
    handler: AtomicU32,
}

/// What a call serves.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Served {
    /// The MATH unit of the PE of this state index.
    Math(usize),
    /// The matrix unit of the PE of this state index.
    Gemm(usize),
    /// The DMA engine of the PE of this state index.
    Dma(usize),
    /// The landing of the transfer of the DMA command in this slot of the
    /// machine's table.
    Landing(usize),
}

impl Served {
    fn arg(self) -> u32 {
        let (index, kind) = match self {
            Served::Math(i) => (i, 0),
            Served::Gemm(i) => (i, 1),
            Served::Dma(i) => (i, 2),
            Served::Landing(i) => (i, 3),
        };
        u32::try_from(index)
            .ok()
            .filter(|&i| i < (1 << 30))
            .map(|i| (i << 2) | kind)
            .expect("fewer than 2^30 PEs (the validator's node limit) and DMA commands in flight (4096 a PE)")
    }

    fn of(arg: u32) -> Served {
        let index = (arg >> 2) as usize;
        match arg & 3 {
            0 => Served::Math(index),
            1 => Served::Gemm(index),
            2 => Served::Dma(index),
            _ => Served::Landing(index),
        }
    }
}

impl Machine {
    /// The call that serves `what` of partition `part` on the running
    /// executor (which runs `part`).
    pub(super) fn engine_call(self: &Arc<Self>, part: &Partition, what: Served) -> Call {
        Call {
            handler: self.engine_handler(part),
            arg: what.arg(),
        }
    }

    /// `call`, made to serve `what` instead (the same handler).
    pub(super) fn sibling_call(call: Call, what: Served) -> Call {
        Call {
            handler: call.handler,
            arg: what.arg(),
        }
    }

    /// The handler of `part`'s engine calls, registered once per
    /// executor.
    fn engine_handler(self: &Arc<Self>, part: &Partition) -> HandlerId {
        let exec = engine::executor_id();
        let h = &part.engine_handler;
        if h.executor.load(Ordering::Acquire) == exec {
            return HandlerId::from_index(h.handler.load(Ordering::Relaxed));
        }
        self.register_handler(part, exec)
    }

    /// The handler holds the machine (as the executor's tasks that run
    /// its commands do): a weak reference was upgraded per call, two
    /// locked instructions each, full barriers, four or five calls a ring
    /// step.
    /// It serves its partition's engines: the calls it gets name only
    /// the engine.
    #[cold]
    fn register_handler(self: &Arc<Self>, part: &Partition, exec: usize) -> HandlerId {
        let (m, mine) = (self.clone(), self.parts.get(part.index).clone());
        let id = engine::register(std::rc::Rc::new(move |call: Call| m.serve(&mine, call)));
        let h = &part.engine_handler;
        h.handler.store(id.index(), Ordering::Relaxed);
        h.executor.store(exec, Ordering::Release);
        id
    }

    fn serve(self: &Arc<Self>, part: &Partition, call: Call) {
        use super::compute_unit::UnitKind;
        match Served::of(call.arg) {
            Served::Math(i) => self.serve_unit(part, call, i, UnitKind::Math),
            Served::Gemm(i) => self.serve_unit(part, call, i, UnitKind::Gemm),
            Served::Dma(i) => self.serve_dma(part, call, i),
            Served::Landing(slot) => self.land_transfer(part, slot),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_s_argument_names_what_it_serves() {
        for s in [
            Served::Math(0),
            Served::Gemm(7),
            Served::Dma(65535),
            Served::Landing((1 << 30) - 1),
        ] {
            assert_eq!(Served::of(s.arg()), s);
        }
    }
}
