//! Components as things people build, keep and share (DESIGN §6): the
//! compatibility contract of the guest interface (`compat`), what a
//! component says about itself (`metadata`), the per-user components
//! directory (`store`) and OCI registries (`registry`). Nothing here
//! touches wasmtime; `runtime::loader` applies it when it loads a
//! component.

pub mod compat;
pub mod metadata;
pub mod registry;
pub mod store;

/// The largest component the host reads, from a file or a registry.
pub const MAX_COMPONENT_BYTES: u64 = 512 << 20;

/// The world a component implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Kind {
    Algorithm,
    Bench,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Algorithm => "algorithm",
            Kind::Bench => "bench",
        }
    }

    /// The exports that make a component this world (the rest are optional).
    pub fn required_exports(self) -> &'static [&'static str] {
        match self {
            Kind::Algorithm => &["kernel", "kernel-args"],
            Kind::Bench => &["run", "worker"],
        }
    }
}
