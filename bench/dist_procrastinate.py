"""cronlab vs Procrastinate on the same PostgreSQL server, in the same run, same job count.

Procrastinate (a bench-only dependency): ``batch_defer`` N no-op jobs, then 5 worker processes
(``run_worker(wait=False)``) execute them. cronlab: seed N invoice tasks (each writes an invoice
row — more work than a no-op), then ``cronlab cluster`` with 1 scheduler and 5 workers dispatches
and executes them. Both rates and the ratio are printed (goal: cronlab ≥ 10×).

Each side's tables are ANALYZEd after its jobs went in, outside the timings, as a server's
autovacuum would do: this machine's PostgreSQL runs with autovacuum off, and without
statistics Procrastinate's fetch of one job from 1,000,000 took 1.09 s instead of 6.4 ms.

    .venv/bin/python bench/dist_procrastinate.py [--count 1000000] [--pg postgresql://…]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import signal
import subprocess
import sys
import time
from typing import Any

import procrastinate
import psycopg

from cronlab.lab.invoices import tasks as invoice_tasks
from cronlab.stores.postgres import PostgresStore
from cronlab.testing import scratch_database

ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
DEFER_CHUNK = 10_000


def noop() -> None:
    """The job: nothing."""


def make_app(url: str) -> tuple[procrastinate.App, Any]:
    """A Procrastinate app on ``url`` with the ``noop`` task registered."""
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))
    return app, app.task(name="noop")(noop)


async def _defer(url: str, count: int) -> float:
    app, task = make_app(url)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        started = time.perf_counter()
        for done in range(0, count, DEFER_CHUNK):
            await task.batch_defer_async(*[{}] * min(DEFER_CHUNK, count - done))
        return time.perf_counter() - started


def _worker(url: str) -> None:
    app, _ = make_app(url)
    app.run_worker(
        wait=False,
        concurrency=1,
        delete_jobs="successful",
        listen_notify=False,
        install_signal_handlers=False,
    )


def analyze(url: str) -> None:
    """Statistics for the planner, as autovacuum would gather them."""
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("ANALYZE")


def procrastinate_run(url: str, count: int) -> tuple[float, float]:
    """(defer seconds, execute seconds) with 5 worker processes."""
    defer_s = asyncio.run(_defer(url, count))
    analyze(url)
    spawn = multiprocessing.get_context("spawn")
    # daemonic: stopped when this script exits, even by SIGTERM (see main), not left orphaned
    workers = [spawn.Process(target=_worker, args=(url,), daemon=True) for _ in range(5)]
    started = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    execute_s = time.perf_counter() - started
    with psycopg.connect(url) as c:
        left = c.execute("SELECT count(*) FROM procrastinate_jobs").fetchone()
    assert left == (0,), f"procrastinate left {left} jobs"
    return defer_s, execute_s


def cronlab_run(url: str, count: int) -> tuple[float, float]:
    """(seed seconds, dispatch + execute seconds incl. process start) with 5 workers."""
    store = PostgresStore(url)
    started = time.perf_counter()
    store.add_tasks(invoice_tasks(count, store.server_ms() - 1))
    seed_s = time.perf_counter() - started
    analyze(url)
    cmd = [sys.executable, "-m", "cronlab", "cluster", "--store", url, "--replicas", "1"]
    started = time.perf_counter()
    proc = subprocess.Popen([*cmd, "--workers", "5"], stderr=subprocess.DEVNULL)
    try:
        while store.counts()["DONE"] < count:
            time.sleep(0.2)
        execute_s = time.perf_counter() - started
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    store.close()
    return seed_s, execute_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--pg", default=ADMIN, help="an admin URL; a database is made per run")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # exit cleanly: workers stop too
    n = args.count
    with scratch_database(args.pg, "cronlab_bench") as url:
        p_defer, p_exec = procrastinate_run(url, n)
    with scratch_database(args.pg, "cronlab_bench") as url:
        c_seed, c_exec = cronlab_run(url, n)
    p_total, c_total = p_defer + p_exec, c_seed + c_exec
    print(
        f"procrastinate {procrastinate.__version__}: defer {n / p_defer:,.0f}/s · execute "
        f"{n / p_exec:,.0f}/s (5 workers) · total {p_total:.1f} s = {n / p_total:,.0f} jobs/s"
    )
    print(
        f"cronlab: seed {n / c_seed:,.0f}/s · dispatch+execute {n / c_exec:,.0f}/s "
        f"(1 scheduler, 5 workers) · total {c_total:.1f} s = {n / c_total:,.0f} tasks/s"
    )
    print(
        f"ratio cronlab/procrastinate end to end: {p_total / c_total:.1f}× "
        f"(execute phase {p_exec / c_exec:.1f}×; goal ≥ 10×) on {n:,} jobs"
    )


if __name__ == "__main__":
    main()
