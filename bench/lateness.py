"""Trigger lateness (issue 17): a handler's start minus its trigger time, p50/p99/max, on a
``cronlab cluster`` of real processes, SQLite or PostgreSQL.

* ``a``: an idle cluster (2 replicas, 2 workers), one schedule ``* * * * * *``, ``--minutes``.
* ``b``: 10,000 schedules ``* * * * *`` (3 replicas, 5 workers), ``--minutes``.
* ``c``: ``--count`` invoices due at one instant (3 replicas, 5 workers): the lateness of the
  first and of the last.

``a`` and ``b`` also run with wake-ups off (``CRONLAB_WAKEUPS=off``: the scheduler's
whole-second scan and the workers' 100 ms poll, as before them) for ``--before-minutes``.
The baseline, measured in the same run: a bare process sleeping to every whole second for
20 s — this machine's own timer lateness, the floor under any of these figures.

Only fires from 3 s after the first run to 3 s before the stop count (the start-up is
measured by ``bench/startup.py``); a fire in that window that was skipped (``overlap=skip``:
the one before had not finished) or never ran is counted as such, not left out.

    .venv/bin/python bench/lateness.py --case a --store sqlite [--minutes 10]
    .venv/bin/python bench/lateness.py --case b --store postgresql [--minutes 5]
    .venv/bin/python bench/lateness.py --case c --store sqlite [--count 1000000]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.progress import Progress

from cronlab import stores
from cronlab.lab.invoices import tasks as invoice_tasks
from cronlab.stores.sql import SqlStore
from cronlab.testing import scratch_database

ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
ROOT = Path(__file__).resolve().parent.parent
EDGE_MS = 3_000
SHAPES = {"a": (1, "* * * * * *", 2, 2), "b": (10_000, "* * * * *", 3, 5)}
FIRST_RUNS = """
SELECT t.trigger_ms, min(e.start_ms), t.status FROM tasks t
LEFT JOIN executions e ON e.task_id = t.id
WHERE t.trigger_ms BETWEEN {lo} AND {hi} AND t.task = '{handler}'
GROUP BY t.id, t.trigger_ms, t.status
"""


def percentiles(values: list[int]) -> dict[str, float]:
    ordered = sorted(values)
    at = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"n": len(ordered), "p50": at(0.5), "p99": at(0.99), "max": ordered[-1]}


def baseline(seconds: int = 20) -> dict[str, float]:
    """Milliseconds a bare ``time.sleep`` to each whole second wakes late."""
    late = []
    for _ in range(seconds):
        target = (time.time() // 1 + 1) * 1000
        time.sleep(max(0.0, target / 1000 - time.time()))
        late.append(int(time.time() * 1000 - target))
    return percentiles(late)


@contextmanager
def store_url(kind: str) -> Iterator[str]:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="cronlab-lateness-") as d:
            yield f"sqlite:///{d}/store.db"
    else:
        with scratch_database(ADMIN, "cronlab_bench") as url:
            yield url


@contextmanager
def cluster(
    url: str, replicas: int, workers: int, env: dict[str, str], app: bool
) -> Iterator[None]:
    cmd = [sys.executable, "-m", "cronlab", "cluster", "--store", url]
    cmd += ["--replicas", str(replicas), "--workers", str(workers), "--restart-after", "never"]
    if app:
        cmd += ["--app", "bench.lateness_app:app"]
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=full, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(120)


def wait(seconds: float, what: str) -> None:
    with Progress(transient=True) as bar:
        job = bar.add_task(what, total=seconds)
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(1.0, left))
            bar.update(job, completed=seconds - max(0.0, left))


def schedules_case(kind: str, case: str, minutes: float, wakeups: bool) -> dict[str, Any]:
    count, expr, replicas, workers = SHAPES[case]
    env = {"CRONLAB_BENCH_SCHEDULES": str(count), "CRONLAB_BENCH_CRON": expr}
    env["CRONLAB_WAKEUPS"] = "on" if wakeups else "off"
    with store_url(kind) as url:
        started = int(time.time() * 1000)
        with cluster(url, replicas, workers, env, app=True):
            wait(minutes * 60, f"{kind} case {case}, wake-ups {'on' if wakeups else 'off'}")
            stopped = int(time.time() * 1000)
        store = stores.open_store(url, create=False)
        try:
            return _lateness(store, started + EDGE_MS, stopped - EDGE_MS, "tick")
        finally:
            store.close()


def _lateness(store: SqlStore, lo: int, hi: int, handler: str) -> dict[str, Any]:
    (first,) = store.query(store.own("SELECT min(start_ms) FROM executions"))[0]
    lo = max(lo, int(first or hi) + EDGE_MS)  # the cluster's start-up is not steady state
    rows = store.query(store.own(FIRST_RUNS.format(lo=lo, hi=hi, handler=handler)))
    ran = [int(start) - int(trigger) for trigger, start, _ in rows if start is not None]
    skipped = sum(1 for _, start, status in rows if start is None and status == "SKIPPED")
    return {**percentiles(ran), "skipped": skipped, "not_run": len(rows) - len(ran) - skipped}


def burst_case(kind: str, count: int) -> dict[str, Any]:
    with store_url(kind) as url:
        store = stores.open_store(url, create=True)
        lead_ms = 10_000 + count // 100
        trigger = int(time.time() * 1000) + lead_ms
        store.add_tasks(invoice_tasks(count, trigger))
        with cluster(url, 3, 5, {}, app=False), Progress(transient=True) as bar:
            job = bar.add_task(f"{kind}: {count:,} invoices", total=count)
            while (done := store.counts()["DONE"]) < count:
                bar.update(job, completed=done)
                time.sleep(0.5)
        (first, last), *_ = store.query(
            store.own(
                "SELECT min(s), max(s) FROM (SELECT min(e.start_ms) AS s FROM executions e "
                "GROUP BY e.task_id) AS firsts"
            )
        )
        store.close()
    return {"first_ms": int(first) - trigger, "last_ms": int(last) - trigger, "count": count}


def show(label: str, r: dict[str, Any], base: dict[str, float]) -> None:
    ratio = r["p99"] / max(1, base["p99"])
    print(
        f"{label}: {r['n']:,} fires · p50 {r['p50']:.0f} ms · p99 {r['p99']:.0f} ms · max "
        f"{r['max']:.0f} ms · skipped {r['skipped']} · not run {r['not_run']} · p99 "
        f"{ratio:.1f}× the baseline's"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=["a", "b", "c"], required=True)
    ap.add_argument("--store", choices=["sqlite", "postgresql"], default="sqlite")
    ap.add_argument("--minutes", type=float, default=None, help="a: 10, b: 5")
    ap.add_argument("--before-minutes", type=float, default=2.0)
    ap.add_argument("--count", type=int, default=1_000_000)
    args = ap.parse_args()
    base = baseline()
    print(
        f"baseline: sleep to each whole second, 20 fires · p50 {base['p50']:.0f} ms · p99 "
        f"{base['p99']:.0f} ms · max {base['max']:.0f} ms"
    )
    if args.case == "c":
        r = burst_case(args.store, args.count)
        print(
            f"{args.store} case c: {r['count']:,} invoices at one instant · first started "
            f"{r['first_ms']:,} ms late · last {r['last_ms']:,} ms late"
        )
        return
    minutes = args.minutes or (10.0 if args.case == "a" else 5.0)
    for wakeups, span in ((False, args.before_minutes), (True, minutes)):
        if span <= 0:
            continue
        r = schedules_case(args.store, args.case, span, wakeups)
        show(f"{args.store} case {args.case}, wake-ups {'on' if wakeups else 'off'}", r, base)


if __name__ == "__main__":
    main()
