"""Takeover time with etcd election: SIGKILL the leader K times (default 20, TTL 10 s) and
measure kill → the next replica's acquisition (the ``acquire`` event it records, with an etcd
create revision higher than the killed leader's). Prints p50/p99 and, as the baseline, the
TTL itself (a standby cannot take over before the dead leader's etcd lease runs out).

    .venv/bin/python bench/dist_takeover.py [--kills 20] [--ttl 10]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid

import psycopg

from cronlab.clock import SystemClock
from cronlab.election.etcd import EtcdElector, parse_url
from cronlab.lab import report
from cronlab.ports import Event, Lease
from cronlab.stores.postgres import PostgresStore, with_database

ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
CLOCK = SystemClock()


def wait_leader(elector: EtcdElector, above: int, timeout_s: float) -> Lease:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        lease = elector.current()
        if lease is not None and lease.epoch > above:
            return lease
        time.sleep(0.05)
    raise SystemExit(f"no leader with an epoch above {above} within {timeout_s} s")


def kill(store: PostgresStore, lease: Lease) -> None:
    pid = int(lease.holder.rsplit("@", 1)[1])
    os.kill(pid, signal.SIGKILL)
    detail = {"target": "leader", "was_leader": True}
    event = Event(
        kind="crash",
        at_ms=CLOCK.now_ms(),
        holder=lease.holder,
        epoch=lease.epoch,
        pid=pid,
        detail=detail,
    )
    store.record_event(event)


def run(url: str, etcd: str, kills: int, ttl: float) -> list[float]:
    store = PostgresStore(url, fencing="epoch")
    elector = EtcdElector(parse_url(etcd), CLOCK)
    cmd = [sys.executable, "-m", "cronlab", "cluster", "--store", url, "--election", etcd]
    cmd += ["--replicas", "3", "--workers", "1", "--lease-ttl", str(ttl), "--restart-after", "1"]
    proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    try:
        lease = wait_leader(elector, 0, 30)
        for i in range(kills):
            time.sleep(1.5)  # let the killed replica's restart register as a standby
            kill(store, lease)
            lease = wait_leader(elector, lease.epoch, ttl * 3 + 10)
            print(f"kill {i + 1}/{kills}: new leader {lease.holder} epoch {lease.epoch}")
        time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    delays = list(report.takeover_delays(store.events()))
    store.close()
    return delays


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--ttl", type=float, default=10.0)
    ap.add_argument("--pg", default=ADMIN)
    ap.add_argument("--etcd", default="etcd://127.0.0.1:2379")
    args = ap.parse_args()
    name = f"cronlab_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.pg, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    try:
        url = with_database(args.pg, name)
        delays = run(url, f"{args.etcd}/bench-{name}", args.kills, args.ttl)
    finally:
        with psycopg.connect(args.pg, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    q = statistics.quantiles(delays, n=100, method="inclusive") if len(delays) > 1 else delays * 99
    print(
        f"takeover over {len(delays)} leader kills (etcd, TTL {args.ttl:g} s): "
        f"p50 {statistics.median(delays):.2f} s · p99 {q[98]:.2f} s · max {max(delays):.2f} s "
        f"(baseline: the TTL; p50/TTL = {statistics.median(delays) / args.ttl:.2f})"
    )


if __name__ == "__main__":
    main()
