"""What the run history's two indexes (migration 010: ``tasks_trigger``, ``executions_task``)
and the per-run start time cost the engine, in one process on a SQLite file.

The same work on two fresh stores — this release's, and this release's with the two indexes
dropped (the baseline) — interleaved ``--rounds`` times: seed N tasks due now
(``add_tasks``), dispatch them all (one fenced ``dispatch_due``), run them with a real worker
loop (a handler that does nothing). Printed: µs per task of each phase, medians, and the ratio
against the baseline.

    .venv/bin/python bench/history_indexes.py [--count 200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from cronlab.clock import SystemClock
from cronlab.election.store import StoreElector
from cronlab.handlers import Registry
from cronlab.ports import NewTask
from cronlab.queues.store import StoreQueue
from cronlab.runtime.worker import Worker, WorkerConfig
from cronlab.stores.sqlite import SqliteStore

PHASES = ("seed", "dispatch", "execute")


def one(path: Path, count: int, indexes: bool) -> dict[str, float]:
    store = SqliteStore(path)
    if not indexes:
        store.write(lambda tx: tx.execute("DROP INDEX tasks_trigger"))
        store.write(lambda tx: tx.execute("DROP INDEX executions_task"))
    clock = SystemClock()
    registry = Registry()
    registry.handler("noop")(lambda ctx, payload: True)
    now = clock.now_ms()
    took: dict[str, float] = {}
    t = time.perf_counter()
    store.add_tasks(NewTask(f"k{i}", "noop", now) for i in range(count))
    took["seed"] = time.perf_counter() - t
    lease = StoreElector(store, clock).acquire_or_renew("bench", 60_000)
    assert lease is not None
    t = time.perf_counter()
    while store.dispatch_due(clock.now_ms(), 10_000, lease.epoch):
        pass
    took["dispatch"] = time.perf_counter() - t
    worker = Worker(
        WorkerConfig(index=0), store=store, queue=StoreQueue(store, clock), registry=registry,
        clock=clock, name="w",
    )  # fmt: skip
    t = time.perf_counter()
    while store.queue_depth():
        worker.step()
    took["execute"] = time.perf_counter() - t
    assert store.counts()["DONE"] == count
    store.close()
    return {k: v * 1e6 / count for k, v in took.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as folder:
        for r in range(args.rounds):
            for indexes in (False, True):
                path = Path(folder) / f"{r}-{indexes}.db"
                runs[indexes].append(one(path, args.count, indexes))
    print(f"{args.count:,} tasks, {args.rounds} interleaved rounds, µs per task (median):")
    total = {True: 0.0, False: 0.0}
    for phase in PHASES:
        med = {k: statistics.median(r[phase] for r in v) for k, v in runs.items()}
        total[True] += med[True]
        total[False] += med[False]
        print(f"  {phase:9s} baseline (no history indexes) {med[False]:6.2f}   "
              f"this release {med[True]:6.2f}   ratio {med[True] / med[False]:.3f}")  # fmt: skip
    print(
        f"  all       baseline {total[False]:6.2f}   this release {total[True]:6.2f}   "
        f"ratio {total[True] / total[False]:.3f}"
    )


if __name__ == "__main__":
    main()
