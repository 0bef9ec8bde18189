#!/usr/bin/env bash
# Installs and starts what the tests and the lab need, from nothing. Idempotent.
#   scripts/setup.sh        everything for `make test`
#   scripts/setup.sh --web  only what the lab page needs
set -euo pipefail
cd "$(dirname "$0")/.."
only_web=0
[ "${1:-}" = "--web" ] && only_web=1

apt_install() {
  if [ "$(id -u)" != 0 ]; then
    echo "setup: need root to apt-get install $*; install them and run again" >&2
    return 1
  fi
  if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' 2>/dev/null | head -1)" ]; then
    apt-get update -qq
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null || {
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  }
}

# The page's charting library is committed (src/cronlab/web/static/vendor, MIT, pinned by
# scripts/vendor-uplot.sh), so a wheel built anywhere serves the charts.
[ "$only_web" = 1 ] && exit 0

command -v chromium >/dev/null || apt_install chromium
command -v etcd >/dev/null || apt_install etcd-server

# Servers the distributed backends' tests talk to, all on loopback.
if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
fi
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
fi
bash scripts/etcd.sh start
