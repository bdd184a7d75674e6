//! `overrides` in topology.yaml: devices that are not all equal. Chosen
//! SIPs get other engine and memory figures (a straggler, a slower
//! part), chosen inter-SIP links another bandwidth or latency, or are
//! down. Every figure is held to the range of the key it overrides; a
//! SIP or a link named twice, a SIP that does not exist, or an override
//! that changes nothing is an error naming it. Which links exist is the
//! topology's to say ([`crate::topology`] checks `between` when it
//! builds the machine).
//!
//! ```yaml
//! overrides:
//!   sips:
//!     - sips: [3]
//!       gemm_scale: 0.5              # every pe.gemm.throughput_tflops x 0.5
//!       math_throughput_gflops: 128  # pe.math.throughput_gflops
//!       hbm_bandwidth_gbps: 400      # cube.hbm.bandwidth_gbps (per stack)
//!   links:
//!     - between: [0, 1]
//!       bandwidth_gbps: 50           # system.inter_sip_link.*, both directions
//!       latency_ns: 800
//!     - between: [2, 3]
//!       down: true
//! ```

use crate::units;
use serde::Deserialize;

/// The `overrides` section (absent: none).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Overrides {
    #[serde(default)]
    pub sips: Vec<SipOverride>,
    #[serde(default)]
    pub links: Vec<LinkOverride>,
}

/// Other figures for the SIPs `sips`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SipOverride {
    pub sips: Vec<u32>,
    /// Multiplies every dtype's `pe.gemm.throughput_tflops`.
    #[serde(default)]
    pub gemm_scale: Option<f64>,
    /// Replaces `pe.math.throughput_gflops`.
    #[serde(default)]
    pub math_throughput_gflops: Option<f64>,
    /// Replaces `cube.hbm.bandwidth_gbps` (per stack).
    #[serde(default)]
    pub hbm_bandwidth_gbps: Option<f64>,
}

/// Other figures for the inter-SIP link(s) between two SIPs.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkOverride {
    /// The two SIPs the link joins.
    pub between: Vec<u32>,
    #[serde(default)]
    pub bandwidth_gbps: Option<f64>,
    #[serde(default)]
    pub latency_ns: Option<f64>,
    /// The link is not there: routes go around it.
    #[serde(default)]
    pub down: bool,
}

impl Overrides {
    pub fn is_empty(&self) -> bool {
        self.sips.is_empty() && self.links.is_empty()
    }

    /// Check every entry against a machine of `n_sips` SIPs.
    pub fn validate(&self, n_sips: u32) -> Result<(), String> {
        let mut seen = std::collections::BTreeMap::new();
        for (i, o) in self.sips.iter().enumerate() {
            let at = format!("overrides.sips[{i}]");
            if o.sips.is_empty() {
                return Err(format!("{at}.sips lists no SIP"));
            }
            for &s in &o.sips {
                if s >= n_sips {
                    return Err(format!(
                        "{at}.sips: SIP {s} does not exist (system.sips.count is {n_sips})"
                    ));
                }
                if let Some(j) = seen.insert(s, i) {
                    return Err(format!(
                        "{at}.sips: SIP {s} is already overridden by overrides.sips[{j}]; give \
                         each SIP one entry"
                    ));
                }
            }
            if o.gemm_scale.is_none()
                && o.math_throughput_gflops.is_none()
                && o.hbm_bandwidth_gbps.is_none()
            {
                return Err(format!(
                    "{at} changes nothing: give gemm_scale, math_throughput_gflops or \
                     hbm_bandwidth_gbps"
                ));
            }
            if let Some(g) = o.gemm_scale {
                if !(g.is_finite() && g > 0.0 && g <= 1e3) {
                    return Err(format!("{at}.gemm_scale must be in (0, 1000], got {g}"));
                }
            }
            if let Some(v) = o.math_throughput_gflops {
                let name = format!("{at}.math_throughput_gflops");
                units::check_figure(&name, v, units::THROUGHPUT_GFLOPS)?;
            }
            if let Some(v) = o.hbm_bandwidth_gbps {
                let name = format!("{at}.hbm_bandwidth_gbps");
                units::check_figure(&name, v, units::BANDWIDTH_GBPS)?;
            }
        }
        let mut pairs = std::collections::BTreeMap::new();
        for (i, l) in self.links.iter().enumerate() {
            let at = format!("overrides.links[{i}]");
            let &[a, b] = l.between.as_slice() else {
                return Err(format!(
                    "{at}.between must name two SIPs, got {:?}",
                    l.between
                ));
            };
            for s in [a, b] {
                if s >= n_sips {
                    return Err(format!(
                        "{at}.between: SIP {s} does not exist (system.sips.count is {n_sips})"
                    ));
                }
            }
            if a == b {
                return Err(format!(
                    "{at}.between names SIP {a} twice: a link joins two SIPs"
                ));
            }
            if let Some(j) = pairs.insert((a.min(b), a.max(b)), i) {
                return Err(format!(
                    "{at}: the link between SIP {a} and SIP {b} is already overridden by \
                     overrides.links[{j}]"
                ));
            }
            if l.down && (l.bandwidth_gbps.is_some() || l.latency_ns.is_some()) {
                return Err(format!(
                    "{at} is down and also gives figures: a link that is down carries nothing"
                ));
            }
            if !l.down && l.bandwidth_gbps.is_none() && l.latency_ns.is_none() {
                return Err(format!(
                    "{at} changes nothing: give bandwidth_gbps, latency_ns or down: true"
                ));
            }
            if let Some(v) = l.bandwidth_gbps {
                units::check_figure(&format!("{at}.bandwidth_gbps"), v, units::BANDWIDTH_GBPS)?;
            }
            if let Some(v) = l.latency_ns {
                units::check_figure(&format!("{at}.latency_ns"), v, units::LATENCY_NS)?;
            }
        }
        Ok(())
    }

