//! KernBench guest SDK.
//!
//! Algorithm authors implement [`Algorithm`] with plain Rust against the
//! [`Tl`] kernel-language trait and call [`export_algorithm!`]; bench authors
//! implement [`Bench`] and call [`export_bench!`]. No `wit_bindgen` in user
//! code. The same kernel runs natively under [`mock::run_kernel_in_mock`] for
//! millisecond unit tests (correctness only, no timing).
//!
//! Pick the world with a cargo feature: `algorithm` or `bench` (one per
//! crate: a component implements exactly one world).

pub mod batch_bytes;
mod collective;
pub mod direct;
mod dtype;
pub mod helpers;
mod kernel;
pub mod kernels;
pub mod reference;
pub mod ring;
mod setup;
pub mod topo;
pub mod tree;

#[cfg(not(target_arch = "wasm32"))]
pub mod mock;

#[doc(hidden)]
#[cfg(feature = "algorithm")]
pub mod algorithm_wasm;
#[cfg(feature = "algorithm")]
pub use algorithm_wasm::WasmTl;
#[cfg(feature = "algorithm")]
mod batch_wasm;
#[cfg(feature = "algorithm")]
pub use batch_wasm::{BatchFuture, BatchTensor, BatchTl, BATCH_CALLS};

#[cfg(feature = "bench")]
pub mod bench;
#[cfg(feature = "bench")]
pub mod perf;

pub use collective::{
    Call, Collective, Finish, HostArgs, Prepare, RedOp, Reduction, CALL_ARGS, HOST_ARGS,
};
pub use dtype::Dtype;
pub use kernel::{Algorithm, BinOp, CompositeOp, ReduceOp, Tensor, Tl, UnaryOp};
pub use setup::{EntryDefaults, Link, ParamValue, Params};

#[cfg(feature = "bench")]
pub use bench::Bench;

/// Writes the component's metadata from the crate's manifest (the export
/// macros call it; see the kernbench-guest-macros crate).
#[doc(hidden)]
pub use kernbench_guest_macros::component_metadata as __component_metadata;

/// Re-exports for `use kernbench_guest::prelude::*;`.
pub mod prelude {
    pub use crate::helpers::{
        all_to_all_rounds, call_args, call_round_args, call_round_kernel_args, chunked,
        pe_tile_addr, piece_args, rank_blocks, ring_step, rooted, round_args, round_param,
        round_param_or, rounds, seed_call_args, tree_step, Chunk, Rooted,
    };
    pub use crate::ring::DEFAULT_PIECE;
    pub use crate::topo::{SIP_TOPO_MESH, SIP_TOPO_RING, SIP_TOPO_TORUS};
    pub use crate::CALL_ARGS;
    pub use crate::{
        Algorithm, BinOp, Call, Collective, CompositeOp, Dtype, EntryDefaults, Finish, HostArgs,
        Link, Params, Prepare, RedOp, ReduceOp, Reduction, Tensor, Tl, UnaryOp,
    };
}

#[doc(hidden)]
#[cfg(feature = "algorithm")]
// The generated export glue takes a flattened `ccl.call` record.
#[allow(clippy::too_many_arguments)]
pub mod __algorithm {
    wit_bindgen::generate!({
        path: "../wit",
        world: "algorithm-outputs",
        pub_export_macro: true,
        export_macro_name: "__export_algorithm_world",
        default_bindings_module: "kernbench_guest::__algorithm",
    });
}

#[doc(hidden)]
#[cfg(feature = "bench")]
pub mod __bench {
    wit_bindgen::generate!({
        path: "../wit",
        world: "bench",
        pub_export_macro: true,
        export_macro_name: "__export_bench_world",
        default_bindings_module: "kernbench_guest::__bench",
    });
}
