//! Sizes, times and rates: the single owner of conversions to simulated
//! time and of every size and time computation that could overflow.
//!
//! Simulated time is an integer number of picoseconds ([`Ps`]). Config
//! figures (ns, GB/s, G elements/s) are converted here and nowhere else,
//! after [`check_figure`] has held them to a physical range; durations are
//! rounded up to the next picosecond so that no transfer takes zero time.
//! Sizes (a shape's element and byte counts) and time sums are checked:
//! what does not fit in 64 bits is refused ([`SizeOverflow`],
//! [`TimeOverflow`]), never wrapped, saturated or clamped.

/// Simulated time or duration in picoseconds.
pub type Ps = u64;

pub const PS_PER_NS: u64 = 1_000;
pub const PS_PER_US: u64 = 1_000_000;
pub const PS_PER_S: u64 = 1_000_000_000_000;

/// The simulated clock ran past its horizon (`u64::MAX` ps, 213 days).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the simulated clock would pass its horizon of {:.0} days (2^64 ps)", u64::MAX as f64 / PS_PER_S as f64 / 86_400.0)]
pub struct TimeOverflow;

/// `a + b` in simulated time.
pub fn add(a: Ps, b: Ps) -> Result<Ps, TimeOverflow> {
    a.checked_add(b).ok_or(TimeOverflow)
}

/// A shape whose element or byte count does not fit in 64 bits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("shape {shape:?} of {itemsize}-byte elements has more than 2^64 {what}")]
pub struct SizeOverflow {
    pub shape: Vec<u32>,
    pub itemsize: u64,
    pub what: &'static str,
}

/// Element count and byte count of `shape` with `itemsize`-byte elements.
#[inline]
pub fn tensor_size(shape: &[u32], itemsize: u64) -> Result<(u64, u64), SizeOverflow> {
    // One dimension, the common case (every message of a ring): a 32-bit
    // count of items of at most 32 bits each cannot overflow.
    if let ([d], Ok(item)) = (shape, u32::try_from(itemsize)) {
        let n = u64::from(*d);
        return Ok((n, n * u64::from(item)));
    }
    tensor_size_checked(shape, itemsize)
}

fn tensor_size_checked(shape: &[u32], itemsize: u64) -> Result<(u64, u64), SizeOverflow> {
    let overflow = |what| SizeOverflow {
        shape: shape.to_vec(),
        itemsize,
        what,
    };
    let numel = shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64))
        .ok_or_else(|| overflow("elements"))?;
    let nbytes = numel
        .checked_mul(itemsize)
        .ok_or_else(|| overflow("bytes"))?;
    Ok((numel, nbytes))
}

/// The physical range a config figure must lie in, and why.
#[derive(Debug, Clone, Copy)]
pub struct FigureRange {
    pub min: f64,
    pub max: f64,
    pub unit: &'static str,
    pub why: &'static str,
}

/// Link and memory bandwidths (GB/s per direction).
pub const BANDWIDTH_GBPS: FigureRange = FigureRange {
    min: 1e-3,
    max: 1e6,
    unit: "GB/s",
    why: "1 MB/s to 1 PB/s: slower is no accelerator link, faster is no wire",
};
/// MATH throughput (G elements/s).
pub const THROUGHPUT_GFLOPS: FigureRange = FigureRange {
    min: 1e-3,
    max: 1e7,
    unit: "G elements/s",
    why: "1 M to 10 P elements/s per PE",
};
/// Latencies and fixed overheads (ns).
pub const LATENCY_NS: FigureRange = FigureRange {
    min: 0.0,
    max: 1e6,
    unit: "ns",
    why: "0 to 1 ms per hop or command; more is no on-package or board-level link",
};

/// Hold `value` (named by its config key) to `range`: a clear refusal,
/// never a clamp.
pub fn check_figure(key: &str, value: f64, range: FigureRange) -> Result<(), String> {
    if value.is_finite() && value >= range.min && value <= range.max {
        Ok(())
    } else {
        Err(format!(
            "{key} = {value} is outside the physical range {} to {} {} ({})",
            range.min, range.max, range.unit, range.why
        ))
    }
}

