"""Why PostgreSQL lists PENDING tasks in a table of their own (migration 007).

Two layouts of the same 300,000 tasks, in two fresh databases on the same server, in the same
run: the baseline keeps ``status`` in the due index's predicate (migrations 001–006), so a
dispatch and a run are non-HOT updates; the other lists pending tasks in ``pending`` and gives
``tasks`` fillfactor 40 (migration 007), so both are HOT. Each layout: dispatch every task in
claims of 10,000 (the engine's statements), then mark them DONE in batches of 10,000. Prints
µs per task for both steps, the ratio, and the HOT share the server counted.

    .venv/bin/python bench/pg_hot_updates.py [--count 300000] [--pg postgresql://…]
"""

from __future__ import annotations

import argparse
import time

import psycopg

from cronlab.testing import scratch_database

ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
BATCH = 10_000
TASKS = """CREATE TABLE tasks (id BIGSERIAL PRIMARY KEY, idempotency_key TEXT NOT NULL UNIQUE,
  handler TEXT NOT NULL, payload TEXT NOT NULL DEFAULT '{}', trigger_ms BIGINT NOT NULL,
  status TEXT NOT NULL DEFAULT 'PENDING', attempts INT NOT NULL DEFAULT 0, epoch BIGINT,
  dispatched_ms BIGINT, last_error TEXT, schedule TEXT)"""
FILL = """INSERT INTO tasks (idempotency_key, handler, payload, trigger_ms)
SELECT 'invoice/p/cust-' || lpad(x::text, 7, '0'), 'invoice',
  '{"customer": "cust-' || lpad(x::text, 7, '0') || '", "period": "p"}', 1000
FROM generate_series(1, %(n)s) x"""
LAYOUTS = {
    "status in the due index (baseline)": (
        [TASKS, "CREATE INDEX due ON tasks (trigger_ms, id) WHERE status = 'PENDING'", FILL],
        """UPDATE tasks t SET status = 'DISPATCHED', epoch = 1, dispatched_ms = 2000 FROM (
             SELECT id FROM tasks WHERE status = 'PENDING' AND trigger_ms <= 2000
             ORDER BY trigger_ms, id LIMIT %(limit)s FOR UPDATE SKIP LOCKED) d
           WHERE t.id = d.id RETURNING t.id""",
    ),
    "pending table, fillfactor 40 (HOT)": (
        [
            TASKS + " WITH (fillfactor = 40)",
            "CREATE TABLE pending (trigger_ms BIGINT, task_id BIGINT, "
            "PRIMARY KEY (trigger_ms, task_id))",
            FILL,
            "INSERT INTO pending SELECT trigger_ms, id FROM tasks",
        ],
        """WITH due AS (DELETE FROM pending WHERE (trigger_ms, task_id) IN (
             SELECT trigger_ms, task_id FROM pending WHERE trigger_ms <= 2000
             ORDER BY trigger_ms, task_id LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
             RETURNING task_id)
           UPDATE tasks t SET status = 'DISPATCHED', epoch = 1, dispatched_ms = 2000
           WHERE t.id = ANY(ARRAY(SELECT task_id FROM due)) RETURNING t.id""",
    ),
}
DONE = "UPDATE tasks SET status = 'DONE', attempts = attempts + 1 WHERE id = ANY(%s)"
HOT = "SELECT n_tup_hot_upd, n_tup_upd FROM pg_stat_user_tables WHERE relname = 'tasks'"


def measure(admin: str, setup: list[str], dispatch: str, n: int) -> tuple[float, float, float]:
    """µs per task to dispatch and to mark DONE, and the share of HOT updates."""
    with scratch_database(admin, "cronlab_hot") as url, psycopg.connect(url, autocommit=True) as c:
        for sql in setup:
            c.execute(sql, {"n": n})
        c.execute("VACUUM ANALYZE")
        ids: list[int] = []
        t = time.perf_counter()
        while rows := c.execute(dispatch, {"limit": BATCH}).fetchall():
            ids += [r[0] for r in rows]
        t1 = time.perf_counter()
        for i in range(0, len(ids), BATCH):
            c.execute(DONE, (ids[i : i + BATCH],))
        t2 = time.perf_counter()
        assert len(ids) == n, f"dispatched {len(ids)} of {n}"
        c.execute("SELECT pg_stat_force_next_flush()")
        hot, updates = c.execute(HOT).fetchone() or (0, 0)
        return (t1 - t) / n * 1e6, (t2 - t1) / n * 1e6, hot / max(1, updates)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=300_000)
    ap.add_argument("--pg", default=ADMIN, help="an admin URL; a database is made per layout")
    args = ap.parse_args()
    got = {name: measure(args.pg, setup, sql, args.count) for name, (setup, sql) in LAYOUTS.items()}
    print(f"{args.count:,} tasks, claims and DONE updates of {BATCH:,}:")
    for name, (d, e, hot) in got.items():
        print(f"  {name:38s} dispatch {d:5.1f} µs/task · DONE {e:5.1f} µs/task · HOT {hot:.0%}")
    (bd, be, _), (hd, he, _) = got.values()
    print(f"  ratio baseline / HOT: dispatch {bd / hd:.2f}× · DONE {be / he:.2f}×")


if __name__ == "__main__":
    main()
