"""The midnight run on the real engine: N invoices due at one instant, R replicas, W workers.

Real processes on one SQLite file: ``cronlab invoices seed`` (timed), then ``cronlab cluster``
(uncapped, idempotency on) until every invoice is DONE. Figures from the store: seed rate,
dispatch rate (trigger → last dispatch), execute rate (first → last execution), end-to-end
(trigger → last execution), and exactly-once checks. Baseline, measured in the same run on
the same machine: a plain single-process SQLite claim loop over the same number of rows
(``UPDATE … WHERE id IN (SELECT … LIMIT 10000)`` until none are left).

    .venv/bin/python bench/engine_midnight.py [--count 1000000] [--replicas 3] [--workers 5]
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cronlab.stores.sqlite import SqliteStore

LEAD_S = 4.0  # the trigger lies this far after the seed ends: the cluster starts meanwhile


def cronlab(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "cronlab", *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def seed(url: str, count: int) -> tuple[float, int]:
    t = time.perf_counter()
    est = max(2.0, count / 150_000)  # the trigger must fall after the seed and the start
    out = json.loads(
        cronlab(
            "invoices",
            "seed",
            "--store",
            url,
            "--count",
            str(count),
            "--at",
            f"+{est + LEAD_S:.1f}",
            "--json",
        )
    )
    return time.perf_counter() - t, int(out["trigger_ms"])


def run_cluster(url: str, path: Path, count: int, args: argparse.Namespace) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cronlab",
            "cluster",
            "--store",
            url,
            "--replicas",
            str(args.replicas),
            "--workers",
            str(args.workers),
            "--scan-batch",
            str(args.scan_batch),
            "--worker-batch",
            str(args.worker_batch),
        ],
        stderr=subprocess.DEVNULL,
    )
    store = SqliteStore(path, create=False)
    try:
        while store.counts()["DONE"] < count:
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        store.close()


def figures(path: Path, trigger_ms: int) -> dict[str, float]:
    store = SqliteStore(path, create=False)
    (last_dispatch,) = store.query(store.own("SELECT max(dispatched_ms) FROM tasks"))[0]
    first, last, n = store.query(
        store.own(
            "SELECT min(start_ms), max(end_ms), count(*) FROM executions "
            "WHERE outcome IN ('ok', 'noop')"
        )
    )[0]
    report = json.loads(cronlab("report", "--store", f"sqlite:///{path}", "--json"))
    return {
        "dispatch_s": (last_dispatch - trigger_ms) / 1000,
        "execute_s": (last - first) / 1000,
        "end_to_end_s": (last - trigger_ms) / 1000,
        "executed": n,
        "duplicates": report["duplicates"],
        "duplicate_invoices": report["duplicate_invoices"],
        "backlog_peak": report["backlog_peak"],
    }


def baseline(tmp: str, count: int) -> float:
    """Rows/s of a plain SQLite claim loop over ``count`` PENDING rows (one process)."""
    store = SqliteStore(Path(tmp) / "baseline.db")
    conn = store.sqlite.conn
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < ?) "
        "INSERT INTO cronlab_tasks (idempotency_key, task, trigger_ms) "
        "SELECT 'k' || x, 'invoice', 0 FROM n",
        (count,),
    )
    conn.execute("COMMIT")
    t, done = time.perf_counter(), 0
    while True:
        conn.execute("BEGIN IMMEDIATE")
        n = conn.execute(
            "UPDATE cronlab_tasks SET status = 'DONE' WHERE id IN (SELECT id FROM cronlab_tasks "
            "WHERE status = 'PENDING' AND trigger_ms <= 1 LIMIT 10000)"
        ).rowcount
        conn.execute("COMMIT")
        if not n:
            break
        done += n
    return done / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--workers", type=int, default=5)
    ap.add_argument("--scan-batch", type=int, default=10_000)
    ap.add_argument("--worker-batch", type=int, default=10_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "midnight.db"
        url = f"sqlite:///{path}"
        seed_s, trigger_ms = seed(url, args.count)
        run_cluster(url, path, args.count, args)
        f = figures(path, trigger_ms)
        base = baseline(tmp, args.count)
    rate = args.count / f["end_to_end_s"]
    print(
        f"midnight run: {args.count:,} invoices, {args.replicas} replicas, {args.workers} "
        f"workers, uncapped, idempotency on, one SQLite file"
    )
    print(f"  seed:       {seed_s:6.2f} s  ({args.count / seed_s:,.0f} tasks/s, CLI incl. start)")
    print(
        f"  dispatch:   {f['dispatch_s']:6.2f} s after the trigger "
        f"({args.count / f['dispatch_s']:,.0f} tasks/s)"
    )
    print(
        f"  execute:    {f['execute_s']:6.2f} s first→last ({args.count / f['execute_s']:,.0f}"
        f" tasks/s)"
    )
    print(
        f"  end to end: {f['end_to_end_s']:6.2f} s trigger→last execution ({rate:,.0f} tasks/s;"
        f" goal ≤ 20 s)"
    )
    print(
        f"  exactly once: executed {f['executed']:,}, duplicates {f['duplicates']}, duplicate "
        f"invoices {f['duplicate_invoices']}; backlog peak {f['backlog_peak']:,}"
    )
    print(
        f"  baseline plain SQLite claim loop: {base:,.0f} rows/s; engine end-to-end / baseline"
        f" = {rate / base:.2f}"
    )


if __name__ == "__main__":
    main()
