"""What the lab's anti-patterns read and write on the SQL store (``LabStore``), beside the
engine's own methods: the engine never calls these.

* ``read_due`` + ``enqueue_copies`` — ``--election off``: due rows read unclaimed, a copy
  enqueued by every replica (the ``copied`` list tells a replica what the others sent);
* ``dispatch_held`` — the two-phase dispatch (read, then write) of ``--fencing off`` and of a
  mid-dispatch pause: fenced it is refused once the lease moved; unfenced, a zombie's write;
* ``mark_missed`` — ``--timers in-memory``: what fell due before a new leader is lost;
* ``pause_request`` — ``cronlab chaos pause-leader --mid-dispatch``'s request.

Their named queries are the SQL store's (``stores/sql/*/queries*.sql``), as are the tables
(``copied``, ``tasks_copied``): one schema serves the engine and the lab that runs it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from cronlab.ports import StoredTask
from cronlab.stores.rows import claimed_in_order, task
from cronlab.stores.sql import SqlStore
from cronlab.stores.sql.dialect import Conn


class LabSqlStore:
    """``LabStore`` over an engine's SQL store (its dialect, queries and fence)."""

    def __init__(self, store: SqlStore) -> None:
        self.store, self.db, self.queries = store, store.db, store.queries

    def dispatch_held(
        self, held: Sequence[StoredTask], now_ms: int, epoch: int, *, fenced: bool
    ) -> int:
        """Write a batch read earlier (``read_due``): the two-phase dispatch. ``fenced``: in
        one transaction checked against the lease (``FencedError``, nothing written) and only
        the rows still PENDING; without (the ``--fencing off`` anti-pattern) every row,
        whatever happened to it meanwhile — a zombie's write."""

        def write(c: Conn) -> int:
            now = self.db.now(c, now_ms)
            if fenced:
                self.store.lease.fence(c, epoch, now)
            args = {"epoch": epoch, "now": now, "limit": len(held), "guard": int(fenced)}
            ids = self.db.ints(t.id for t in held)
            claimed = c.execute(self.queries["claim_held"], {**args, "ids": ids}).fetchall()
            rows = self.store.dispatch.plan_claimed(c, claimed_in_order(claimed), args)
            self.store.queue.enqueue(c, [(r.id, r.attempts) for r in rows], now)
            return len(rows)

        return self.db.transaction(write)

    def pause_request(self, owner: str, since_ms: int) -> tuple[int, float, int] | None:
        """The newest chaos request (``chaos pause-leader --mid-dispatch``) for ``owner`` made
        after ``since_ms``: (its instant, the seconds to stay paused, until when it holds)."""
        rows = self.store.named("pause_request", {"owner": owner, "since": since_ms})
        if not rows:
            return None
        detail = json.loads(rows[0][1])
        return int(rows[0][0]), float(detail.get("for_s", 0)), int(detail.get("until_ms", 0))

    def read_due(
        self, now_ms: int, limit: int, copied_since_ms: int | None = None
    ) -> Sequence[StoredTask]:
        """Due PENDING tasks, unclaimed; with ``copied_since_ms``, also those another replica
        copied since (each task once)."""

        def read(c: Conn) -> list[Any]:
            rows = c.execute(self.queries["read_due"], {"now": now_ms, "limit": limit}).fetchall()
            if copied_since_ms is not None:
                args = {"now": now_ms, "since": copied_since_ms}
                rows += c.execute(self.queries["read_copied"], args).fetchall()
            return list(rows)

        rows = {r[0]: r for r in self.db.read(read)}  # (copied between the two reads: once)
        return [task(r, "PENDING", None) for r in rows.values()]

    def enqueue_copies(self, tasks: Sequence[StoredTask], now_ms: int) -> int:
        """A message per task, the tasks marked DISPATCHED and copied: unfenced."""

        def copy(c: Conn) -> None:
            self.store.queue.enqueue(c, [(t.id, t.attempts) for t in tasks], now_ms)
            ids = self.db.ints(t.id for t in tasks)
            c.execute(self.queries["mark_copied"], {"ids": ids, "now": now_ms})

        self.db.transaction(copy)
        return len(tasks)

    def mark_missed(self, before_ms: int, now_ms: int) -> int:
        """PENDING tasks due before ``before_ms`` marked MISSED (in-memory timers)."""
        return self.db.transaction(
            lambda c: int(c.execute(self.queries["mark_missed"], {"before": before_ms}).rowcount)
        )
