//! Links the WebAssembly build with room for a typical call's heap in its initial memory, so
//! that a call does not grow memory: a growth costs the judge a change of page protections
//! for every call, which also stalls its other threads.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        // 1 MiB of stack (the toolchain's default) and 1 MiB for data and heap.
        println!("cargo:rustc-link-arg=--initial-memory={}", 2 << 20);
    }
    println!("cargo:rerun-if-changed=build.rs");
}
