//! Any text given as topology.yaml: parsed, validated and compiled (layout,
//! stitching, routing tables) without a panic, a hang or a huge allocation;
//! a compiled topology answers a route query between two of its PEs.
#![no_main]
use kernbench::config::{Origin, TopologySpec};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(spec) = TopologySpec::from_yaml(text, Origin::Embedded("fuzz.yaml")) else {
        return;
    };
    // Keep each input cheap: huge (but valid) machines are the scale
    // benchmarks' business, not the fuzzer's.
    if spec.n_sips() > 16 || spec.cubes_per_sip() > 16 || spec.cube.noc.w * spec.cube.noc.h > 256 {
        return;
    }
    if let Ok(topo) = kernbench::topology::build(&spec) {
        let topo = std::sync::Arc::new(topo);
        let router = kernbench::routing::PathRouter::new(topo.clone());
        let a = kernbench::topology::NodeId::Pe(kernbench::topology::PeCoord {
            sip: 0,
            cube: 0,
            pe: 0,
        });
        let b = kernbench::topology::NodeId::Pe(kernbench::topology::PeCoord {
            sip: spec.n_sips() - 1,
            cube: spec.cubes_per_sip() - 1,
            pe: spec.pes_per_cube() - 1,
        });
        let _ = router.find_path(a, b);
    }
});
