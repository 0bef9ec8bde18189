"""What SQLite's never-reused ids (migration 016, AUTOINCREMENT) cost, beside an older commit.

A fresh store file takes ``--count`` tasks in batches of 10,000 (``add_tasks``), the leader
dispatches them all (``dispatch_due``: an envelope of 500 a time) and one worker claims them 100
at a time; each phase is timed, for this checkout and the baseline (``--baseline SRC``: an older
commit's ``src`` folder), ``--rounds`` times alternately, each in a process of its own.

    python bench/sqlite_ids.py --baseline ../wt838/src [--count 200000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
PHASES = ("add", "dispatch", "claim")

# One run, in a process whose cronlab is the src on its PYTHONPATH: prints each phase's seconds.
RUN = """
import json, sys, time
from cronlab.clock import SystemClock
from cronlab.election.store import StoreElector
from cronlab.ports import NewTask
from cronlab.stores.sqlite import SqliteStore
count, path = int(sys.argv[1]), sys.argv[2]
store = SqliteStore(path)
now = SystemClock().now_ms()
took = {}
started = time.perf_counter()
for first in range(0, count, 10_000):
    store.add_tasks(NewTask(idempotency_key=f"k{i}", task="t", trigger_ms=now - 1)
                    for i in range(first, min(count, first + 10_000)))
took["add"] = time.perf_counter() - started
lease = StoreElector(store, SystemClock()).acquire_or_renew("bench", 600_000)
started = time.perf_counter()
while store.dispatch_due(now, 10_000, lease.epoch):
    pass
took["dispatch"] = time.perf_counter() - started
started, got = time.perf_counter(), 0
while batch := store.queue_claim("w", 100, 600_000, now):
    got += len(batch)
took["claim"] = time.perf_counter() - started
assert got == count, (got, count)
store.close()
print(json.dumps(took))
"""


def run(src: Path, count: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="cronlab-bench-") as folder:
        done = subprocess.run(
            [sys.executable, "-c", RUN, str(count), str(Path(folder) / "s.db")],
            env={**os.environ, "PYTHONPATH": str(src)},
            capture_output=True, text=True, check=True, timeout=3600,
        )  # fmt: skip
    found: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="an older commit's src folder")
    ap.add_argument("--count", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    forms = {"this checkout": ROOT / "src", f"baseline {args.baseline}": Path(args.baseline)}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in forms}
    for _ in range(args.rounds):
        for name, src in forms.items():
            runs[name].append(run(src, args.count))
    base = {p: statistics.median(r[p] for r in runs[f"baseline {args.baseline}"]) for p in PHASES}
    table = Table("store", *(f"{p} s (median)" for p in PHASES), "vs baseline",
                  title=f"SQLite, {args.count:,} tasks, {args.rounds} runs each")  # fmt: skip
    for name, found in runs.items():
        mids = {p: statistics.median(r[p] for r in found) for p in PHASES}
        ratio = " ".join(f"{mids[p] / base[p]:.2f}×" for p in PHASES)
        table.add_row(name, *(f"{mids[p]:.2f}" for p in PHASES), ratio)
    Console().print(table)


if __name__ == "__main__":
    main()
