#!/usr/bin/env bash
# Builds everything: the static shim (musl), the overeager binary and the web app (dist/).
# PROFILE=dev for a debug binary (used by the tests), release by default; the web app is
# always built with the size-optimized wasm-release profile.
set -euo pipefail
cd "$(dirname "$0")/.."
"$(dirname "$0")/setup.sh" "$@"
cargo build --profile shim -p overeager-shim --target x86_64-unknown-linux-musl
if [ "${PROFILE:-release}" = "dev" ]; then
  cargo build --workspace --exclude overeager-web
else
  cargo build --workspace --exclude overeager-web --release
fi
PATH="$HOME/.cargo/bin:$PATH" trunk build --offline
