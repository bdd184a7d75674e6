//! The host-memory budget of one run: the single owner of how much host
//! memory the simulated memory pages, the guests' linear memories and their
//! captured output may use *together*. Every grower charges it before it
//! grows and gives back what it frees, so a run that would exceed the budget
//! stops with an error that says what asked and what already holds memory,
//! instead of driving the machine into swap or the OOM killer.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// What host memory is used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryUse {
    /// The host process itself when the run started (code, compiled
    /// components, the topology): counted so that the budget bounds the
    /// whole process, not only what the run adds.
    Host,
    /// Written pages of the simulated HBM / SRAM / TCM.
    SimulatedMemory,
    /// Bench and kernel instances: their linear memories plus a fixed
    /// host-side overhead each (`runtime::limits::INSTANCE_HOST_OVERHEAD`).
    GuestMemory,
    /// Captured guest stdout / stderr / `tl.log`.
    GuestOutput,
    /// Kernels' recorded `tl` calls awaiting replay.
    KernelCommands,
    /// The op log (`--oplog`, `--verify-data`).
    OpLog,
    /// Installed IPCQ rings: the host's structures of each ring and its
    /// neighbour-table entry (`crate::hw::ipcq`), not their slots, whose
    /// written pages are simulated memory.
    IpcqRings,
}

impl MemoryUse {
    const ALL: [MemoryUse; 7] = [
        MemoryUse::Host,
        MemoryUse::SimulatedMemory,
        MemoryUse::GuestMemory,
        MemoryUse::GuestOutput,
        MemoryUse::KernelCommands,
        MemoryUse::OpLog,
        MemoryUse::IpcqRings,
    ];

    fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            MemoryUse::Host => "the host itself",
            MemoryUse::SimulatedMemory => "simulated memory pages",
            MemoryUse::GuestMemory => "guest instances",
            MemoryUse::GuestOutput => "captured guest output",
            MemoryUse::KernelCommands => "recorded kernel commands",
            MemoryUse::OpLog => "the op log",
            MemoryUse::IpcqRings => "IPCQ rings",
        }
    }
}

/// A charge the budget refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "host memory budget of {} exhausted: {} asked for {} more while {} are in use ({}); \
     raise it with --memory-budget (default: half of this machine's memory) or make the run smaller",
    human_bytes(*limit),
    asked_by,
    human_bytes(*asked),
    human_bytes(*in_use),
    breakdown
)]
pub struct BudgetExceeded {
    pub limit: u64,
    pub asked_by: String,
    pub asked: u64,
    pub in_use: u64,
    pub breakdown: String,
}

/// A run's host-memory budget. Cheap to charge (two atomic operations);
/// shared by reference between the machine and the runtime.
pub struct MemoryBudget {
    limit: u64,
    used: [AtomicU64; MemoryUse::ALL.len()],
    peak: AtomicU64,
    /// Charges (count, bytes) since the process's resident size was last
    /// compared with the limit.
    unsampled: (AtomicU64, AtomicU64),
    /// Whether the limit bounds the whole process ([`Self::bound_resident`]),
    /// so that its resident size is compared with it.
    bounds_resident: std::sync::atomic::AtomicBool,
}

/// How far the process's resident size may pass the budget before a
/// charge fails even though what was charged fits: a quarter of the
/// budget, at least 64 MiB. What is charged is an estimate of what each
/// use holds (a report row's fields, not the allocator's slack or the
/// table built from it); the resident size is the truth, sampled every
/// [`SAMPLE_CHARGES`] charges or [`SAMPLE_BYTES`] charged.
pub fn resident_margin(limit: u64) -> u64 {
    (limit / 4).max(64 << 20)
}

/// See [`resident_margin`].
pub const SAMPLE_CHARGES: u64 = 4096;
/// See [`resident_margin`].
pub const SAMPLE_BYTES: u64 = 8 << 20;

impl fmt::Debug for MemoryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MemoryBudget({} of {})", self.in_use(), self.limit)
    }
}

