//! Contention (issue 14): collectives whose messages share links. The
//! link-sharing model (`sim/src/hw/link.rs`): each directed link keeps a
//! calendar of the intervals its transfers' bytes cross it; a transfer
//! takes, on each link of its path, the earliest gap at or after its head
//! arrives that is long enough for its bytes (first come, first served in
//! issue order, with backfilling). Intervals never overlap, so no link
//! ever carries more than its bandwidth, and a collective can never beat
//! the load of its busiest link.
//!
//! Checked here from the run's own trace (every link reservation), on
//! workloads where many messages want the same links at once: the direct
//! all-to-all on a 4×4 torus (partners up to four hops away) and
//! recursive halving–doubling on a ring of 8 (partners 1, 2, 4 hops
//! away, every step's messages stacked on the same ring links).

use crate::common;
use common::*;
use kernbench::runtime::run_bench;
use serde_json::Value;
use std::collections::BTreeMap;

/// One link's reservations from a trace: (start µs, duration µs, bytes).
type Reservations = Vec<(f64, f64, f64)>;

/// The inter-SIP link tracks of a Chrome trace and their spans.
fn inter_sip_links(trace: &Value) -> BTreeMap<String, Reservations> {
    let events = trace["traceEvents"].as_array().expect("trace events");
    let names: BTreeMap<(u64, u64), String> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
            (key, e["args"]["name"].as_str().unwrap().to_string())
        })
        .collect();
    let mut links: BTreeMap<String, Reservations> = BTreeMap::new();
    for e in events.iter().filter(|e| e["ph"] == "X") {
        let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        let track = &names[&key];
        if !(track.starts_with("link ") && track.ends_with("(inter_sip)")) {
            continue;
        }
        // Span names read "<what> <n> B <src> -> <dst>".
        let name = e["name"].as_str().unwrap();
        let words: Vec<&str> = name.split_whitespace().collect();
        let at = words.iter().position(|w| *w == "B").expect("a byte count") - 1;
        let bytes: f64 = words[at].parse().unwrap();
        let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
        links
            .entry(track.clone())
            .or_default()
            .push((ts, dur, bytes));
    }
    links
}

/// Run `bench` with `algorithm` traced on `t`; check that no inter-SIP
/// link ever carries more than `gbps` (its reservations never overlap and
/// each lasts at least its bytes over the bandwidth), that some link was
/// contended (two transfers back to back on it), and that the
/// collective took at least the busiest link's load. Returns (simulated
/// µs, busiest link's load in µs).
fn check_links(
    bench: &str,
    algorithm: &str,
    t: kernbench::config::TopologySpec,
    size: &str,
) -> (f64, f64) {
    let gbps = t.system.inter_sip_link.bandwidth_gbps;
    let mut req = request(bench, t, ccl(), Some(algorithm), &["-b", size, "-e", size]);
    req.trace = true;
    let res = run_bench(&loader(), req).unwrap_or_else(|e| panic!("{algorithm}: {e}"));
    assert!(res.rows.iter().all(|r| r.wrong == 0), "{algorithm}: data");
    assert_eq!(res.trace_dropped, Some(0), "every span recorded");
    let links = inter_sip_links(res.trace.as_ref().expect("a trace"));
    assert!(!links.is_empty(), "{algorithm}: no inter-SIP link used");
    let per_us = gbps * 1e3; // bytes per µs
    let eps = 1e-6; // one picosecond, the trace's resolution
    let mut busiest: f64 = 0.0;
    let mut back_to_back = 0;
    for (link, spans) in &links {
        let mut spans = spans.clone();
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        for (_, dur, bytes) in &spans {
            assert!(
                *dur + eps >= bytes / per_us,
                "{algorithm}: {link} carried {bytes} B in {dur} us, faster than {gbps} GB/s"
            );
        }
        for w in spans.windows(2) {
            let ((s0, d0, _), (s1, _, _)) = (w[0], w[1]);
            assert!(
                s0 + d0 <= s1 + eps,
                "{algorithm}: {link} reserved twice at once: [{s0}, {}) and from {s1}",
                s0 + d0
            );
            if (s0 + d0 - s1).abs() <= eps {
                back_to_back += 1;
            }
        }
        busiest = busiest.max(spans.iter().map(|s| s.2).sum::<f64>() / per_us);
    }
    assert!(back_to_back > 0, "{algorithm}: no link was ever contended");
    // The run is one call per block run (out of place, in place), each
    // moving the same bytes.
    let r = &res.rows[0];
    let calls = r.out_of_place.is_some() as u32 + r.in_place.is_some() as u32;
    busiest /= calls as f64;
    let time = res.rows.iter().map(|r| r.time_ps).max().unwrap() as f64 / 1e6;
    assert!(
        time >= busiest,
        "{algorithm}: {time} us beats its busiest link's {busiest} us of bytes"
    );
    eprintln!("{algorithm}: {time:.3} us, busiest inter-SIP link {busiest:.3} us of bytes");
    (time, busiest)
}

#[test]
fn all_to_all_on_a_torus_never_exceeds_a_link_bandwidth() {
    let t = machine(16, "torus_2d", Some(4), (1, 1));
    check_links("ccl_alltoall", "direct_alltoall", t, "1M");
}

#[test]
fn halving_doubling_on_a_ring_shares_links_within_their_bandwidth() {
    let t = machine(8, "ring_1d", None, (1, 1));
    check_links("ccl_allreduce", "rabenseifner_allreduce", t, "2M");
}
