"""The midnight run's workload: one invoice row per (customer, period), as an app.

``app`` registers the ``invoice`` task (with a batch form that writes a whole worker batch
in one statement) and ``fail`` (for retry demos), and creates the ``invoices`` table when an
engine process starts on a store. Its unique key makes a duplicate execution a no-op;
``cronlab cluster --no-idempotency`` drops it, so duplicates become extra rows.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import UTC
from typing import Any

from cronlab.app import App
from cronlab.core.policy import from_ms
from cronlab.exceptions import ConfigError
from cronlab.handlers import BatchStep, Context, Item
from cronlab.ports import NewTask, Tx

SPEC = "cronlab.lab.invoices:app"

app = App(name="cronlab.lab.invoices")

# Per dialect: the table (created when an engine process starts on a store), the single-row
# insert (ON CONFLICT DO NOTHING: a second execution is a no-op while the unique key exists) and
# the batch form's one statement for a whole worker batch, returning the keys it inserted.
TABLE = {
    "sqlite": "CREATE TABLE IF NOT EXISTS invoices (id INTEGER PRIMARY KEY, "
    "customer TEXT NOT NULL, period TEXT NOT NULL, task_id INTEGER NOT NULL)",
    "postgresql": "CREATE TABLE IF NOT EXISTS invoices (id BIGSERIAL PRIMARY KEY, "
    "customer TEXT NOT NULL, period TEXT NOT NULL, task_id BIGINT NOT NULL)",
}
UNIQUE = "CREATE UNIQUE INDEX IF NOT EXISTS invoices_once ON invoices (customer, period)"
NOT_UNIQUE = "DROP INDEX IF EXISTS invoices_once"
INSERT = {
    "sqlite": "INSERT INTO invoices (customer, period, task_id) VALUES (?, ?, ?) "
    "ON CONFLICT DO NOTHING",
    "postgresql": "INSERT INTO invoices (customer, period, task_id) VALUES (%s, %s, %s) "
    "ON CONFLICT DO NOTHING",
}
INSERT_BATCH = {
    "sqlite": "INSERT INTO invoices (customer, period, task_id) "
    "SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(?) WHERE true "
    "ON CONFLICT DO NOTHING RETURNING task_id",
    "postgresql": "INSERT INTO invoices (customer, period, task_id) "
    "SELECT value ->> 0, value ->> 1, (value ->> 2)::bigint FROM json_array_elements(%s::json) "
    "ON CONFLICT DO NOTHING RETURNING task_id",
}
DUPLICATES = {
    "sqlite": "SELECT count(*) - count(DISTINCT customer || char(31) || period) FROM invoices",
    "postgresql": "SELECT count(*) - count(DISTINCT (customer, period)) FROM invoices",
}


@app.on_start
def install(store: Any) -> None:
    """Create the invoices table, with its unique key, where it is not there yet (a table
    that exists keeps its key as ``cluster --no-idempotency`` left it)."""
    if not store.query(_has_table(store.db.name)):
        set_idempotency(store, True)


def set_idempotency(store: Any, on: bool) -> None:
    """Create or drop the invoices' unique key (``cluster --no-idempotency`` drops it)."""
    dialect = store.db.name
    store.write(lambda tx: tx.execute(TABLE[dialect]))
    try:
        store.write(lambda tx: tx.execute(UNIQUE if on else NOT_UNIQUE))
    except Exception as exc:  # the database's own integrity error, whichever driver
        if "unique" not in str(exc).lower():
            raise
        raise ConfigError(f"cannot turn idempotency on: duplicate invoices exist ({exc})") from exc


def duplicates(store: Any) -> int:
    """Invoice rows beyond the first per (customer, period); 0 where the table is absent."""
    dialect = store.db.name
    if not store.query(_has_table(dialect)):
        return 0
    return int(store.query(DUPLICATES[dialect])[0][0])


def tasks(count: int, trigger_ms: int, work_ms: int = 0) -> Iterator[NewTask]:
    """One invoice per customer for the period named by the trigger instant."""
    period = from_ms(trigger_ms).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    work = f', "work_ms": {work_ms}' if work_ms else ""
    for i in range(1, count + 1):
        customer = f"cust-{i:07d}"
        yield NewTask(
            idempotency_key=f"invoice/{period}/{customer}",
            task="invoice",
            trigger_ms=trigger_ms,
            payload=f'{{"customer": "{customer}", "period": "{period}"{work}}}',
        )


@app.task(name="invoice")
def invoice(ctx: Context, customer: str, period: str, work_ms: int = 0) -> bool:
    """Write one invoice row; False when (customer, period) already has one.

    ``work_ms`` simulates the billing call's latency (the lab's slow worker).
    """
    if work_ms:
        time.sleep(int(work_ms) / 1000)
    return ctx.tx.execute(INSERT[ctx.tx.dialect], (str(customer), str(period), ctx.task_id)) > 0


def prepare_invoices(items: Sequence[Item], dialect: str | None) -> BatchStep:
    """``invoice_batch`` with the rows and the statement's parameter built before the store
    takes its write lock (one JSON array, which both dialects unpack)."""
    work_ms = sum(int(p.get("work_ms", 0)) for _, p in items if "work_ms" in p)
    rows = [(str(p["customer"]), str(p["period"]), ctx.task_id) for ctx, p in items]
    params = (json.dumps(rows),)

    def step(tx: Tx) -> list[bool]:
        if work_ms:
            time.sleep(work_ms / 1000)
        returned = tx.rows(INSERT_BATCH[tx.dialect], params)
        if len(returned) == len(rows):
            return [True] * len(rows)  # every row went in
        inserted = Counter(task_id for (task_id,) in returned)
        out = []
        for *_, task_id in rows:
            out.append(inserted[task_id] > 0)
            inserted[task_id] -= 1
        return out

    return step


@app.registry.batch_handler("invoice", prepare=prepare_invoices)
def invoice_batch(items: Sequence[Item], tx: Tx) -> list[bool]:
    """The batch form of ``invoice``: one INSERT for all items; an item is applied when the
    statement returned its task id — once per returned row, first item first (a task can
    come twice in one batch: copies made by ``--election off``)."""
    return prepare_invoices(items, tx.dialect)(tx)


@app.task(name="fail")
def fail(ctx: Context, until: int = 1 << 30, message: str = "failing on purpose") -> bool:
    """Raise until attempt ``until`` (default: always) — for retry demos and tests."""
    if ctx.attempt < int(until):
        raise RuntimeError(f"{message} (attempt {ctx.attempt})")
    return True


def _has_table(dialect: str) -> str:
    if dialect == "sqlite":
        return "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'invoices'"
    return "SELECT to_regclass('invoices') WHERE to_regclass('invoices') IS NOT NULL"
