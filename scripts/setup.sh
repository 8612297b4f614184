#!/usr/bin/env bash
# Installs what overeager needs on a fresh Debian machine with Rust (rustup): the Rust targets,
# the Debian packages, the crates (fetched once so later builds work offline) and the pinned
# web build tools (Trunk, and the wasm-bindgen CLI at exactly the version in Cargo.lock).
# With --test it also installs the test runner (cargo-nextest) and what the tests drive:
# Chromium, chromedriver, wrk, a Docker engine (Debian's docker.io) with busybox-static for the
# offline test images (and iproute2 and openssl for a second engine), and Node.js and npm for
# the real agent CLIs.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_install() {
  local need=()
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
  if [ ${#need[@]} -gt 0 ]; then
    echo "setup: installing ${need[*]}"
    local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
  fi
}

apt_install git bash coreutils findutils
if [ "${1:-}" = "--test" ]; then
  # python3 and the usual command-line tools: the precision test runs real command lines.
  apt_install chromium chromium-driver wrk docker.io busybox-static perl python3 diffutils gzip
  # The host-pool tests start a second engine with its own bridge and TLS certificates; the
  # Kubernetes tests push images to a registry on loopback and check manifests with a PyPI
  # validator in a virtualenv.
  apt_install iproute2 openssl docker-registry python3-venv
  # The real agent CLIs run on Node.js (>= 20 for Gemini CLI) and npm; OpenHands needs Python
  # 3.12 (python3.12 on PATH or pyenv's), which the tests report when it is missing.
  command -v node >/dev/null 2>&1 || apt_install nodejs
  command -v npm >/dev/null 2>&1 || apt_install npm
  # Codex over ACP sandboxes its commands with bubblewrap.
  apt_install bubblewrap
fi

# The shim is a static binary (it runs inside minimal sandboxes); the core crate also builds
# for the browser and for predicate guests; the web app is wasm.
rustup target add x86_64-unknown-linux-musl wasm32-unknown-unknown >/dev/null
cargo fetch --locked 2>/dev/null || cargo fetch

# Trunk builds web/ into dist/ offline, with the wasm-bindgen CLI matching the crate exactly
# (`cargo install` returns at once when that version is installed already).
wasm_bindgen=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
have_tool() { command -v "$1" >/dev/null 2>&1 && "$1" --version 2>/dev/null | grep -q "$2"; }
have_tool trunk "0.21.14" || cargo install trunk@0.21.14 --locked
# Not --locked: the CLI's own lockfile names a crate version the registry no longer has.
have_tool wasm-bindgen "$wasm_bindgen" || cargo install wasm-bindgen-cli@"$wasm_bindgen"
if [ "${1:-}" = "--test" ]; then
  # The test runner: a process per test, per-test time limits, tiers as profiles
  # (.config/nextest.toml), and the JUnit report the timing table is made from. A machine's own
  # cargo-nextest serves from 0.9.91 on (test priorities); older or none: 0.9.151 is built.
  nextest=$(cargo nextest --version 2>/dev/null | awk '/^cargo-nextest/ { print $2; exit }')
  if [ -z "$nextest" ] || [ "$(printf '%s\n' 0.9.91 "$nextest" | sort -V | head -n1)" != 0.9.91 ]; then
    cargo install cargo-nextest@0.9.151 --locked --no-default-features --features default-no-update
  fi
fi
