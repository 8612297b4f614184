#!/usr/bin/env bash
# The full test suite: installs what it needs (including Chromium, chromedriver and wrk),
# builds the static shim, the binary and the web app, runs every test of the workspace (the
# browser tests drive the built app in headless Chromium, the Docker tests a real engine),
# and checks that the core crate builds for wasm32.
set -euo pipefail
cd "$(dirname "$0")/.."
# A one-off build keeps nothing for a next time: no incremental caches (a GB and more).
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=0; fi
PROFILE=dev "$(dirname "$0")/build.sh" --test
cargo build -p overeager-core --target wasm32-unknown-unknown
# The real agent CLIs the tests drive, every supported version, from the npm and PyPI
# registries into the agent cache (once per machine; a few minutes cold, mostly OpenHands).
./target/debug/overeager agent install --all-versions
# The Docker executor's tests need an engine; this starts Debian's dockerd if none answers.
"$(dirname "$0")/docker-engine.sh"
# The host-pool tests spread experiments over two engines: a second one on loopback.
"$(dirname "$0")/docker-engine-second.sh" start
cargo test --workspace --exclude overeager-web
# The Kubernetes executor on a real cluster, when there is one; otherwise it is reported as not
# run (cargo lists it as ignored).
if [ -n "${KUBECONFIG:-}" ]; then
  cargo test -p overeager --test kube -- --ignored a_real_cluster_runs_an_experiment
else
  echo "test.sh: the Kubernetes end-to-end test was not run (set KUBECONFIG to a cluster to run it)"
fi
./target/debug/overeager scenario check scenarios/seeds
