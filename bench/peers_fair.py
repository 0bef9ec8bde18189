"""cronlab against Procrastinate, fairly (issue 17): the same PostgreSQL server, the same machine,
the same run, the same work per job — one row inserted into a table of the job's own — each
committed the way the system commits a job's effect, and the same number of worker processes.

* **Procrastinate** (3.x, a bench-only dependency), tuned as its documentation advises for
  throughput: ``--processes`` worker processes, each ``concurrency=10`` (async), jobs deleted on
  success (the table stays small), LISTEN/NOTIFY on. A job is an ``async def`` that inserts its
  row through a connection pool of its process (autocommit), then Procrastinate marks it done:
  two commits per job.
* **cronlab**, ``cronlab cluster`` with 1 scheduler and ``--processes`` workers, its task
  ``def record(ctx, n)`` inserting the row through ``ctx.tx``: the row commits with the job's
  ack, and a worker commits a whole batch of them in one transaction (group commit). Three
  forms, each reported: the single-task form with the default batch, the same with
  ``--worker-batch 1`` (one job per transaction, as Procrastinate), and the batch form (one
  INSERT for the whole batch).
* **Celery** (5.x, bench-only), what a Python user picks instead for the dispatch side: a Redis
  broker, one prefork worker of ``--processes`` children, ``acks_late`` (the message is acked
  after the job ran: at-least-once, as the others) and a prefetch of 64 per child (its
  optimisation guide's advice for many short tasks; the default is 4). A job inserts its row
  through a connection of its child (autocommit), then the worker acks it to Redis. Jobs are
  sent one ``apply_async`` each over one producer (Celery has no bulk send).

Autovacuum is turned on for the run (``ALTER SYSTEM``; this machine's server has it off) and
restored afterwards, as on a normal server. Every side gets its jobs in before the clock starts
(Procrastinate's ``batch_defer``, cronlab's ``defer_many``, Celery's ``apply_async``), and is
timed from the workers' start to the last row; the first row's delay is reported too.

    .venv/bin/python bench/peers_fair.py [--count 50000] [--processes 3] [--pg postgresql://…]
        [--redis redis://127.0.0.1:6379/9] [--forms procrastinate,batch1,...]
        [--baseline SRC]

``--forms`` runs some of the rows only (procrastinate, default, batch1, batchform, celery; the
first one run is the ratios' baseline); ``--baseline SRC`` adds the ``--worker-batch 1`` row of
an older commit's ``src`` folder (a ``git worktree``), run in the same way in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import celery
import procrastinate
import psycopg
from psycopg_pool import AsyncConnectionPool

from cronlab.testing import scratch_database

ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
RESULTS = (
    "CREATE TABLE results (n BIGINT NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())"
)
DEFER_CHUNK = 10_000
FORMS = ("procrastinate", "default", "batch1", "batchform", "celery")
CONCURRENCY = 10  # Procrastinate's per-process concurrency
CELERY_PREFETCH = 64  # messages a Celery child reserves ahead (default 4)

CRONLAB_APP = """
import json
import os

import cronlab
from cronlab.handlers import Item

app = cronlab.App(os.environ["CRONLAB_STORE"], name="bench")


@app.task(name="record")
def record(ctx: cronlab.Context, n: int) -> None:
    ctx.tx.execute("INSERT INTO results (n) VALUES (%s)", (n,))


if os.environ.get("BENCH_BATCH_FORM") == "1":

    @app.registry.batch_handler("record")
    def record_all(items: list[Item], tx) -> list[bool]:
        ns = [p["n"] for _, p in items]
        tx.execute("INSERT INTO results (n) SELECT unnest(%s::bigint[])", (ns,))
        return [True] * len(ns)
"""


# -- Procrastinate -------------------------------------------------------------------------


def procrastinate_app(url: str) -> tuple[procrastinate.App, Any]:
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))
    pool: dict[str, AsyncConnectionPool] = {}

    async def record(n: int) -> None:
        if "p" not in pool:
            pool["p"] = AsyncConnectionPool(url, min_size=1, max_size=CONCURRENCY, open=False)
            await pool["p"].open()
        async with pool["p"].connection() as c:
            await c.execute("INSERT INTO results (n) VALUES (%s)", (n,))

    return app, app.task(name="record")(record)


async def _defer(url: str, count: int) -> float:
    app, task = procrastinate_app(url)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        started = time.perf_counter()
        for lo in range(0, count, DEFER_CHUNK):
            await task.batch_defer_async(
                *({"n": n} for n in range(lo, min(count, lo + DEFER_CHUNK)))
            )
        return time.perf_counter() - started


def _procrastinate_worker(url: str) -> None:
    app, _ = procrastinate_app(url)
    app.run_worker(
        wait=False,
        concurrency=CONCURRENCY,
        delete_jobs="successful",
        install_signal_handlers=False,
    )


def procrastinate_run(url: str, count: int, processes: int) -> dict[str, float]:
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(RESULTS)
    defer_s = asyncio.run(_defer(url, count))
    spawn = multiprocessing.get_context("spawn")
    workers = [
        spawn.Process(target=_procrastinate_worker, args=(url,), daemon=True)
        for _ in range(processes)
    ]
    started = time.time()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return _timing(url, count, started, defer_s)


# -- Celery --------------------------------------------------------------------------------

CELERY_APP = """
import os