    /// The override of SIP `sip`, if any.
    pub fn sip(&self, sip: u32) -> Option<&SipOverride> {
        self.sips.iter().find(|o| o.sips.contains(&sip))
    }

    /// The override of the link(s) between SIPs `a` and `b`, if any.
    pub fn link(&self, a: u32, b: u32) -> Option<&LinkOverride> {
        self.links
            .iter()
            .find(|l| l.between == [a, b] || l.between == [b, a])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Overrides {
        serde_yaml::from_str(text).unwrap()
    }

    #[test]
    fn a_valid_section_is_read_and_found_by_sip_and_link() {
        let o = parse(
            "sips:\n  - sips: [3]\n    gemm_scale: 0.5\nlinks:\n  - between: [1, 0]\n    \
             bandwidth_gbps: 50\n  - between: [2, 3]\n    down: true\n",
        );
        o.validate(4).unwrap();
        assert_eq!(o.sip(3).unwrap().gemm_scale, Some(0.5));
        assert!(o.sip(2).is_none());
        assert_eq!(o.link(0, 1).unwrap().bandwidth_gbps, Some(50.0));
        assert!(o.link(3, 2).unwrap().down);
        assert!(o.link(1, 2).is_none());
        assert!(parse("{}").is_empty());
    }

    #[test]
    fn bad_entries_are_refused_by_name() {
        for (text, want) in [
            ("sips:\n  - sips: [4]\n    gemm_scale: 0.5\n", "overrides.sips[0].sips: SIP 4 does not exist"),
            (
                "sips:\n  - sips: [1]\n    gemm_scale: 0.5\n  - sips: [1]\n    gemm_scale: 2\n",
                "SIP 1 is already overridden by overrides.sips[0]",
            ),
            ("sips:\n  - sips: [1]\n", "overrides.sips[0] changes nothing"),
            ("sips:\n  - sips: [1]\n    gemm_scale: 0\n", "gemm_scale must be in (0, 1000]"),
            ("links:\n  - between: [0, 0]\n    down: true\n", "names SIP 0 twice"),
            ("links:\n  - between: [0, 9]\n    down: true\n", "SIP 9 does not exist"),
            (
                "links:\n  - between: [0, 1]\n    down: true\n  - between: [1, 0]\n    latency_ns: 9\n",
                "already overridden by overrides.links[0]",
            ),
            ("links:\n  - between: [0, 1]\n    down: true\n    latency_ns: 9\n", "is down and also gives figures"),
            ("links:\n  - between: [0, 1]\n", "overrides.links[0] changes nothing"),
        ] {
            let e = parse(text).validate(4).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
        assert!(serde_yaml::from_str::<Overrides>("sips:\n  - sips: [1]\n    speed: 2\n").is_err());
    }
}
