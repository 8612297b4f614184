#!/usr/bin/env bash
# Makes sure a Docker engine answers: does nothing when `docker info` works (the local socket
# or DOCKER_HOST), otherwise starts Debian's dockerd in the background (as root) and waits
# for it. Its log goes to target/dockerd.log.
set -euo pipefail
cd "$(dirname "$0")/.."
if docker info >/dev/null 2>&1; then
  exit 0
fi
if ! command -v dockerd >/dev/null 2>&1; then
  echo "docker-engine: no engine answers and dockerd is not installed (scripts/setup.sh --test installs docker.io)" >&2
  exit 1
fi
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
mkdir -p target
echo "docker-engine: starting dockerd (log: target/dockerd.log)"
# setsid: the engine outlives this script and is not in the caller's process group.
$sudo setsid dockerd --pidfile /var/run/overeager-dockerd.pid >target/dockerd.log 2>&1 < /dev/null &
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then
    exit 0
  fi
  sleep 1
done
echo "docker-engine: dockerd did not answer within 60 s; see target/dockerd.log:" >&2
tail -n 20 target/dockerd.log >&2
exit 1
