"""Takeover delay after the leader is SIGKILLed: p50/p99 over many kills (real processes).

``cronlab cluster`` (3 replicas, 1 worker, lease TTL 10 s, a killed replica restarts after
1 s) on one SQLite file; each round waits for a live leader, SIGKILLs it (``chaos``, which
records the event) and waits for the next acquisition. Delays come from ``cronlab report``.
Baseline: the lease TTL — the model's takeover delay (a crash frees the lease TTL later).

    .venv/bin/python bench/engine_takeover.py [--kills 20] [--ttl 10]
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cronlab.clock import SystemClock
from cronlab.exceptions import NotFoundError
from cronlab.lab import chaos
from cronlab.stores.sqlite import SqliteStore


def taken_over(store: SqliteStore, epoch: int) -> bool:
    return any(e.kind == "acquire" and (e.epoch or 0) > epoch for e in store.events())


def kill_and_wait(store: SqliteStore, clock: SystemClock, ttl: float) -> None:
    deadline = time.monotonic() + 3 * ttl + 30
    while True:
        try:
            hit = chaos.crash_leader(store, clock)
            break
        except NotFoundError:  # no live leader yet (starting, or the last one just died)
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    while not taken_over(store, hit.epoch or 0):
        if time.monotonic() > deadline:
            raise TimeoutError("no takeover")
        time.sleep(0.1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--ttl", type=float, default=10.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "takeover.db"
        url = f"sqlite:///{path}"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cronlab",
                "cluster",
                "--store",
                url,
                "--workers",
                "1",
                "--lease-ttl",
                str(args.ttl),
                "--restart-after",
                "1",
            ],
            stderr=subprocess.DEVNULL,
        )
        try:
            while not path.exists():
                time.sleep(0.1)
            store, clock = SqliteStore(path), SystemClock()
            for i in range(args.kills):
                kill_and_wait(store, clock, args.ttl)
                print(f"  kill {i + 1}/{args.kills} done", file=sys.stderr)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
        report = json.loads(
            subprocess.run(
                [sys.executable, "-m", "cronlab", "report", "--store", url, "--json"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
    delays = sorted(report["takeover_delays_s"])
    p50 = statistics.median(delays)
    p99 = delays[min(len(delays) - 1, int(0.99 * len(delays)))]
    print(f"takeover after SIGKILL of the leader, {len(delays)} kills, lease TTL {args.ttl} s:")
    print(f"  p50 {p50:.2f} s · p99 {p99:.2f} s · min {delays[0]:.2f} s · max {delays[-1]:.2f} s")
    print(
        f"  baseline (model: TTL) {args.ttl:.2f} s; p50 / TTL = {p50 / args.ttl:.2f}, "
        f"p99 / TTL = {p99 / args.ttl:.2f} (goal p99 <= TTL + 2 s)"
    )


if __name__ == "__main__":
    main()