/// Nanoseconds (from a config figure held to [`LATENCY_NS`]) to
/// picoseconds, rounded to the nearest picosecond.
pub fn ns_to_ps(ns: f64) -> Ps {
    debug_assert!(check_figure("ns", ns, LATENCY_NS).is_ok(), "{ns} ns");
    (ns * PS_PER_NS as f64).round() as Ps
}

/// A transfer or processing rate, in units per second (bytes/s or
/// elements/s), held as an integer so that durations are exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(u64);

impl Rate {
    /// From a figure in giga-units per second (GB/s = 1e9 bytes/s), held
    /// to [`BANDWIDTH_GBPS`] or [`THROUGHPUT_GFLOPS`] by config validation.
    pub fn from_giga_per_s(g: f64) -> Rate {
        debug_assert!(g.is_finite() && g * 1e9 >= 1.0, "{g} G/s");
        Rate((g * 1e9).round() as u64)
    }

    pub fn giga_per_s(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// Time to move `units` at this rate, rounded up to a whole picosecond.
    pub fn duration_ps(self, units: u64) -> Result<Ps, TimeOverflow> {
        // Up to ~18 MB the product fits a u64 (one hardware division).
        if let Some(num) = units.checked_mul(PS_PER_S) {
            return Ok(num.div_ceil(self.0.max(1)));
        }
        let num = units as u128 * PS_PER_S as u128;
        Ps::try_from(num.div_ceil(self.0.max(1) as u128)).map_err(|_| TimeOverflow)
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
        assert_eq!(r.duration_ps(100), Ok(1_000));
        assert_eq!(r.duration_ps(1), Ok(10));
        assert_eq!(Rate::from_giga_per_s(3.0).duration_ps(1), Ok(334));
        assert_eq!(ns_to_ps(2.5), 2_500);
    }

    #[test]
    fn the_u64_fast_path_agrees_with_the_wide_division() {
        // Around the largest count whose product with PS_PER_S fits a u64.
        let edge = u64::MAX / PS_PER_S;
        for rate in [1.0, 3.0, 100.0, 512.0] {
            let r = Rate::from_giga_per_s(rate);
            for units in [edge - 1, edge, edge + 1, edge + 12_345] {
                let wide = (units as u128 * PS_PER_S as u128).div_ceil(r.0 as u128);
                assert_eq!(
                    r.duration_ps(units),
                    Ok(wide as Ps),
                    "{units} at {rate} G/s"
                );
            }
        }
    }

    #[test]
    fn overflows_are_refused_not_wrapped() {
        assert_eq!(add(u64::MAX, 1), Err(TimeOverflow));
        assert_eq!(
            Rate::from_giga_per_s(1e-3).duration_ps(u64::MAX),
            Err(TimeOverflow)
        );
        // 2^63 f16 elements: 2^64 bytes.
        let e = tensor_size(&[1 << 31, 1 << 31, 2], 2).unwrap_err();
        assert_eq!(e.what, "bytes");
        assert_eq!(
            tensor_size(&[u32::MAX, u32::MAX, u32::MAX], 1)
                .unwrap_err()
                .what,
            "elements"
        );
        assert_eq!(tensor_size(&[3, 0, 7], 4), Ok((0, 0)));
        assert_eq!(tensor_size(&[], 2), Ok((1, 2)));
    }

    #[test]
    fn figures_outside_physical_ranges_are_refused() {
        assert!(check_figure("x", 100.0, BANDWIDTH_GBPS).is_ok());
        let e = check_figure("cube.noc.link_bandwidth_gbps", 1e-30, BANDWIDTH_GBPS).unwrap_err();
        assert!(
            e.contains("cube.noc.link_bandwidth_gbps = 0.00000") || e.contains("1e-30"),
            "{e}"
        );
        assert!(e.contains("1 MB/s"), "{e}");
        assert!(check_figure("l", 1e16, LATENCY_NS).is_err());
        assert!(check_figure("l", f64::NAN, LATENCY_NS).is_err());
        assert!(check_figure("l", -1.0, LATENCY_NS).is_err());
    }
}
