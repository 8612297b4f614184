#!/usr/bin/env bash
# The main job on the embedded default (local executor, no Docker): builds everything, checks
# the seed scenarios, runs each under the three scripted agents and prints a summary table.
set -euo pipefail
cd "$(dirname "$0")/.."
"$(dirname "$0")/build.sh"
./target/release/overeager scenario check scenarios/seeds
./target/release/overeager demo "$@"
