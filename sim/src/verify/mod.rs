//! The second pass (`--verify-data`, seed ADR-0052, DESIGN §3): what the
//! op log of a run says about the run's data. Two checks, each its own
//! module:
//! * [`replay`]: a pure data executor replays the log in an order that
//!   keeps every dependency but otherwise differs from the first pass, from
//!   an empty memory image, and compares every byte the first pass wrote;
//! * [`races`]: two ops that touch overlapping bytes, at least one writing,
//!   with no chain of dependencies between them.
//!
//! A race is what lets the two passes differ; a mismatch with no race is a
//! simulator bug (the data executor and the timed machine disagree).

mod races;
mod replay;

use crate::address::Space;
use crate::budget::MemoryBudget;
use crate::hw::compute_op::Region;
use crate::hw::oplog::{OpLog, OpRecord};
use std::fmt::Write as _;
use std::sync::Arc;

pub use races::{find_races, Race, RaceKind};
pub use replay::{replay, Mismatch, Replay};

/// How many races and mismatches a report lists in full.
pub const LISTED: usize = 20;

/// Whether races fail the run (`--verify-data=strict`) or are warnings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strictness {
    Warn,
    Strict,
}

/// The outcome of the second pass.
#[derive(Debug, Clone)]
pub struct Verification {
    /// Ops with a memory effect replayed.
    pub ops: usize,
    /// Bytes the first pass wrote, all compared.
    pub bytes: u64,
    pub mismatches: Vec<Mismatch>,
    pub races: Vec<Race>,
    pub strictness: Strictness,
    /// The records the lists name, by id (for the report).
    named: Vec<OpRecord>,
}

impl Verification {
    /// The run's data is wrong (a mismatch), or racy under `strict`.
    pub fn failed(&self) -> bool {
        !self.mismatches.is_empty()
            || (self.strictness == Strictness::Strict && !self.races.is_empty())
    }

    fn name(&self, id: u64) -> String {
        self.named
            .iter()
            .find(|r| r.id == id)
            .map_or(format!("#{id}"), OpRecord::describe)
    }

    /// The report's lines: `verify: OK (N ops, M bytes)` or what went
    /// wrong, op by op.
    pub fn report(&self) -> String {
        let mut out = String::new();
        let status = if self.failed() {
            "FAILED"
        } else if self.races.is_empty() {
            "OK"
        } else {
            "OK with warnings"
        };
        let _ = writeln!(
            out,
            "verify: {status} ({} ops replayed, {} bytes compared, {} mismatch(es), {} race(s))",
            self.ops,
            self.bytes,
            self.mismatches.len(),
            self.races.len()
        );
        for m in self.mismatches.iter().take(LISTED) {
            let _ = writeln!(out, "  mismatch {}", region(m.region));
            for (pass, w) in [("first pass", m.first_writer), ("replay", m.replay_writer)] {
                let who = w.map_or("nobody (initial memory)".into(), |id| self.name(id));
                let _ = writeln!(out, "    last written in the {pass} by {who}");
            }
            let _ = writeln!(out, "    {}", m.advice());
        }
        if self.mismatches.len() > LISTED {
            let _ = writeln!(
                out,
                "  ... {} more mismatch(es)",
                self.mismatches.len() - LISTED
            );
        }
        let level = match self.strictness {
            Strictness::Strict => "error",
            Strictness::Warn => "warning",
        };
        for r in self.races.iter().take(LISTED) {
            let _ = writeln!(
                out,
                "  {level}: {} race on {}\n    {}\n    {}\n    {}",
                r.kind.name(),
                region(r.region),
                self.name(r.first),
                self.name(r.second),
                r.advice()
            );
        }
        if self.races.len() > LISTED {
            let _ = writeln!(out, "  ... {} more race(s)", self.races.len() - LISTED);
        }
        out
    }
}

/// `sip0.cube0.pe1.tcm [0x40, 0x80)` (space and byte range).
pub fn region((space, offset, len): Region) -> String {
    format!("{space} [{offset:#x}, {:#x})", offset + len)
}

/// Run both checks on `log`; `first_pass` reads the machine's memory as
/// the first pass left it.
pub fn verify(
    log: &OpLog,
    first_pass: impl Fn(Space, u64, u64) -> Vec<u8>,
    budget: Arc<MemoryBudget>,
    strictness: Strictness,
) -> Result<Verification, crate::budget::BudgetExceeded> {
    let races = find_races(log);
    let Replay {
        ops,
        bytes,
        mismatches,
    } = replay(log, first_pass, budget)?;
    let mut ids: Vec<u64> = races.iter().flat_map(|r| [r.first, r.second]).collect();
    for m in &mismatches {
        ids.extend(m.first_writer);
        ids.extend(m.replay_writer);
    }
    ids.sort_unstable();
    ids.dedup();
    let named = ids
        .into_iter()
        .map(|id| log.records()[id as usize].clone())
        .collect();
    Ok(Verification {
        ops,
        bytes,
        mismatches,
        races,
        strictness,
        named,
    })
}
