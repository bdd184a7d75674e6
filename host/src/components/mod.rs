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
}
