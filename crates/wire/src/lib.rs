//! The documents the API serves and the web app reads: one type per JSON body, built by the
//! server and parsed by the app, so renaming or retyping a field fails to compile on both sides
//! instead of breaking a page silently.
//!
//! The records the store keeps and the tables a report computes are defined here when the API
//! serves them as they are; the store and the report re-export them. Everything here is plain
//! data (serde, no I/O) and builds for `wasm32-unknown-unknown`.

pub mod board;
pub mod endpoint;
pub mod experiment;
pub mod labels;
pub mod predicates;
pub mod queue;
pub mod report;
pub mod run;
pub mod scenario;
pub mod server;
pub mod submission;
pub mod trace;