impl MemoryBudget {
    pub fn new(limit: u64) -> Self {
        MemoryBudget {
            limit,
            used: Default::default(),
            peak: AtomicU64::new(0),
            unsampled: (AtomicU64::new(0), AtomicU64::new(0)),
            bounds_resident: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// A budget nothing can exhaust (unit tests of single components).
    pub fn unlimited() -> Self {
        Self::new(u64::MAX)
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes in use over every kind of use.
    pub fn in_use(&self) -> u64 {
        self.used.iter().map(|u| u.load(Ordering::Relaxed)).sum()
    }

    pub fn used_by(&self, what: MemoryUse) -> u64 {
        self.used[what.index()].load(Ordering::Relaxed)
    }

    /// The most ever in use at once.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// Take `bytes` for `what`, or refuse (nothing taken) with a report.
    /// `who` (formatted only when the budget refuses) names the asker in
    /// the error (a PE, a rank, a tensor).
    pub fn charge(
        &self,
        what: MemoryUse,
        bytes: u64,
        who: impl std::fmt::Display,
    ) -> Result<(), BudgetExceeded> {
        let in_use = self.afford(what, bytes, &who)?;
        let count = self.unsampled.0.fetch_add(1, Ordering::Relaxed) + 1;
        let charged = self.unsampled.1.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if self.bounds_resident.load(Ordering::Relaxed)
            && (count >= SAMPLE_CHARGES || charged >= SAMPLE_BYTES)
        {
            self.unsampled.0.store(0, Ordering::Relaxed);
            self.unsampled.1.store(0, Ordering::Relaxed);
            self.check_resident(what, bytes, &who)?;
        }
        self.used[what.index()].fetch_add(bytes, Ordering::Relaxed);
        self.peak.fetch_max(in_use + bytes, Ordering::Relaxed);
        Ok(())
    }

    /// The limit bounds the whole process: the process's resident size when
    /// the run started was charged (as the CLI does), so from now on a
    /// charge also compares the resident size with the limit. Library
    /// callers that budget only what a run adds (no baseline) leave it off.
    pub fn bound_resident(&self) {
        self.bounds_resident.store(true, Ordering::Relaxed);
    }

    /// Refuse when the process's resident size and the `bytes` asked for
    /// would pass the budget by more than [`resident_margin`], whatever
    /// was charged.
    pub fn check_resident(
        &self,
        what: MemoryUse,
        bytes: u64,
        who: impl std::fmt::Display,
    ) -> Result<(), BudgetExceeded> {
        // What is asked for becomes resident too: a guest's memory grows
        // by its whole request at once (7 ranks' 200 MB each passed a 1 GiB
        // budget's margin by 150 MiB when only the resident size counted).
        let resident = Self::process_resident();
        if resident.saturating_add(bytes) <= self.limit.saturating_add(resident_margin(self.limit))
        {
            return Ok(());
        }
        let mut e = self.exceeded(what, bytes, who, resident);
        e.breakdown = format!(
            "the process's resident size, more than the {} charged: {}",
            human_bytes(self.in_use()),
            e.breakdown
        );
        Err(e)
    }

    /// The refusal of `bytes` more of `what` for `who` with `in_use` in use.
    fn exceeded(
        &self,
        what: MemoryUse,
        bytes: u64,
        who: impl std::fmt::Display,
        in_use: u64,
    ) -> BudgetExceeded {
        let who = who.to_string();
        BudgetExceeded {
            limit: self.limit,
            asked_by: if who.is_empty() {
                what.name().to_string()
            } else {
                format!("{} ({who})", what.name())
            },
            asked: bytes,
            in_use,
            breakdown: MemoryUse::ALL
                .iter()
                .map(|u| format!("{} {}", u.name(), human_bytes(self.used_by(*u))))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// Whether `bytes` more of `what` would fit now, taking nothing: the
    /// error [`MemoryBudget::charge`] would give, or the bytes in use.
    /// For a grower that can tell what it will need before it makes the
    /// working data that tells it exactly.
    pub fn afford(
        &self,
        what: MemoryUse,
        bytes: u64,
        who: impl std::fmt::Display,
    ) -> Result<u64, BudgetExceeded> {
        let in_use = self.in_use();
        if in_use
            .checked_add(bytes)
            .is_none_or(|total| total > self.limit)
        {
            return Err(self.exceeded(what, bytes, who, in_use));
        }
        Ok(in_use)
    }

    /// Give back `bytes` taken for `what`.
    pub fn release(&self, what: MemoryUse, bytes: u64) {
        let prev = self.used[what.index()].fetch_sub(bytes, Ordering::Relaxed);
        debug_assert!(prev >= bytes, "released more {} than charged", what.name());
    }

    /// Resident memory of this process now (Linux `/proc/self/statm`;
    /// 0 where it cannot be read).
    pub fn process_resident() -> u64 {
        std::fs::read_to_string("/proc/self/statm")
            .ok()
            .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
            .map(|pages| pages * 4096)
            .unwrap_or(0)
    }

    /// The default budget: half of this machine's physical memory (Linux
    /// `/proc/meminfo`), or 4 GiB where that cannot be read.
    pub fn default_limit() -> u64 {
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|kib| kib.parse::<u64>().ok())
            })
            .map(|kib| kib * 1024 / 2)
            .unwrap_or(4 << 30)
    }
}

/// `1536` → `1.5 KiB`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

/// Parse a size as a user writes it: `512M`, `4G`, `1.5GiB`, `1048576`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size (e.g. 512M, 4G, 1048576)"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => {
            return Err(format!(
                "'{s}': unknown size unit '{other}' (use K, M, G or T)"
            ))
        }
    };
    let bytes = v * mult as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("'{s}' is too large"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_resident_size_is_checked_whatever_was_charged() {
        // 96 MiB touched: more than the 64 MiB margin over a 1-byte budget.
        let held = vec![1u8; 96 << 20];
        let b = MemoryBudget::new(1);
        let e = b
            .check_resident(MemoryUse::GuestOutput, 8, "bench")
            .unwrap_err();
        assert!(e.to_string().contains("the process's resident size"), "{e}");
        // Charges sample the resident size only once the budget is told
        // it bounds the process (16 MiB + the 64 MiB margin < the 96 held).
        let b = MemoryBudget::new(16 << 20);
        for _ in 0..2 * SAMPLE_CHARGES {
            b.charge(MemoryUse::GuestOutput, 1, "x").unwrap();
        }
        b.bound_resident();
        let refused =
            (0..2 * SAMPLE_CHARGES).any(|_| b.charge(MemoryUse::GuestOutput, 1, "x").is_err());
        assert!(refused);
        std::hint::black_box(&held);
        assert_eq!(resident_margin(1 << 30), 256 << 20);
    }

    use super::*;

    #[test]
    fn charges_up_to_the_limit_and_reports_who_holds_what() {
        let b = MemoryBudget::new(1000);
        b.charge(MemoryUse::SimulatedMemory, 600, "").unwrap();
        b.charge(MemoryUse::GuestMemory, 400, "rank 0").unwrap();
        let e = b
            .charge(MemoryUse::GuestOutput, 1, "sip0.cube0.pe0")
            .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("captured guest output (sip0.cube0.pe0) asked for 1 B"),
            "{msg}"
        );
        assert!(msg.contains("simulated memory pages 600 B"), "{msg}");
        assert!(msg.contains("--memory-budget"), "{msg}");
        b.release(MemoryUse::SimulatedMemory, 600);
        b.charge(MemoryUse::GuestOutput, 600, "").unwrap();
        assert_eq!(b.in_use(), 1000);
        assert_eq!(b.peak(), 1000);
        assert!(b.charge(MemoryUse::GuestOutput, u64::MAX, "").is_err());
    }

    #[test]
    fn sizes_parse_as_users_write_them() {
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("4G").unwrap(), 4 << 30);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("1048576").unwrap(), 1 << 20);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("3X").is_err());
        assert!(parse_size("99999999999T").is_err());
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(12), "12 B");
    }
}
