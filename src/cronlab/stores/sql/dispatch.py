"""The leader's dispatch (``Store.dispatch_due``) and its reconcile: due PENDING tasks claimed
DISPATCHED, their schedules planned and their messages enqueued, in ONE fenced transaction."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from cronlab.core import occurrences
from cronlab.stores.rows import Claimed, claimed_in_order
from cronlab.stores.sql import plan_batch
from cronlab.stores.sql.dialect import Conn, Dialect
from cronlab.stores.sql.lease import SqlLease
from cronlab.stores.sql.part import Part
from cronlab.stores.sql.queue import SqlQueue

START = (-(1 << 62), -(1 << 62))  # a (trigger_ms, id) before every row
RECONCILE_AGE_MS = 10_000  # DISPATCHED this long with no message: the message was lost
RECONCILE_LIMIT = 1_000  # tasks a reconcile looks at
RECONCILE_MAX_QUEUED = 200_000  # messages waiting above which a reconcile waits its turn


class SqlDispatch(Part):
    """Fenced by ``lease``, into ``queue``. A full batch leaves the next scan a place to
    resume from (``Dialect.resume_scan``)."""

    def __init__(self, db: Dialect, lease: SqlLease, queue: SqlQueue) -> None:
        super().__init__(db)
        self.lease, self.queue = lease, queue
        self._resume: tuple[int, int] | None = None  # (trigger_ms, id) the due scan resumes after

    def dispatch_due(
        self, now_ms: int, limit: int, epoch: int, *, clock: Callable[[], int] | None = None
    ) -> int:
        """``clock``: the caller's, read once the transaction holds its locks (SQLite's writer
        lock may be held by a worker's batch for as long as its handlers run); None: ``now_ms``."""
        return self.db.transaction(
            lambda c: self._dispatch(c, clock() if clock else now_ms, limit, epoch)
        )

    def _dispatch(self, c: Conn, now_ms: int, limit: int, epoch: int) -> int:
        """Fence, claim, plan schedules, enqueue — all judged by the store's clock where it has
        one (a server's: a replica whose clock is ahead dispatches nothing early). A full
        batch leaves the next scan a place to resume from; a resumed scan that comes back
        short looks once more from the start."""
        now_ms = self.lease.fenced_now(c, epoch, now_ms)
        args = {"epoch": epoch, "now": now_ms, "limit": limit}
        if self._resume is None:
            claimed = self._claim(c, args, START)
        else:
            claimed = self._claim(c, args, self._resume)
            if len(claimed) < limit:
                claimed += self._claim(c, {**args, "limit": limit - len(claimed)}, START)
        full = self.db.resume_scan and len(claimed) >= limit
        self._resume = (claimed[-1].trigger_ms, claimed[-1].id) if full else None
        rows = self.plan_claimed(c, claimed, args)
        self.queue.enqueue(c, [(r.id, r.attempts) for r in rows], now_ms)
        return len(rows)

    def _claim(self, c: Conn, args: dict[str, int], after: tuple[int, int]) -> list[Claimed]:
        """Claimed rows, oldest trigger first."""
        full = {**args, "after_ms": after[0], "after_id": after[1]}
        return claimed_in_order(c.execute(self.queries["claim_due"], full).fetchall())

    def plan_claimed(self, c: Conn, rows: list[Claimed], args: dict[str, int]) -> list[Claimed]:
        """Plan the claimed schedule occurrences in this transaction (``plan_batch.plan``); the
        rows that run.

        Caught-up occurrences the plan inserts are already due: they are claimed (and planned)
        here too, up to the batch limit, so one fenced transaction judges them all at one now.
        """
        if not any(r.idempotency_key.startswith(occurrences.PLANNED) for r in rows):
            return rows  # the bulk path: nothing to plan, nothing built
        runs: list[Any] = []
        claimed = 0
        while rows:
            ran, caught_up = plan_batch.plan(self, c, rows, args["now"])
            runs += ran
            claimed += len(rows)
            room = args["limit"] - claimed
            rows = self._claim(c, {**args, "limit": room}, START) if caught_up and room > 0 else []
        return runs

    def reconcile(
        self,
        now_ms: int,
        epoch: int,
        older_than_ms: int = RECONCILE_AGE_MS,
        *,
        queued_elsewhere: Collection[int] = (),
    ) -> int:
        """Enqueue again, in one fenced transaction, the leader-dispatched tasks whose message
        is gone (a queue that lost it: a restore, a failover, a hand-deleted row), DISPATCHED
        for more than ``older_than_ms``; at most ``RECONCILE_LIMIT`` a call. A message always
        commits with its task's DISPATCHED (dispatch, retry) and leaves with its DONE (the ack),
        so a DISPATCHED task without one will never move otherwise. Skipped while more than
        ``RECONCILE_MAX_QUEUED`` messages wait (their ids are read into memory): a backlog that
        large is drained first. ``queued_elsewhere``: task ids a queue outside the store holds
        (the Redis stream this table is the outbox of). Returns how many were enqueued."""

        def lost_ones(c: Conn, now: int) -> list[tuple[int, int]]:
            if c.execute(self.queries["queue_depth"]).fetchone()[0] > RECONCILE_MAX_QUEUED:
                return []
            args = {"before": now - older_than_ms, "limit": RECONCILE_LIMIT}
            candidates = c.execute(self.queries["reconcile_candidates"], args).fetchall()
            if not candidates:
                return []
            queued = {
                i for (ids,) in c.execute(self.queries["queued_ids"]) for i in self.db.ids(ids)
            }
            queued.update(queued_elsewhere)
            return [(int(r[0]), int(r[1])) for r in candidates if r[0] not in queued]

        if not self.db.read(lambda c: lost_ones(c, self.db.now(c, now_ms))):
            return 0  # the common case, read without the write lock

        def run(c: Conn) -> int:
            now = self.lease.fenced_now(c, epoch, now_ms)
            lost = lost_ones(c, now)  # again, under the lock: a message may have come meanwhile
            if lost:
                self.db.enqueue(c, lost, now, 0)
                self.db.notify(c, "queued")
                touch = {"ids": self.db.ints(t[0] for t in lost), "now": now}
                c.execute(self.queries["reconcile_touch"], touch)
            return len(lost)

        return self.db.transaction(run)
