"""``app.run_until_idle()`` over N deferred tasks on SQLite (issue 14): N sync tasks that each
write one row through ``ctx.tx``, then N async tasks that each ``await asyncio.sleep(0.01)``
and write one row. Figures: wall seconds and tasks/s from the call to its return (every task
DONE, every row written once). For the async run, the reference is what running them one after
the other costs at the least: N × 10 ms of sleeping alone (computed, not run); its ratio says
how much the sleeps overlapped (at most ``--concurrency`` at once).

    .venv/bin/python bench/api_run_until_idle.py [--count 10000] [--concurrency 100] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import cronlab

SLEEP_S = 0.01


def one_run(count: int, concurrency: int, kind: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        app = cronlab.App(f"sqlite:///{Path(tmp) / 'bench.db'}", name="bench")
        app.store().write(lambda tx: tx.execute("CREATE TABLE effects (n INTEGER)"))

        @app.task(name="sync_task")
        def sync_task(ctx: cronlab.Context, n: int) -> None:
            ctx.tx.execute("INSERT INTO effects VALUES (?)", (n,))

        @app.task(name="async_task")
        async def async_task(ctx: cronlab.Context, n: int) -> None:
            await asyncio.sleep(SLEEP_S)
            ctx.tx.execute("INSERT INTO effects VALUES (?)", (n,))

        task = sync_task if kind == "sync" else async_task
        task.defer_many({"n": n} for n in range(count))
        t = time.perf_counter()
        counts = app.run_until_idle(concurrency=concurrency)
        took = time.perf_counter() - t
        rows = app.store().query("SELECT count(*), count(DISTINCT n) FROM effects")[0]
        assert counts["ok"] == count and tuple(rows) == (count, count), (counts, rows)
        app.store().close()
        return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--concurrency", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print(f"run_until_idle over {args.count:,} deferred tasks on SQLite, median of {args.runs}")
    for kind in ("sync", "async"):
        runs = [one_run(args.count, args.concurrency, kind) for _ in range(args.runs)]
        s = statistics.median(runs)
        line = (
            f"{kind}: {s:.2f} s, {args.count / s:,.0f} tasks/s "
            f"(runs: {', '.join(f'{r:.2f}' for r in runs)} s)"
        )
        if kind == "async":
            serial = args.count * SLEEP_S
            line += (
                f"; one after the other: at least {serial:.0f} s of sleep alone → "
                f"{serial / s:.1f}× faster (concurrency {args.concurrency})"
            )
        print(line)


if __name__ == "__main__":
    main()
