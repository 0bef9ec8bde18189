"""``Task.defer_many`` of N tasks from Python code, on SQLite and on PostgreSQL (issue 14).

Each store gets a fresh database. The figure is tasks/s from a generator of N argument dicts
(nothing held in memory at once) to the last batch committed: every item checked against the
task's signature and encoded as JSON, a fresh key each, batches of 10,000 in one transaction
each. Baseline, in the same run on a fresh database of the same kind: the internal path it
replaced, ``store.add_tasks`` over prebuilt ``NewTask`` rows (no checks, one transaction).

    .venv/bin/python bench/api_defer_many.py [--count 1000000] [--runs 3] [--pg postgresql://…]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import cronlab
from cronlab.ports import NewTask
from cronlab.testing import scratch_database

ADMIN = "postgresql://postgres@127.0.0.1:5432/test"


def app_on(url: str) -> tuple[cronlab.App, cronlab.Task[..., None]]:
    app = cronlab.App(url, name="bench")

    @app.task(name="bill")
    def bill(ctx: cronlab.Context, plan: str, customer: int) -> None: ...

    return app, bill


def with_defer_many(url: str, count: int) -> float:
    app, bill = app_on(url)
    app.store()  # opened and migrated before the clock starts
    items = ({"plan": "pro", "customer": c} for c in range(count))
    t = time.perf_counter()
    result = bill.defer_many(items)
    took = time.perf_counter() - t
    assert result.added == count, result
    app.store().close()
    return count / took


def with_add_tasks(url: str, count: int) -> float:
    app, _ = app_on(url)
    store = app.store()
    rows = (
        NewTask(f"bill:{c}", "bill", 0, f'{{"plan":"pro","customer":{c}}}') for c in range(count)
    )
    t = time.perf_counter()
    added = store.add_tasks(rows)
    took = time.perf_counter() - t
    assert added == count
    store.close()
    return count / took


@contextmanager
def sqlite_db() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as tmp:
        yield f"sqlite:///{Path(tmp) / 'bench.db'}"


def measure(
    name: str, fresh: Callable[[], AbstractContextManager[str]], count: int, runs: int
) -> None:
    ours, base = [], []
    for _ in range(runs):  # interleaved, each on a fresh database
        with fresh() as url:
            ours.append(with_defer_many(url, count))
        with fresh() as url:
            base.append(with_add_tasks(url, count))
    a, b = statistics.median(ours), statistics.median(base)
    print(
        f"{name}: defer_many {a:,.0f} tasks/s (runs: {', '.join(f'{x:,.0f}' for x in ours)}); "
        f"baseline add_tasks {b:,.0f} tasks/s (runs: {', '.join(f'{x:,.0f}' for x in base)}); "
        f"ratio {a / b:.2f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--pg", default=ADMIN, help="an admin URL; a database is made per run")
    args = ap.parse_args()
    print(f"defer_many of {args.count:,} tasks, median of {args.runs} runs each")
    measure("SQLite", sqlite_db, args.count, args.runs)
    measure("PostgreSQL", lambda: scratch_database(args.pg, "cronlab_bench"), args.count, args.runs)


if __name__ == "__main__":
    main()
