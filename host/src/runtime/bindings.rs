//! Host-side bindings of the `kernbench:sim` WIT package (both worlds).

/// The `algorithm` world: `tl` imports, kernel exports.
pub mod algorithm {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "algorithm",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "kernbench:sim/tl.tensor": crate::runtime::kernel::KernelTensor,
        },
    });
}

/// The `bench` world: torch / distributed / multiprocessing / ahbm /
/// accelerator / report imports, run / worker exports.
pub mod bench {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "bench",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "kernbench:sim/types": super::algorithm::kernbench::sim::types,
            "kernbench:sim/torch.tensor": crate::runtime::bench::BenchTensor,
        },
    });
}
