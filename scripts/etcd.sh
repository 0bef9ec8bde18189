#!/usr/bin/env bash
# A single-node etcd on loopback for the tests: scripts/etcd.sh start|stop|status
# Client 127.0.0.1:${ETCD_PORT:-2379}, data in ${ETCD_DIR:-/tmp/cronlab-etcd}.
set -euo pipefail
port=${ETCD_PORT:-2379}
peer=$((port + 1))
dir=${ETCD_DIR:-/tmp/cronlab-etcd}
url="http://127.0.0.1:$port"

healthy() { curl -fsS -m 2 "$url/health" 2>/dev/null | grep -q '"health":"true"'; }

case "${1:-start}" in
  start)
    healthy && exit 0
    mkdir -p "$dir"
    nohup etcd --name cronlab --data-dir "$dir/data" \
      --listen-client-urls "$url" --advertise-client-urls "$url" \
      --listen-peer-urls "http://127.0.0.1:$peer" \
      --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
      --initial-cluster "cronlab=http://127.0.0.1:$peer" >"$dir/etcd.log" 2>&1 &
    echo $! >"$dir/etcd.pid"
    for _ in $(seq 1 50); do healthy && exit 0; sleep 0.2; done
    echo "etcd did not become healthy on $url; see $dir/etcd.log" >&2
    exit 1 ;;
  stop)
    [ -f "$dir/etcd.pid" ] && kill "$(cat "$dir/etcd.pid")" 2>/dev/null || true ;;
  status)
    healthy && echo "etcd healthy on $url" || { echo "etcd down on $url"; exit 1; } ;;
esac
