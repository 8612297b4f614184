#!/usr/bin/env bash
# Installs what overeager needs on a fresh Debian machine with Rust (rustup): the Rust targets,
# the Debian packages, and the crates (fetched once so later builds work offline).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
for pkg in git bash coreutils findutils; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

# The shim is a static binary (it runs inside minimal sandboxes); the core crate also builds
# for the browser and for predicate guests.
rustup target add x86_64-unknown-linux-musl wasm32-unknown-unknown >/dev/null
cargo fetch --locked 2>/dev/null || cargo fetch
