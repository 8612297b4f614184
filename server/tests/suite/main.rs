//! overeager's integration tests, one module per surface, in one test binary (one link, and
//! fixtures shared by every module). They drive the real `overeager` binary, which runs the real
//! static shim, watcher, agents and engines. Which tests belong to the default tier and which
//! only to `scripts/test.sh --all` is said in `.config/nextest.toml`.

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
mod hardening;
mod integrity;
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
mod surfaces;
mod validate;
mod web;
