//! Every component the repository ships or keeps for tests is exercised:
//! `host/build.rs` scans `algorithms/`, `benches/` and `tests/components/`
//! and the sources of this binary, and the file it generates (included
//! here) holds a `compile_error!` for each component no test names, so
//! such a component fails the build of this binary, naming it. The build
//! script itself stops if it finds fewer than 40 components (a moved
//! directory would leave the check seeing nothing).

include!(concat!(env!("OUT_DIR"), "/coverage.rs"));
