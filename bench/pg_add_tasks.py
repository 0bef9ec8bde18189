"""Adding tasks on PostgreSQL, a few at a time: the store's two ways, at several sizes.

``PostgresStore.add_tasks`` inserts up to ``FEW_TASKS`` rows with one ``INSERT … SELECT FROM
unnest(arrays)`` and more through COPY into a temporary table (four statements: create the
table if missing, COPY, ``INSERT … SELECT``, TRUNCATE). A ``defer``, a tick's occurrences and
a retry's follow-ups are a few rows each. For each size N, each way adds N fresh tasks per
call, each call a transaction of its own, on one fresh database, the ways interleaved call by
call; the figure is calls/s (median of the rounds). Baseline, in the same run on the same
server: the bare one-row autocommit ``INSERT … ON CONFLICT DO NOTHING`` loop into a table of
the same columns and unique key (psycopg, one connection) — what one row costs the server at
the least.

    .venv/bin/python bench/pg_add_tasks.py [--rounds 5] [--pg postgresql://…]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Callable

import psycopg

from cronlab.ports import NewTask
from cronlab.stores import postgres
from cronlab.stores.postgres import PostgresStore
from cronlab.testing import scratch_database

ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
SIZES = (1, 10, 100, 300, 1_000, 10_000)
ROWS_PER_ROUND = 2_000  # rows each way adds per size and round (at least one call)
KEYS = itertools.count()


def rows(n: int) -> list[NewTask]:
    return [NewTask(f"k{next(KEYS)}", "bill", 0, '{"customer": 1}') for _ in range(n)]


def timed(calls: int, act: Callable[[], object]) -> float:
    t = time.perf_counter()
    for _ in range(calls):
        act()
    return calls / (time.perf_counter() - t)


def bare_rate(url: str, calls: int) -> float:
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(
            "CREATE TABLE bare (idempotency_key TEXT UNIQUE, task TEXT, payload TEXT,"
            " trigger_ms BIGINT, schedule TEXT)"
        )
        sql = (
            "INSERT INTO bare VALUES (%s, 'bill', '{}', 0, NULL)"
            " ON CONFLICT (idempotency_key) DO NOTHING"
        )
        return timed(calls, lambda: c.execute(sql, (f"b{next(KEYS)}",)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pg", default=ADMIN, help="an admin URL; a scratch database is made")
    args = ap.parse_args()
    few = postgres.FEW_TASKS
    print(f"PostgresStore.add_tasks, N fresh tasks a call; calls/s, median of {args.rounds} rounds")
    with scratch_database(args.pg, "cronlab_bench") as url:
        store = PostgresStore(url)
        try:
            bare = bare_rate(url, 2_000)
            for n in SIZES:
                calls = max(1, ROWS_PER_ROUND // n)
                arrays, copy = [], []
                for _ in range(args.rounds):
                    postgres.FEW_TASKS = 10**9  # every call from arrays
                    arrays.append(timed(calls, lambda n=n: store.add_tasks(rows(n))))
                    postgres.FEW_TASKS = 0  # every call through COPY
                    copy.append(timed(calls, lambda n=n: store.add_tasks(rows(n))))
                a, b = statistics.median(arrays), statistics.median(copy)
                print(
                    f"N={n:>5,}: arrays {a:8,.0f} calls/s, COPY {b:8,.0f} calls/s, "
                    f"arrays/COPY {a / b:5.2f}  ({a * n:,.0f} vs {b * n:,.0f} tasks/s)"
                )
                if n == 1:
                    print(
                        f"         baseline: bare one-row autocommit INSERT {bare:,.0f}/s; "
                        f"arrays {a / bare:.2f}x, COPY {b / bare:.2f}x of it"
                    )
        finally:
            postgres.FEW_TASKS = few
            store.close()


if __name__ == "__main__":
    main()
