"""Where the midnight run's time goes on SQLite: the engine's own store code in ONE process.

The cluster (``bench/engine_midnight.py``) runs 3 schedulers and 5 workers on one SQLite file.
Here the same work runs in one process with no one to wait for: N invoices seeded, then the
leader's dispatches (``SqlStore.dispatch_due``, 10,000 a transaction) and the workers' batches
(``StoreQueue.claim`` + ``SqlStore.execute`` with the lab's invoice batch form, 10,000 a
transaction) one after the other until every invoice is DONE. That is the floor for this
work on this machine with this code: what a cluster adds above it is coordination (the write
lock handed between processes, polling, scans). ``--profile`` adds cProfile's top entries for
the dispatch and the execute phases. Baseline, same run: the plain one-statement SQLite claim
loop of ``engine_midnight.py``.

    .venv/bin/python bench/midnight_floor.py [--count 1000000] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_midnight import baseline

from cronlab import execution
from cronlab.clock import SystemClock
from cronlab.election.store import StoreElector
from cronlab.lab import invoices
from cronlab.ports import Batch, Retry
from cronlab.queues.store import StoreQueue
from cronlab.stores.sqlite import SqliteStore

BATCH = 10_000


def phase(fn: Callable[[], int], profile: bool) -> tuple[float, int, str]:
    """``fn``'s seconds and result, and cProfile's top entries when asked."""
    prof = cProfile.Profile() if profile else None
    t = time.perf_counter()
    if prof is not None:
        prof.enable()
    n = fn()
    if prof is not None:
        prof.disable()
    took = time.perf_counter() - t
    top = ""
    if prof is not None:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(12)
        top = out.getvalue()
    return took, n, top


def run(path: Path, count: int, profile: bool) -> dict[str, object]:
    clock = SystemClock()
    store = SqliteStore(path)
    invoices.app.start(store)
    trigger = clock.now_ms()
    seed_s, _, _ = phase(lambda: store.add_tasks(invoices.tasks(count, trigger)), False)
    lease = StoreElector(store, clock).acquire_or_renew("leader", 600_000)
    assert lease is not None
    now = clock.now_ms()

    def dispatch() -> int:
        total = 0
        while n := store.dispatch_due(now, BATCH, lease.epoch):
            total += n
        return total

    queue = StoreQueue(store, clock)
    runner = invoices.app.registry.runner(clock.now_ms)

    def execute() -> int:
        total = 0
        while messages := queue.claim("worker", BATCH, 60_000):
            work = Batch(
                worker="worker", messages=messages, run=runner, retry=Retry(), now=clock.now_ms
            )
            total += execution.execute(work, store)["ok"]
        return total

    dispatch_s, dispatched, dispatch_top = phase(dispatch, profile)
    execute_s, executed, execute_top = phase(execute, profile)
    store.close()
    return {
        "seed_s": seed_s,
        "dispatch_s": dispatch_s,
        "execute_s": execute_s,
        "dispatched": dispatched,
        "executed": executed,
        "dispatch_top": dispatch_top,
        "execute_top": execute_top,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        f = run(Path(tmp) / "floor.db", args.count, args.profile)
        base = baseline(tmp, args.count)
    work_s = float(f["dispatch_s"]) + float(f["execute_s"])  # type: ignore[arg-type]
    n = args.count
    print(f"the midnight run's work in one process: {n:,} invoices, batches of {BATCH:,}")
    print(f"  seed:      {f['seed_s']:6.2f} s (not in the floor: done before the trigger)")
    print(f"  dispatch:  {f['dispatch_s']:6.2f} s ({f['dispatched']:,} dispatched)")
    print(f"  execute:   {f['execute_s']:6.2f} s ({f['executed']:,} invoices written, DONE)")
    print(f"  floor:     {work_s:6.2f} s trigger→last execution ({n / work_s:,.0f} tasks/s)")
    print(
        f"  baseline plain SQLite claim loop: {base:,.0f} rows/s ({n / base:.2f} s for one "
        f"update a row); floor / that = {work_s / (n / base):.2f}"
    )
    if args.profile:
        print("\ndispatch phase, cProfile by own time:\n" + str(f["dispatch_top"]))
        print("execute phase, cProfile by own time:\n" + str(f["execute_top"]))


if __name__ == "__main__":
    main()
