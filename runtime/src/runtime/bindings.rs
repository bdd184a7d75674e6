//! Host-side bindings of the `kernbench:sim` WIT package (both worlds).

/// The `algorithm` world: `tl` imports, kernel exports.
pub mod algorithm {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "algorithm",
        // Calls that never wait in simulated time are plain host calls:
        // no future, no fiber bookkeeping (a ring step drops two tensors).
        imports: {
            "kernbench:sim/tl.[method]tensor.shape": trappable,
            "kernbench:sim/tl.[method]tensor.dtype": trappable,
            "kernbench:sim/tl.[method]tensor.addr": trappable,
            "kernbench:sim/tl.[method]tensor.nbytes": trappable,
            "kernbench:sim/tl.[drop]tensor": trappable,
            "kernbench:sim/tl.program-id": trappable,
            "kernbench:sim/tl.num-programs": trappable,
            "kernbench:sim/tl.now-ps": trappable,
            "kernbench:sim/tl.log": trappable,
            "kernbench:sim/tl.recv-async": trappable,
            "kernbench:sim/tl.[drop]recv-future": trappable,
            "kernbench:sim/tl.[method]recv-future.shape": trappable,
            "kernbench:sim/tl.[method]recv-future.dtype": trappable,
            "kernbench:sim/tl.batch-tensor": trappable,
            default: async | trappable,
        },
        exports: { default: async },
        with: {
            "kernbench:sim/tl.tensor": crate::runtime::kernel::KernelTensor,
            "kernbench:sim/tl.recv-future": crate::runtime::kernel::KernelFuture,
        },
    });
}

/// The `algorithm` world again, every import a plain host call: the
/// bindings of a kernel *recorded* to completion first (see
/// [`crate::runtime::eager`]), which never waits inside a call.
pub mod algorithm_eager {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "algorithm",
        imports: { default: trappable },
        with: {
            "kernbench:sim/types": super::algorithm::kernbench::sim::types,
            "kernbench:sim/ccl": super::algorithm::kernbench::sim::ccl,
            "kernbench:sim/tl.tensor": crate::runtime::eager::EagerTensor,
            "kernbench:sim/tl.recv-future": crate::runtime::eager::EagerFuture,
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
        // `result<_, dist-error>` as `Result<_, DistFail>`: host code uses
        // `?` for PyTorch's exceptions and for traps alike.
        trappable_error_type: {
            "kernbench:sim/distributed.dist-error" => crate::runtime::fail::DistFail,
        },
        with: {
            "kernbench:sim/types": super::algorithm::kernbench::sim::types,
            "kernbench:sim/torch.tensor": crate::runtime::bench::BenchTensor,
            "kernbench:sim/distributed.work": crate::runtime::works::Work,
            "kernbench:sim/torch.launched": crate::runtime::works::Launched,
        },
    });
}
