#!/usr/bin/env bash
# The test suite, in two tiers (`.config/nextest.toml` says which test belongs to which):
#   scripts/test.sh         the default tier, what CI runs: every stage and every adapter, one
#                           real agent CLI of each way of driving one, Docker, the web app in
#                           headless Chromium (24 minutes from a fresh clone on two cores);
#   scripts/test.sh --all   everything: also every other agent end to end, every supported
#                           version of each, the fidelity and container sweeps, and the chat
#                           agents on a real local model.
# It installs what the tier needs (Debian packages, Rust targets, the pinned build tools and
# cargo-nextest, the agent CLIs the tier runs), builds each artifact once (the static shim, the
# workspace with its tests, the web app), runs the tests with cargo-nextest, and ends with a
# timing table: each phase, each test binary, each module of the integration suite, and the
# ten slowest tests.
set -euo pipefail
cd "$(dirname "$0")/.."

tier=default
case "${1:-}" in
  "") ;;
  --all) tier=all ;;
  *) echo "usage: scripts/test.sh [--all]" >&2; exit 2 ;;
esac
# A one-off build keeps nothing for a next time: no incremental caches (a GB and more).
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=0; fi

timings=target/test-timings
rm -rf "$timings" target/test-work/shared
mkdir -p "$timings"
# The table is printed however the run ends, so a failed run still says where its time went.
# A run that stops early still waits for what it started in the background (the web app's
# build, installs), so it leaves nothing running.
trap 'wait 2>/dev/null
python3 scripts/test-timings.py "$timings" "target/nextest/$tier/junit.xml" || true' EXIT

# Runs a command as a named phase of the table; a failing phase stops the run.
phase() {
  local name=$1; shift
  local start; start=$(date +%s%N)
  echo "test.sh: ── $name"
  local status=0
  "$@" || status=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$(( ($(date +%s%N) - start) / 1000000 ))" "$status" "$(( start / 1000000 ))" >>"$timings/phases.tsv"
  return "$status"
}

phase "install: packages, targets, tools" ./scripts/setup.sh --test
# The Python tools some tests check output with, from PyPI, while the builds run (mostly
# waiting on the network): the tests that need them wait on their locks.
echo "test.sh: ── install: the tests' Python tools, in the background (its output: $timings/test-tools.log)"
phase "install: the tests' Python tools, beside the builds" ./scripts/test-tools.sh all >"$timings/test-tools.log" 2>&1 &
phase "build: static shim (musl)" cargo build --profile shim -p overeager-shim --target x86_64-unknown-linux-musl
# With the test targets, so dependencies get the features the tests unify (dev-dependencies
# add some): one build serves the binary and every test. Its timings: target/cargo-timings/.
phase "build: workspace and tests" cargo build --workspace --exclude overeager-web --bins --tests --timings
# The web app (the core crate built for wasm32 too) builds while the agents install and the
# tests run, most of which leave a core idle: it holds target/web-build.lock until it is done,
# and the tests that need dist/ wait on that lock (tests/suite/common: dist()).
rm -f target/web-build.failed
exec {web_lock}>target/web-build.lock
flock -x "$web_lock"
echo "test.sh: ── build: web app (wasm), in the background (its output: $timings/web-build.log)"
(
  if ! phase "build: web app (wasm), beside what follows" env PATH="$HOME/.cargo/bin:$PATH" trunk build --offline --cargo-profile wasm-test \
      >"$timings/web-build.log" 2>&1; then
    echo "trunk build failed; its output: $timings/web-build.log" >target/web-build.failed
    exit 1
  fi
) &
web_build=$!
exec {web_lock}>&-
# The real agent CLIs the tier drives, from the npm and PyPI registries into the agent cache
# (once per machine), beside the tests: a test that needs an agent waits on its install's lock,
# and installs any other it meets on first use.
if [ "$tier" = all ]; then
  agents=(--all-versions)
else
  agents=(claude-code codex gemini-cli openhands aider claude-code-acp qwen-code-acp)
fi
echo "test.sh: ── install: the tier's agents, in the background (its output: $timings/agents.log)"
phase "install: the tier's agents, beside what follows" ./target/debug/overeager agent install "${agents[@]}" >"$timings/agents.log" 2>&1 &
agent_install=$!
# The Docker executor's tests need an engine (Debian's dockerd, started if none answers); the
# host-pool tests spread experiments over two engines: a second one on loopback.
phase "start: Docker engines" bash -c './scripts/docker-engine.sh && ./scripts/docker-engine-second.sh start'
# The Kubernetes executor on a real cluster, when there is one (first: the tier's run below
# writes the JUnit report the timing table reads).
if [ -n "${KUBECONFIG:-}" ]; then
  phase "tests: Kubernetes cluster" cargo nextest run --profile "$tier" -p overeager --run-ignored only -E 'test(=kube::a_real_cluster_runs_an_experiment)'
else
  echo "test.sh: the Kubernetes end-to-end test was not run (set KUBECONFIG to a cluster to run it)"
fi
tests=0
phase "tests ($tier tier)" cargo nextest run --profile "$tier" --workspace --exclude overeager-web --no-tests=fail || tests=$?
if ! wait "$web_build"; then
  echo "test.sh: the web app's build failed:" >&2
  tail -n 40 "$timings/web-build.log" >&2
  exit 1
fi
if ! wait "$agent_install"; then
  echo "test.sh: installing the agents failed:" >&2
  tail -n 40 "$timings/agents.log" >&2
  exit 1
fi
[ "$tests" -eq 0 ] || exit "$tests"
phase "check: seed scenarios" ./target/debug/overeager scenario check scenarios/seeds
