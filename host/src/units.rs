//! Time and rate units: the single owner of conversions to simulated time.
//!
//! Simulated time is an integer number of picoseconds ([`Ps`]). Config
//! figures (ns, GB/s, G elements/s) are converted here and nowhere else;
//! durations are rounded up to the next picosecond so that no transfer takes
//! zero time.

/// Simulated time or duration in picoseconds.
pub type Ps = u64;

pub const PS_PER_NS: u64 = 1_000;
pub const PS_PER_US: u64 = 1_000_000;
pub const PS_PER_S: u64 = 1_000_000_000_000;

/// Nanoseconds (possibly fractional, from config) to picoseconds, rounded to
/// the nearest picosecond.
pub fn ns_to_ps(ns: f64) -> Ps {
    (ns * PS_PER_NS as f64).round().max(0.0) as Ps
}

/// A transfer or processing rate, in units per second (bytes/s or
/// elements/s), held as an integer so that durations are exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(u64);

impl Rate {
    /// From a figure in giga-units per second (GB/s = 1e9 bytes/s).
    pub fn from_giga_per_s(g: f64) -> Rate {
        Rate(((g * 1e9).round() as u64).max(1))
    }

    pub fn giga_per_s(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// Time to move `units` at this rate, rounded up to a whole picosecond.
    pub fn duration_ps(self, units: u64) -> Ps {
        let num = units as u128 * PS_PER_S as u128;
        num.div_ceil(self.0 as u128) as Ps
    }
}

/// Picoseconds as (fractional) microseconds, for reports.
pub fn ps_to_us(ps: Ps) -> f64 {
    ps as f64 / PS_PER_US as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_round_up() {
        let r = Rate::from_giga_per_s(100.0); // 100 bytes per ns
        assert_eq!(r.duration_ps(100), 1_000);
        assert_eq!(r.duration_ps(1), 10);
        assert_eq!(Rate::from_giga_per_s(3.0).duration_ps(1), 334);
        assert_eq!(ns_to_ps(2.5), 2_500);
    }
}
