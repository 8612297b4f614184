#!/usr/bin/env bash
# A second Docker engine on this machine, for the host-pool tests and `bench pool`: its own
# data root, exec root, containerd and bridge, listening on loopback TCP with TLS client
# certificates (as a remote engine of a fleet would) and on a unix socket.
#
#   scripts/docker-engine-second.sh start   # idempotent; prints nothing when it already runs
#   scripts/docker-engine-second.sh stop    # stops the engine this script started
#   scripts/docker-engine-second.sh env     # DOCKER_HOST=… lines for the TLS endpoint
#
# Addresses: tcp://127.0.0.1:23760 (TLS; client certificates in
# /var/lib/overeager-docker2/tls: ca.pem, cert.pem, key.pem) and
# unix:///run/overeager-docker2/docker.sock. The engine belongs to the machine, not to a
# checkout, so its certificates and log (/var/lib/overeager-docker2/dockerd.log) do too.
# Needs root (or sudo), dockerd, ip and openssl.
set -euo pipefail
state=/var/lib/overeager-docker2
tls="$state/tls"
run=/run/overeager-docker2
pidfile="$run/dockerd.pid"
sock="unix://$run/docker.sock"
tcp="tcp://127.0.0.1:23760"
bridge=oe-docker2
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"

running() {
  [ -f "$pidfile" ] && $sudo kill -0 "$(cat "$pidfile")" 2>/dev/null
}

answers() {
  DOCKER_HOST="$sock" docker info >/dev/null 2>&1
}

make_certs() {
  [ -f "$tls/key.pem" ] && return 0
  $sudo mkdir -p "$tls"
  $sudo chown "$(id -u):$(id -g)" "$tls"
  local t; t=$(mktemp -d)
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=overeager test CA" \
    -keyout "$t/ca-key.pem" -out "$tls/ca.pem" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$tls/server-key.pem" -out "$t/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$t/server.ext"
  openssl x509 -req -in "$t/server.csr" -CA "$tls/ca.pem" -CAkey "$t/ca-key.pem" -CAcreateserial -days 3650 \
    -extfile "$t/server.ext" -out "$tls/server-cert.pem" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=overeager client" -keyout "$tls/key.pem" -out "$t/client.csr" 2>/dev/null
  printf 'extendedKeyUsage=clientAuth\n' >"$t/client.ext"
  openssl x509 -req -in "$t/client.csr" -CA "$tls/ca.pem" -CAkey "$t/ca-key.pem" -CAcreateserial -days 3650 \
    -extfile "$t/client.ext" -out "$tls/cert.pem" 2>/dev/null
  rm -rf "$t"
  # A loopback test engine: its client files are for whoever runs the tests.
  chmod 0755 "$tls"
  chmod 0644 "$tls"/*.pem
}

start() {
  if running && answers; then
    return 0
  fi
  command -v dockerd >/dev/null || { echo "docker-engine-second: dockerd is not installed (scripts/setup.sh --test installs docker.io)" >&2; exit 1; }
  $sudo mkdir -p "$state/data" "$run"
  $sudo chmod 0755 "$state"
  $sudo touch "$state/dockerd.log"
  $sudo chown "$(id -u):$(id -g)" "$state/dockerd.log"
  make_certs
  # Its own bridge and subnet, so the two engines do not fight over docker0.
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    $sudo ip link add name "$bridge" type bridge
    $sudo ip addr add 172.29.250.1/24 dev "$bridge"
    $sudo ip link set "$bridge" up
  fi
  echo "docker-engine-second: starting a second dockerd (log: $state/dockerd.log)"
  # setsid: the engine outlives this script and is not in the caller's process group. No
  # iptables rules of its own: the first engine owns those, and runs here need no NAT.
  $sudo setsid dockerd \
    --data-root "$state/data" --exec-root "$run/exec" --pidfile "$pidfile" \
    --host "$sock" --host "$tcp" \
    --tlsverify --tlscacert "$tls/ca.pem" --tlscert "$tls/server-cert.pem" --tlskey "$tls/server-key.pem" \
    --bridge "$bridge" --iptables=false --ip-masq=false --shutdown-timeout 2 \
    >"$state/dockerd.log" 2>&1 </dev/null &
  for _ in $(seq 1 60); do
    if answers; then
      return 0
    fi
    sleep 1
  done
  echo "docker-engine-second: the second dockerd did not answer within 60 s; see $state/dockerd.log:" >&2
  tail -n 20 "$state/dockerd.log" >&2
  exit 1
}

stop() {
  running || return 0
  local pid; pid=$(cat "$pidfile")
  $sudo kill -TERM "$pid"
  for _ in $(seq 1 30); do
    $sudo kill -0 "$pid" 2>/dev/null || return 0
    sleep 1
  done
  echo "docker-engine-second: dockerd $pid did not stop within 30 s" >&2
  exit 1
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  env) echo "DOCKER_HOST=$tcp"; echo "DOCKER_TLS_VERIFY=1"; echo "DOCKER_CERT_PATH=$tls" ;;
  *) echo "usage: $0 start|stop|env" >&2; exit 2 ;;
esac