import psycopg
from celery import Celery

app = Celery("bench", broker=os.environ["BENCH_BROKER"])
app.conf.update(
    task_acks_late=True,
    worker_prefetch_multiplier=int(os.environ["BENCH_PREFETCH"]),
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)
_conn = []


@app.task(name="record")
def record(n):
    if not _conn:
        _conn.append(psycopg.connect(os.environ["BENCH_PG"], autocommit=True))
    _conn[0].execute("INSERT INTO results (n) VALUES (%s)", (n,))
"""

_CELERY_DEFER = """
import time
from bench_app import app, record
t = time.perf_counter()
with app.producer_or_acquire() as producer:
    for n in range({count}):
        record.apply_async((n,), producer=producer)
print(time.perf_counter() - t)
"""


def celery_run(url: str, count: int, processes: int, broker: str) -> dict[str, float]:
    """Celery with a Redis broker: ``processes`` prefork children, acks late (a job's message
    is acked after it ran, at-least-once as the others), a prefetch of CELERY_PREFETCH per
    child (its docs' advice for many short tasks); one row per job through a connection of the
    child's own (autocommit), then the ack to Redis: two round trips per job."""
    import redis

    redis.Redis.from_url(broker).flushdb()
    folder = Path(tempfile.mkdtemp(prefix="cronlab-peers-"))
    (folder / "bench_app.py").write_text(textwrap.dedent(CELERY_APP))
    env = {**os.environ, "BENCH_BROKER": broker, "BENCH_PG": url}
    env["BENCH_PREFETCH"] = str(CELERY_PREFETCH)
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(RESULTS)
    defer_s = _defer_seconds(_CELERY_DEFER.format(count=count), folder, env)
    cmd = [sys.executable, "-m", "celery", "-A", "bench_app", "worker", "--pool", "prefork"]
    cmd += ["--concurrency", str(processes), "--loglevel", "WARNING", "--without-gossip"]
    cmd += ["--without-mingle", "--without-heartbeat"]
    started = time.time()
    _run_until_rows(cmd, folder, env, url, count, signal.SIGTERM)
    return _timing(url, count, started, defer_s)


def _defer_seconds(script: str, folder: Path, env: dict[str, str]) -> float:
    """Run an enqueue ``script`` in ``folder``; the seconds it printed."""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=folder, env=env, capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"the enqueue failed: {done.stderr.strip()}")
    return float(done.stdout.strip())


def _run_until_rows(
    cmd: list[str], folder: Path, env: dict[str, str], url: str, count: int, stop: int
) -> None:
    """Start the workers ``cmd``, wait for ``count`` result rows, stop them with ``stop``."""
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    proc = subprocess.Popen(cmd, cwd=folder, env=env, start_new_session=True, **quiet)
    try:
        with psycopg.connect(url, autocommit=True) as c:
            while c.execute("SELECT count(*) FROM results").fetchone()[0] < count:
                time.sleep(0.1)
    finally:
        os.killpg(proc.pid, stop)
        proc.wait(60)


# -- cronlab -------------------------------------------------------------------------------


def cronlab_run(
    url: str, count: int, processes: int, *, batch: int | None, form: str, src: str | None = None
) -> dict[str, float]:
    """``src``: run the cronlab of that source folder (an older commit's), not this one."""
    folder = Path(tempfile.mkdtemp(prefix="cronlab-peers-"))
    (folder / "bench_app.py").write_text(textwrap.dedent(CRONLAB_APP))
    env = {**os.environ, "CRONLAB_STORE": url, "BENCH_BATCH_FORM": "1" if form == "batch" else "0"}
    if src is not None:
        env["PYTHONPATH"] = str(Path(src).resolve())
    defer_s = _defer_seconds(_DEFER.format(count=count), folder, env)
    with psycopg.connect(url, autocommit=True) as c:  # (after the store: it refuses a foreign one)
        c.execute(RESULTS)
    cmd = [sys.executable, "-m", "cronlab", "cluster", "--app", "bench_app:app", "--replicas", "1"]
    cmd += ["--workers", str(processes)] + ([] if batch is None else ["--worker-batch", str(batch)])
    started = time.time()
    _run_until_rows(cmd, folder, env, url, count, signal.SIGINT)
    return _timing(url, count, started, defer_s)


