//! The build script of every Rust algorithm in this tree (each names it as
//! `build = "../kernel_heap.rs"`): links the kernel component with an
//! initial heap that holds the SDK's batch of calls (`BATCH_CALLS` calls
//! as bytes and their call sites) and what a kernel allocates besides.
//!
//! A kernel is instantiated for every launch, into a pooled instance slot
//! that keeps its pages between launches. A kernel whose heap must grow
//! costs two `mprotect`s a launch (the slot is shrunk back to the
//! declared size at instantiation, then grown again), each a TLB
//! shootdown on every core the process runs on: at 1024 ranks ~2 K of a
//! run's 12 K `mprotect`s, and 13 % of the recording thread's time.
//! Declared instead, the memory is there from the start and the slot is
//! never resized; pages the kernel does not touch cost nothing. Benches
//! are not linked this way: a bench instance lives for the whole run and
//! is charged to its budget at its declared size.
//!
//! wasi-libc's allocator takes the space between the data and the end of
//! the initial memory (`__heap_base`..`__heap_end`) before it grows.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo:rustc-link-arg-cdylib=--initial-heap=196608");
    }
}
