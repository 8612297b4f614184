#!/usr/bin/env bash
# The full test suite: installs what it needs, builds the static shim, runs every test of the
# workspace, and checks that the core crate builds for wasm32.
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE=dev "$(dirname "$0")/build.sh"
cargo build -p overeager-core --target wasm32-unknown-unknown
cargo test --workspace
./target/debug/overeager scenario check scenarios/seeds
