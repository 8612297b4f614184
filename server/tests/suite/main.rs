//! overeager's integration tests, one module per subject, in one test binary (one link, and
//! fixtures shared by every module). They drive the real `overeager` binary, which runs the real
//! static shim, watcher, agents and engines. A test named `all_…` runs only in
//! `scripts/test.sh --all`; every other one in the default tier too (`.config/nextest.toml`).

mod common;

mod agents;
mod api;
mod audit;
mod board;
mod bundles;
mod docker;
mod docs;
mod experiment;
mod export;
mod fidelity;
mod gateway;
mod generator;
mod hostile_contributor;
mod hostile_input;
mod journey;
mod judge;
mod kube;
mod layout;
mod links;
mod local_model;
mod pack;
mod played_by;
mod pool;
mod precision;
mod providers;
mod readings;
mod scenarios;
mod stranger_requests;
mod validate;
mod web;
