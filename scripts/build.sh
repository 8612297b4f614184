#!/usr/bin/env bash
# Builds everything: the static shim (musl) and the overeager binary. PROFILE=dev for a
# debug build (used by the tests), release by default.
set -euo pipefail
cd "$(dirname "$0")/.."
"$(dirname "$0")/setup.sh"
cargo build --profile shim -p overeager-shim --target x86_64-unknown-linux-musl
if [ "${PROFILE:-release}" = "dev" ]; then
  cargo build --workspace
else
  cargo build --workspace --release
fi
