#!/usr/bin/env bash
# The main job on the embedded default (SQLite store, local executor, no Docker): builds
# everything, synthesizes a small bench from the seed scenarios, runs scripted and simulated
# agents on it into runs/demo/overeager.db, writes the report (tables and figures) to
# runs/demo/report/, and serves the web app at the URL it prints (Ctrl-C stops it).
# Arguments go to `overeager demo` (e.g. --no-serve, --addr 127.0.0.1:9000, --n 48).
set -euo pipefail
cd "$(dirname "$0")/.."
"$(dirname "$0")/build.sh"
./target/release/overeager scenario check scenarios/seeds
exec ./target/release/overeager demo "$@"
