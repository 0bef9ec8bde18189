"""What one claim costs on PostgreSQL, beside an older commit's claim, in the same run.

A queue of ``--count`` dispatched tasks (envelopes of 500) is drained by one worker claiming
``--limit`` messages at a time; the figure is milliseconds per claim, this checkout's and the
baseline's (``--baseline SRC``: an older commit's ``src`` folder), each run ``--rounds`` times
alternately in a process of its own (the median shown), on a scratch database of its own.

    python bench/claim_cost.py --baseline ../wt-base/src [--limit 100] [--count 100000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
PG = os.environ.get("CRONLAB_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")

# One drain, in a process whose cronlab is the src on its PYTHONPATH: prints ms per claim.
DRAIN = """
import sys, time
sys.path.insert(0, sys.argv[4])
from contract.dist_servers import pg_database
from cronlab.clock import SystemClock
from cronlab.election.store import StoreElector
from cronlab.ports import NewTask
from cronlab.stores.postgres import PostgresStore
limit, count = int(sys.argv[1]), int(sys.argv[2])
with pg_database(sys.argv[3]) as url:
    store = PostgresStore(url)
    now = store.server_ms()
    store.add_tasks(NewTask(idempotency_key=f"k{i}", task="t", trigger_ms=now - 1)
                    for i in range(count))
    lease = StoreElector(store, SystemClock()).acquire_or_renew("bench", 60_000)
    assert lease is not None and store.dispatch_due(now, count, lease.epoch) == count
    worker = PostgresStore(url)
    started, claims, got = time.perf_counter(), 0, 0
    while batch := worker.queue_claim("w", limit, 60_000, now):
        claims, got = claims + 1, got + len(batch)
    assert got == count, (got, count)
    print(1000 * (time.perf_counter() - started) / claims)
    worker.close()
    store.close()
"""


def drain(src: Path, limit: int, count: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", DRAIN, str(limit), str(count), PG, str(ROOT / "tests")],
        env=env, capture_output=True, text=True, check=True, timeout=1800,
    )  # fmt: skip
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="an older commit's src folder")
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--count", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    forms = {"this checkout": ROOT / "src", f"baseline {args.baseline}": Path(args.baseline)}
    times: dict[str, list[float]] = {name: [] for name in forms}
    for _ in range(args.rounds):
        for name, src in forms.items():
            times[name].append(drain(src, args.limit, args.count))
    base = statistics.median(times[f"baseline {args.baseline}"])
    table = Table("claim", "ms per claim (median)", "runs", "vs baseline",
                  title=f"one worker, --limit {args.limit}, {args.count:,} tasks")  # fmt: skip
    for name, found in times.items():
        mid = statistics.median(found)
        runs = " ".join(f"{t:.2f}" for t in found)
        table.add_row(name, f"{mid:.2f}", runs, f"{mid / base:.2f}×")
    Console().print(table)


if __name__ == "__main__":
    main()
