"""O(due): a 10,000-row due scan costs the same with 0 or 10,000,000 future PENDING rows.

Two SQLite stores hold the same 10,000 due PENDING rows; the second also holds FUTURE rows
due in the far future (built in SQL with one INSERT … SELECT from a recursive CTE). The figure
is the median time of the leader's claim (``claim_due``, in a transaction rolled back after
each run; the two stores' runs interleaved) and the ratio big / empty (goal ≤ 1.3).

    .venv/bin/python bench/engine_scan.py [--future 10000000] [--due 10000] [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from cronlab.stores.sqlite import QUERIES as Q
from cronlab.stores.sqlite import SqliteStore

NOW = 1_800_000_000_000
FUTURE_MS = NOW + 365 * 86_400_000

FILL = """
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < :count)
INSERT INTO cronlab_tasks (idempotency_key, task, payload, trigger_ms)
SELECT :prefix || x, 'invoice', '{}', :at + x FROM n
"""


def fill(store: SqliteStore, count: int, prefix: str, at: int) -> None:
    conn = store.sqlite.conn  # bench-only: bulk SQL without the per-row Python path
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(FILL, {"count": count, "prefix": prefix, "at": at})
    conn.execute("COMMIT")


def build(path: Path, due: int, future: int) -> SqliteStore:
    store = SqliteStore(path)
    fill(store, due, "due-", NOW - due - 1)
    if future:
        fill(store, future, "future-", FUTURE_MS)
    store.lease_cas("bench", NOW, 10**9)
    return store


def claim_once_ms(store: SqliteStore, due: int) -> float:
    """Milliseconds of one claim of every due row (rolled back)."""
    conn = store.sqlite.conn
    conn.execute("BEGIN IMMEDIATE")
    t = time.perf_counter()
    got = conn.execute(Q["claim_due"], {"epoch": 1, "now": NOW, "limit": due}).fetchall()
    took = (time.perf_counter() - t) * 1000
    conn.execute("ROLLBACK")
    assert len(got) == due, f"claimed {len(got)} of {due}"
    return took


def claim_ms(stores: list[SqliteStore], due: int, runs: int) -> list[float]:
    """Median claim time per store, the stores' runs interleaved so that a machine that
    speeds up or slows down meanwhile weighs on both alike."""
    times: list[list[float]] = [[] for _ in stores]
    for _ in range(runs):
        for store, out in zip(stores, times, strict=True):
            out.append(claim_once_ms(store, due))
    return [statistics.median(t) for t in times]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--future", type=int, default=10_000_000)
    ap.add_argument("--due", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        empty = build(Path(tmp) / "empty.db", args.due, 0)
        big = build(Path(tmp) / "big.db", args.due, args.future)
        print(f"built {args.future:,} future rows in {time.perf_counter() - t:.1f} s")
        base, loaded = claim_ms([empty, big], args.due, args.runs)
    ratio = loaded / base
    print(f"due scan+claim of {args.due:,} rows, median of {args.runs}:")
    print(f"  0 future rows:            {base:8.2f} ms (baseline)")
    print(f"  {args.future:,} future rows: {loaded:8.2f} ms")
    print(f"  ratio: {ratio:.2f} (goal <= 1.3) -> {'OK' if ratio <= 1.3 else 'OVER'}")


if __name__ == "__main__":
    main()
