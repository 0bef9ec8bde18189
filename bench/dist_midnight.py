"""The midnight run on PostgreSQL: N invoices due at one instant, 3 scheduler replicas and 5
workers as real processes (``cronlab cluster``), once with the store's own queue and once with
Redis Streams as the queue. Prints seed, dispatch and execute rates and the end-to-end time
(trigger → last invoice written), and the ratio to a baseline measured in the same run: a
plain ``UPDATE … FOR UPDATE SKIP LOCKED`` claim loop over the same rows on the same server.

    .venv/bin/python bench/dist_midnight.py [--count 1000000] [--pg postgresql://…]
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
import uuid

import psycopg

from cronlab.lab import report
from cronlab.lab.invoices import tasks as invoice_tasks
from cronlab.queues.redis import connect, parse_url, stream_keys
from cronlab.stores.postgres import PostgresStore
from cronlab.testing import scratch_database

ADMIN = "postgresql://postgres@127.0.0.1:5432/test"


def seed(url: str, count: int, lead_s: float) -> tuple[PostgresStore, int, float]:
    store = PostgresStore(url)
    trigger = store.server_ms() + int(lead_s * 1000)
    started = time.perf_counter()
    store.add_tasks(invoice_tasks(count, trigger))
    return store, trigger, time.perf_counter() - started


def run(url: str, count: int, queue: str | None) -> dict[str, float]:
    store, _, seed_s = seed(url, count, lead_s=8 + count / 150_000)
    flags = ["--queue", queue] if queue else []
    cmd = [sys.executable, "-m", "cronlab", "cluster", "--store", url, *flags]
    cmd += ["--replicas", "3", "--workers", "5", "--restart-after", "never"]
    proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    try:
        while store.counts()["DONE"] < count:
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    r = report.measure(store, store.server_ms())
    (first_d, last_d), *_ = store.query(
        store.own("SELECT min(dispatched_ms), max(dispatched_ms) FROM tasks WHERE status = 'DONE'")
    )
    assert r.tasks["DONE"] == count and r.duplicate_invoices == 0, r
    store.close()
    return {
        "seed_per_s": count / seed_s,
        "dispatch_per_s": count / max(0.001, (last_d - first_d) / 1000),
        "end_to_end_s": r.drain_time_s,
        "tasks_per_s": count / max(0.001, r.drain_time_s),
        "duplicates": r.duplicates,
    }


def baseline(url: str, count: int) -> float:
    """Rows/s of a bare claim loop (claim 10,000 PENDING rows per statement, mark them)."""
    store, _, _ = seed(url, count, lead_s=-1)
    store.close()
    sql = (
        "UPDATE cronlab.tasks SET status = 'DONE' WHERE id IN (SELECT id FROM cronlab.tasks"
        " WHERE status = "
        "'PENDING' ORDER BY trigger_ms LIMIT 10000 FOR UPDATE SKIP LOCKED)"
    )
    with psycopg.connect(url, autocommit=True) as c:
        started = time.perf_counter()
        while c.execute(sql).rowcount:
            pass
        return count / (time.perf_counter() - started)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--pg", default=ADMIN, help="an admin URL; a database is made per run")
    ap.add_argument("--redis", default="redis://127.0.0.1:6379")
    args = ap.parse_args()
    with scratch_database(args.pg, "cronlab_bench") as url:
        base = baseline(url, args.count)
    print(f"baseline: bare SKIP LOCKED claim loop {base:,.0f} rows/s")
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    for name, queue in (("store queue", None), ("redis queue", f"{args.redis}?prefix={prefix}")):
        with scratch_database(args.pg, "cronlab_bench") as url:
            got = run(url, args.count, queue)
        print(
            f"{name}: {args.count:,} invoices · seed {got['seed_per_s']:,.0f}/s · dispatch "
            f"{got['dispatch_per_s']:,.0f}/s · end to end {got['end_to_end_s']:.1f} s = "
            f"{got['tasks_per_s']:,.0f} tasks/s ({got['tasks_per_s'] / base:.2f}× baseline, "
            f"goal 20,000/s) · duplicate executions {got['duplicates']:.0f}"
        )
    connect(parse_url(f"{args.redis}?prefix={prefix}")).delete(*stream_keys(prefix))


if __name__ == "__main__":
    main()
