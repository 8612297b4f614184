//! No code: this crate only asks for features (see its `Cargo.toml`), so that the judge's build
//! script and the rest of the build share one build of the crates they both use.
