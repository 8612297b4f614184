#!/usr/bin/env bash
# The benchmark suite: long-running measurements and fuzzing that do not belong in the tests.
# Run after ./scripts/test.sh (which installs wrk, the agent CLIs and a Docker engine):
#   ./scripts/bench.sh [--quick]
# --quick shortens every phase (fuzzing 60 s per target instead of 10 min).
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_SECONDS=600
[ "${1:-}" = "--quick" ] && FUZZ_SECONDS=60
PROFILE=release ./scripts/build.sh
OE=./target/release/overeager
WORK=$(mktemp -d -t overeager-bench-XXXXXX)
trap 'rm -rf "$WORK"' EXIT

echo "== fuzzing: ${FUZZ_SECONDS} s per target"
for target in oeb scenario plan; do
  "$OE" bench fuzz --target "$target" --seconds "$FUZZ_SECONDS"
done
echo "== the shell reader and the reader table: a million generated command lines"
cargo test --release -p overeager-predicate-sdk --test fuzz -- --ignored

echo "== the API at a public leaderboard's size"
"$OE" bench scale --dist dist

echo "== the API under mixed load (demo store)"
"$OE" demo --no-serve --no-real --out "$WORK/demo" >/dev/null
"$OE" bench api --db "$WORK/demo/overeager.db" --mixed --seconds 5 --connections 16

echo "== the experiment runner, one and two jobs"
"$OE" bench experiment --jobs 1
"$OE" bench experiment --jobs 2

echo "== adaptive against uniform allocation on bench-v1 (regenerated), 1,000 simulated experiments"
"$OE" gen --seeds scenarios/seeds --n 500 --seed 20261121 --out "$WORK/bench-v1" --expect scenarios/bench-v1/MANIFEST >/dev/null
"$OE" bench allocation --scenarios "$WORK/bench-v1" --experiments 1000

echo "== judging"
"$OE" bench judge
echo "== the bundle views and one std evaluate call (criterion)"
cargo bench -p overeager --bench judge

echo "== play fidelity: every seed × play through the permissive real-CLI cells (allow-all over ACP); OpenHands and Kilo Code (slow to start) on 30"
"$OE" agent install
"$OE" bench fidelity --agents claude-code:permissive,codex:permissive,gemini-cli:permissive,opencode:permissive,cline:permissive,mini-swe-agent:permissive,continue-cli:permissive
"$OE" bench fidelity --agents claude-code-acp:allow-all,codex-acp:allow-all,gemini-cli-acp:allow-all,qwen-code-acp:allow-all,opencode-acp:allow-all,copilot-acp:allow-all
"$OE" bench fidelity --agents openhands:always-approve,kilo-code:permissive,kilo-code-acp:allow-all --limit 30

echo "== observing the real CLIs (observed vs bare), and the model gateway's added latency per call (median, p99)"
"$OE" bench agents --iterations 5

echo "== leaderboard integrity under attack, release build: five 30 MB declarations (list latency, memory), four 1-byte-per-5-s uploads (another writer's uploads)"
cargo test --release -p overeager --test integrity -- --nocapture large_declarations slow_uploads 2>&1 | grep -E "^measured|test result"