_DEFER = """
import time
from bench_app import app, record
app.store()
t = time.perf_counter()
record.defer_many({{"n": n}} for n in range({count}))
print(time.perf_counter() - t)
"""


def _timing(url: str, count: int, started: float, defer_s: float) -> dict[str, float]:
    with psycopg.connect(url) as c:
        rows, distinct, first, last = c.execute(
            "SELECT count(*), count(DISTINCT n), extract(epoch FROM min(at)), "
            "extract(epoch FROM max(at)) FROM results"
        ).fetchone()
    assert (rows, distinct) == (count, count), f"{rows} rows for {distinct} jobs of {count}"
    return {
        "defer_per_s": count / defer_s,
        "first_row_s": float(first) - started,
        "jobs_per_s": count / (float(last) - started),
        "steady_per_s": count / max(1e-9, float(last) - float(first)),
    }


# -- the run -------------------------------------------------------------------------------


@contextmanager
def autovacuum_on(admin: str) -> Iterator[str]:
    """The server's autovacuum on for the block, as it is on a normal server; then as it was."""
    with psycopg.connect(admin, autocommit=True) as c:
        before = c.execute("SHOW autovacuum").fetchone()[0]
        c.execute("ALTER SYSTEM SET autovacuum = on")
        c.execute("SELECT pg_reload_conf()")
    try:
        yield before
    finally:
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute(
                "ALTER SYSTEM RESET autovacuum"
                if before == "on"
                else "ALTER SYSTEM SET autovacuum = off"
            )
            c.execute("SELECT pg_reload_conf()")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=50_000)
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--pg", default=ADMIN)
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/9", help="Celery's broker (flushed)")
    ap.add_argument("--forms", default=",".join(FORMS), help="the rows to run, in this order")
    ap.add_argument("--baseline", help="an older commit's src folder: its --worker-batch 1 row")
    args = ap.parse_args()
    n, p = args.count, args.processes
    forms = args.forms.split(",")
    if unknown := sorted(set(forms) - set(FORMS)):
        raise SystemExit(f"peers_fair: no form {unknown[0]!r} (forms: {', '.join(FORMS)})")
    rows = {
        "procrastinate": (
            f"Procrastinate {procrastinate.__version__} ({p} × concurrency {CONCURRENCY})",
            lambda url: procrastinate_run(url, n, p),
        ),
        "default": (
            "cronlab, single-task form, default batch",
            lambda url: cronlab_run(url, n, p, batch=None, form="single"),
        ),
        "batch1": (
            "cronlab, single-task form, --worker-batch 1",
            lambda url: cronlab_run(url, n, p, batch=1, form="single"),
        ),
        "batchform": (
            "cronlab, batch form",
            lambda url: cronlab_run(url, n, p, batch=None, form="batch"),
        ),
        "celery": (
            f"Celery {celery.__version__} (Redis broker, prefork {p}, acks late, "
            f"prefetch {CELERY_PREFETCH})",
            lambda url: celery_run(url, n, p, args.redis),
        ),
    }
    chosen = [rows[f] for f in forms]
    if args.baseline:
        chosen.append(
            (
                f"cronlab of {args.baseline}, single-task form, --worker-batch 1",
                lambda url: cronlab_run(url, n, p, batch=1, form="single", src=args.baseline),
            )
        )
    runs: list[tuple[str, dict[str, float]]] = []
    with autovacuum_on(args.pg) as before:
        print(f"autovacuum on for the run (the server had it {before}); {n:,} jobs, {p} workers")
        for name, run in chosen:
            with scratch_database(args.pg, "cronlab_peers") as url:
                result = run(url)
            runs.append((name, result))
            print(
                f"{name}: {result['jobs_per_s']:,.0f} jobs/s from the workers' start "
                f"({result['steady_per_s']:,.0f}/s first row to last), first row after "
                f"{result['first_row_s']:.2f} s; enqueue {result['defer_per_s']:,.0f}/s"
            )
    first, base = runs[0][0], runs[0][1]["jobs_per_s"]
    for name, result in runs[1:]:
        print(f"ratio {name} / {first.split(' (')[0]}: {result['jobs_per_s'] / base:.2f}×")


if __name__ == "__main__":
    main()
