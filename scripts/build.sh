#!/usr/bin/env bash
# Builds everything: the static shim (musl), the overeager binary and the web app (dist/).
# PROFILE=dev for a debug binary (used by the tests), release by default; the web app is
# always built with the size-optimized wasm-release profile.
set -euo pipefail
cd "$(dirname "$0")/.."
"$(dirname "$0")/setup.sh" "$@"
cargo build --profile shim -p overeager-shim --target x86_64-unknown-linux-musl
if [ "${PROFILE:-release}" = "dev" ]; then
  # With the test targets, so dependencies get the features the tests unify (dev-dependencies
  # add some): otherwise `cargo test` builds much of the tree, and the binary, a second time.
  cargo build --workspace --exclude overeager-web --bins --tests
else
  cargo build --workspace --exclude overeager-web --release
fi
PATH="$HOME/.cargo/bin:$PATH" trunk build --offline
