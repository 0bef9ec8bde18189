"""The SQL store, written once: tasks, fenced dispatch with the schedules' planning, the queue
of envelopes, the lease row, schedules, the process registry and the event log.

Every public write is ONE transaction of the dialect's. Worker batches: ``batch.py``;
migrations: ``migrate.py``; what a database does its own way: ``dialect.py``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from cronlab.core import lease as rules
from cronlab.core import occurrences
from cronlab.core.chunks import chunks
from cronlab.core.settlement import Delivery, Settlement
from cronlab.exceptions import ConfigError, ConflictError, FencedError, NotFoundError
from cronlab.ports import (
    KEY_TRIES,
    STATUSES,
    Batch,
    BatchTransaction,
    Channel,
    Event,
    Message,
    NewTask,
    ProcessInfo,
    RunQuery,
    RunRecord,
    Task,
    TaskInfo,
    Waiter,
)
from cronlab.stores import Fencing
from cronlab.stores.rows import Claimed, Envelope, StoredTask, by_column, claimed_in_order
from cronlab.stores.sql import batch, history, migrate, operations, placeholders, planning
from cronlab.stores.sql.dialect import Conn, Dialect, TaskRow, fetch, task_row
from cronlab.stores.sql.schedule_methods import ScheduleMethods

T = TypeVar("T")
START = (-(1 << 62), -(1 << 62))  # a (trigger_ms, id) before every row
PAGE = 16  # envelopes a claim looks at per query while it fills its limit
CHUNK = 50_000  # tasks per bulk insert
RECONCILE_AGE_MS = 10_000  # DISPATCHED this long with no message: the message was lost
RECONCILE_LIMIT = 1_000  # tasks a reconcile looks at
RECONCILE_MAX_QUEUED = 200_000  # messages waiting above which a reconcile waits its turn
# processes_beat's columns: ProcessInfo's fields
PROCESS = ("role", "index", "pid", "owner", "started_ms", "exited_ms", "heartbeat_ms", "place")


class SqlStore(ScheduleMethods):
    """``ports.Store`` + ``LeaseTable`` + ``QueueTable`` + ``ScheduleStore`` + ``TaskControl``
    on one database.

    ``fencing="lease"``: a dispatch must carry the epoch of the unexpired lease row in this
    store. ``"epoch"``: the lease lives elsewhere (etcd); a dispatch must carry an epoch no
    lower than the highest one seen. Both raise the stored ``max_epoch``.
    ``create=False`` refuses a database with no store; ``read_only`` also never migrates one
    (a store that needs a migration is refused, nothing written).
    """

    def __init__(
        self,
        dialect: Dialect,
        *,
        create: bool = True,
        read_only: bool = False,
        fencing: Fencing = "lease",
    ):
        self.db, self.queries, self.fencing = dialect, dialect.queries, fencing
        self._resume: tuple[int, int] | None = None  # (trigger_ms, id) the due scan resumes after
        try:
            migrate.migrate(dialect, create, read_only=read_only)
        except BaseException:
            dialect.close()
            raise

    def close(self) -> None:
        self.db.close()

    def missing(self) -> bool:
        """True when the database was deleted or replaced under this store (a SQLite file)."""
        return self.db.missing()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.db.describe()}>"

    def schema_versions(self) -> list[int]:
        """Applied migration numbers, ascending."""
        rows = self.query(self.own(f"SELECT version FROM {migrate.TABLE} ORDER BY version"))
        return [int(r[0]) for r in rows]

    # -- reads for reports, tests and apps --------------------------------------------------

    def own(self, sql: str) -> str:
        """``sql`` with cronlab's own tables, named bare (``tasks``, ``queue``), qualified to
        where this store keeps them beside the application's (``namespace``): how tests, the
        lab and the simulator read cronlab's tables. An application's SQL (``query``,
        ``write``, ``ctx.tx``) is never rewritten."""
        return self.db.space.sql(sql)

    def query(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        """Read-only SQL with bound parameters: ``?`` or ``:name`` on both stores, or the
        driver's own style (``placeholders``)."""
        if self.db.name == "postgresql":
            sql = placeholders.for_psycopg(sql, params)
        return self.db.read(lambda c: fetch(c.execute(sql, params)))

    def named(self, name: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """A named read query of the dialect (the report's, for instance)."""
        return self.query(self.queries[name], params or {})

    def write(self, fn: Callable[[batch.SqlTx], T]) -> T:
        """``fn`` in one write transaction, through a handler's ``Tx`` (apps' own tables)."""
        return self.db.transaction(lambda c: fn(batch.SqlTx(c, self)))

    def task(self, task_id: int) -> Task:
        """One task by id; ``NotFoundError`` when there is none."""
        return self._one_task("task_get", {"id": task_id}, f"id {task_id}")

    def task_by_key(self, key: str) -> Task:
        """One task by idempotency key; ``NotFoundError`` when there is none."""
        return self._one_task("task_by_key", {"key": key}, f"key {key!r}")

    def _one_task(self, query: str, args: Mapping[str, Any], named: str) -> Task:
        rows = self.named(query, args)
        if not rows:
            raise NotFoundError(f"no task with {named}")
        return StoredTask._make(rows[0]).value()

    def last_error(self, task_id: int) -> str | None:
        """The error a task's newest failed run left (or a skip's reason)."""
        rows = self.named("task_get", {"id": task_id})
        return StoredTask._make(rows[0]).last_error if rows else None

    # -- tasks ------------------------------------------------------------------------------

    def add_tasks(
        self,
        tasks: Iterable[NewTask],
        progress: Callable[[int], None] | None = None,
        *,
        conflicts: bool = False,
    ) -> int:
        """Insert PENDING tasks in ONE transaction, in chunks (never all in memory at once);
        ``progress(n)`` after each chunk. Returns how many went in (duplicate keys do not).
        ``conflicts``: a key already held by another task name or other arguments is a
        ``ConflictError``, and nothing is written (``Task.defer_many``, as ``Task.defer``)."""

        def add(c: Conn) -> int:
            inserted = 0
            for chunk in chunks(map(task_row, tasks), CHUNK):
                added = self.db.insert_tasks(c, chunk)
                if conflicts and added < len(chunk):
                    self._check_taken(c, chunk)
                inserted += added
                if progress:
                    progress(len(chunk))
            if inserted:
                self.db.notify(c, "due")
            return inserted

        return self.db.transaction(add)

    def add_task(self, new: NewTask) -> tuple[bool, Task]:
        """Insert one PENDING task unless its key is taken: (whether it went in, the task that
        holds the key now), read in the same transaction. On PostgreSQL the holder the insert
        ran into may be deleted (the retention) before the read: the key is free then, and the
        insert is tried again (``KEY_TRIES`` times; then ``ConflictError``, nothing written)."""
        row = task_row(new)

        def add(c: Conn) -> tuple[bool, Task]:
            for _ in range(KEY_TRIES):
                added = self.db.insert_tasks(c, [row]) > 0
                found = c.execute(self.queries["task_by_key"], {"key": new.idempotency_key})
                held = found.fetchone()
                if held is not None:
                    if added:
                        self.db.notify(c, "due")
                    return added, StoredTask._make(held).value()
            raise ConflictError(
                f"key {new.idempotency_key!r}: its task was deleted {KEY_TRIES} times while "
                "this insert ran; nothing changed"
            )

        return self.db.transaction(add)

    def _check_taken(self, c: Conn, chunk: Sequence[TaskRow]) -> None:
        """``ConflictError`` for the first row whose key a task of another name or with other
        arguments holds (the rows just inserted hold theirs with the same)."""
        wanted = {key: (handler, json.loads(payload)) for key, handler, payload, _, _ in chunk}
        found = c.execute(self.queries["tasks_with_keys"], {"keys": self.db.texts(wanted)})
        for key, handler, payload in found.fetchall():
            if wanted[key] != (handler, json.loads(payload)):
                raise ConflictError(
                    f"key {key!r} is taken by a task for {handler} with other arguments: "
                    "nothing changed"
                )

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
        now_ms = self.db.now(c, now_ms)
        self._fence(c, epoch, now_ms)
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
        self.enqueue(c, [(r.id, r.attempts) for r in rows], now_ms)
        return len(rows)

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
            now = self.db.now(c, now_ms)
            self._fence(c, epoch, now)
            lost = lost_ones(c, now)  # again, under the lock: a message may have come meanwhile
            if lost:
                self.db.enqueue(c, lost, now, 0)
                self.db.notify(c, "queued")
                touch = {"ids": self.db.ints(t[0] for t in lost), "now": now}
                c.execute(self.queries["reconcile_touch"], touch)
            return len(lost)

        return self.db.transaction(run)

    def _claim(self, c: Conn, args: dict[str, int], after: tuple[int, int]) -> list[Claimed]:
        """Claimed rows, oldest trigger first."""
        full = {**args, "after_ms": after[0], "after_id": after[1]}
        return claimed_in_order(c.execute(self.queries["claim_due"], full).fetchall())

    def fenced(self, c: Conn, epoch: int, now_ms: int) -> None:
        """In ``c``'s transaction: raise ``FencedError`` (and write nothing) unless ``epoch``
        still may write — the check every dispatch makes, for the leader's other duties."""
        self._fence(c, epoch, now_ms)

    def _fence(self, c: Conn, epoch: int, now_ms: int) -> None:
        (max_epoch,) = c.execute(self.queries["fence_lock"], {"kind": self.fencing}).fetchone()
        if self.fencing == "epoch":
            if epoch < max_epoch:
                raise FencedError(epoch, max_epoch)
        else:
            state = _lease_state(c.execute(self.queries["lease_read_locked"]).fetchone())
            if epoch < max_epoch or not rules.holds(state, epoch, now_ms):
                raise FencedError(epoch, state.epoch)
        c.execute(self.queries["fence_raise"], {"epoch": epoch, "kind": self.fencing})

    def enqueue(
        self, c: Conn, tasks: Sequence[tuple[int, int]], now_ms: int, visible_ms: int = 0
    ) -> None:
        """Enqueue ``(task id, attempts so far)``; a dispatch (visible at once) counts them."""
        if not tasks:
            return
        self.db.enqueue(c, tasks, now_ms, visible_ms)
        if not visible_ms:
            c.execute(self.queries["count_dispatched"], {"n": len(tasks)})
            self.db.notify(c, "queued")

    def plan_claimed(self, c: Conn, rows: list[Claimed], args: dict[str, int]) -> list[Claimed]:
        """Plan the claimed schedule occurrences in this transaction (``planning.plan``); the
        rows that run.

        Caught-up occurrences the plan inserts are already due: they are claimed (and planned)
        here too, up to the batch limit, so one fenced transaction judges them all at one now.
        """
        if not any(r.idempotency_key.startswith(occurrences.PLANNED) for r in rows):
            return rows  # the bulk path: nothing to plan, nothing built
        runs: list[Any] = []
        claimed = 0
        while rows:
            ran, caught_up = planning.plan(self, c, rows, args["now"])
            runs += ran
            claimed += len(rows)
            room = args["limit"] - claimed
            rows = self._claim(c, {**args, "limit": room}, START) if caught_up and room > 0 else []
        return runs

    def next_due_ms(self, after_ms: int) -> int | None:
        found = self.named("next_due", {"after": after_ms})[0][0]
        return None if found is None else int(found)

    def waiter(self, channel: Channel) -> Waiter | None:
        """A subscription to ``channel`` on this store's database (None: no wake-ups)."""
        return self.db.waiter(channel)

    def pending_due(self, now_ms: int) -> int:
        """PENDING tasks whose trigger time has come (``now_ms`` or earlier)."""
        return int(self.named("pending_due", {"now": now_ms})[0][0])

    def counts(self) -> dict[str, int]:
        found = dict(self.named("counts"))
        return {s: int(found.get(s, 0)) for s in STATUSES}

    # -- executions -------------------------------------------------------------------------

    @property
    def dialect(self) -> str:
        return self.db.name

    def batch_transaction(self, work: Batch, *, in_store: bool = True) -> BatchTransaction:
        """A worker batch's ONE transaction with its execution records, task updates and acks
        (``batch.transaction``)."""
        return batch.transaction(self, work, in_store)

    # -- lease row (LeaseTable) -------------------------------------------------------------

    def lease_cas(self, owner: str, now_ms: int, ttl_ms: int) -> rules.LeaseState | None:
        if ttl_ms <= 0:
            raise ConfigError(f"lease TTL must be > 0 ms, got {ttl_ms}")

        def cas(c: Conn) -> Any:
            args = {"owner": owner, "now": self.db.now(c, now_ms), "ttl": ttl_ms}
            return c.execute(self.queries["lease_cas"], args).fetchone()

        got = self.db.transaction(cas)
        return None if got is None else _lease_state(got)

    def lease_release(self, owner: str) -> None:
        self.db.transaction(lambda c: c.execute(self.queries["lease_release"], {"owner": owner}))

    def lease_read(self) -> rules.LeaseState:
        return _lease_state(self.named("lease_read")[0])

    # -- queue (QueueTable) -----------------------------------------------------------------

    def queue_claim(
        self, worker: str, limit: int, visibility_ms: int, now_ms: int
    ) -> list[Message]:
        """Whole envelopes in queue order while they fit ``limit``; the last one is split.
        Visibility is judged by the store's clock where it has one (a server's: a worker whose
        clock is behind would otherwise claim for less than ``visibility_ms``, and one ahead
        take what another still holds)."""

        def any_visible(c: Conn) -> bool:
            now = self.db.now(c, now_ms)
            return bool(c.execute(self.queries["queue_any_visible"], {"now": now}).fetchall())

        if not self.db.read(any_visible):
            return []  # an idle worker polls without taking the write lock

        def claim(c: Conn) -> list[Any]:
            now = self.db.now(c, now_ms)
            ids = self._pick_envelopes(c, limit, now)
            if not ids:
                return []
            args = {"until": now + visibility_ms, "worker": worker, "ids": self.db.ints(ids)}
            got = c.execute(self.queries["queue_claim"], args).fetchall()
            return sorted((env, self.db.ids(t), rec, att) for env, t, rec, att in got)

        return self.queue_messages(self.db.transaction(claim), self.queue_ack)

    def _pick_envelopes(self, c: Conn, limit: int, now_ms: int) -> list[int]:
        """Visible envelopes holding ``limit`` messages at most, the last one split to fit."""
        picked: list[int] = []
        total, after = 0, 0
        while total < limit:
            args = {"now": now_ms, "after": after, "page": PAGE}
            rows = c.execute(self.queries["queue_visible"], args).fetchall()
            for env, size in rows:
                if total + size > limit:  # take the head of it; the rest keeps its place
                    keep = {"id": env, "keep": limit - total}
                    (env,) = c.execute(self.queries["queue_split"], keep).fetchone()
                    c.execute(self.queries["queue_keep"], keep)
                picked.append(env)
                total += size
                if total >= limit:
                    break
            if len(rows) < PAGE:
                break
            after = rows[-1][0]
        return picked

    def queue_messages(
        self, envelopes: Sequence[Sequence[Any]], drop: Callable[[list[Message]], object]
    ) -> list[Message]:
        """Claimed ``(id, task ids, receives, attempt)`` envelopes → their messages (the
        tasks' columns never change, so they are read after the claim committed). A message
        whose task is gone — its finished row deleted by the retention, then delivered again
        (published twice, an ack lost) — has nothing left to run: it goes to ``drop`` (the
        queue's ack) instead."""
        if not envelopes:
            return []
        wanted = self.db.ints(sorted({t for e in envelopes for t in e[1]}))
        tasks = {r[0]: r for r in self.named("message_tasks", {"ids": wanted})}
        found = [
            Message(env, r[0], r[1], r[2], r[3], r[4], receives, attempt)
            for env, ids, receives, attempt in envelopes
            for r in map(tasks.get, ids)
            if r is not None
        ]
        if len(found) < sum(len(e[1]) for e in envelopes):
            drop(
                [
                    Message(env, t, "", "", "{}", 0, receives, attempt)
                    for env, ids, receives, attempt in envelopes
                    for t in ids
                    if t not in tasks
                ]
            )
        return found

    def outbox_take(
        self, limit: int, now_ms: int, publish: Callable[[list[Envelope]], None]
    ) -> int:
        """``publish`` up to ``limit`` visible envelopes, then delete them. The publish runs
        outside any transaction: a queue elsewhere that hangs (Redis down, retried for a
        minute) holds no write lock meanwhile. A crash between the two, or two relays at once,
        publish an envelope twice — a worker settles the second delivery as stale — and
        never lose one."""
        rows = self.named("outbox_visible", {"limit": limit, "now": now_ms})
        envelopes: list[Envelope] = sorted((env, self.db.ids(ids), att) for env, ids, att in rows)
        if not envelopes:
            return 0
        publish(envelopes)
        ids = {"ids": self.db.ints(e[0] for e in envelopes)}
        self.db.transaction(lambda c: c.execute(self.queries["outbox_delete"], ids))
        return sum(len(e[1]) for e in envelopes)

    def queue_ack(self, messages: Sequence[Message]) -> int:
        return self.db.transaction(lambda c: self.settle(c, messages, [], 0))

    def queue_release(self, messages: Sequence[Message]) -> int:
        deliveries = sorted({(m.id, m.receives) for m in messages})

        def release(c: Conn) -> int:
            return sum(
                int(c.execute(self.queries["queue_release"], {"id": i, "receives": r}).rowcount)
                for i, r in deliveries
            )

        return self.db.transaction(release)

    def queue_depth(self) -> int:
        return int(self.named("queue_depth")[0][0])

    def settle(
        self,
        c: Conn,
        acks: Sequence[Message],
        retries: Sequence[tuple[Message, int]],
        now_ms: int,
    ) -> int:
        """Take acked and retried messages out of their envelopes, if the delivery given is
        still the envelope's latest (a stale one settles nothing); a retry goes into an
        envelope of its own, visible at the time given. Returns the messages acked."""
        plan = Settlement.of(acks, retries)
        keys = list(plan.removed)
        whole = {
            "ids": self.db.ints(k[0] for k in keys),
            "receives": self.db.ints(k[1] for k in keys),
            "sizes": self.db.ints(plan.removed[k] for k in keys),
        }
        settled = {
            (r[0], r[1]) for r in c.execute(self.queries["queue_ack_whole"], whole).fetchall()
        }
        acked = 0
        for key in keys:
            if key not in settled and not self._shrink(c, key, plan):
                continue  # stale: the envelope was delivered again meanwhile
            acked += plan.acked[key]
            for m, at in plan.retried(key):
                self.enqueue(c, [(m.task_id, m.attempt)], now_ms, at)
        return acked

    def _shrink(self, c: Conn, key: Delivery, plan: Settlement) -> bool:
        """Take some messages out of a current envelope; False when it is not current."""
        row = c.execute(
            self.queries["queue_envelope"], {"id": key[0], "receives": key[1]}
        ).fetchone()
        if row is None:
            return False
        left = plan.left(key, self.db.ids(row[0]))
        if left:
            args = {"id": key[0], "ids": self.db.ints(left), "size": len(left)}
            c.execute(self.queries["queue_shrink"], args)
        else:
            c.execute(self.queries["queue_delete"], {"id": key[0]})
        return True

    # -- processes, events, samples ---------------------------------------------------------

    def register_process(self, info: ProcessInfo) -> None:
        args = dataclasses.asdict(info)

        def register(c: Conn) -> None:
            c.execute(self.queries["forget_exited_process"], args)
            c.execute(self.queries["register_process"], args)

        self.db.transaction(register)

    def process_exited(self, owner: str, now_ms: int) -> None:
        args = {"now": now_ms, "owner": owner}
        self.db.transaction(lambda c: c.execute(self.queries["process_exited"], args))

    def processes(self) -> list[ProcessInfo]:
        return [ProcessInfo(**by_column(PROCESS, r)) for r in self.named("processes_beat")]

    def heartbeat(self, info: ProcessInfo, now_ms: int) -> None:
        """``operations.heartbeat``: the process is alive (registering it if nobody did)."""
        operations.heartbeat(self, info, now_ms)

    # -- run history ------------------------------------------------------------------------

    def runs(self, query: RunQuery, now_ms: int) -> list[RunRecord]:
        """The run history ``query`` asks for, newest occurrence first (``history.runs``)."""
        return history.runs(self, query, now_ms)

    def prune_history(self, keep_ms: int, now_ms: int, limit: int, epoch: int) -> int:
        """Delete history older than ``keep_ms``, fenced, ``limit`` rows of each kind at most
        (``history.prune``); how many rows went."""
        return history.prune(self, keep_ms, now_ms, limit, epoch)

    def record_event(self, event: Event) -> None:
        args = {**dataclasses.asdict(event), "detail": json.dumps(dict(event.detail))}
        self.db.transaction(lambda c: c.execute(self.queries["record_event"], args))

    def events(self) -> list[Event]:
        return [
            Event(kind=r[0], at_ms=r[1], holder=r[2], epoch=r[3], pid=r[4], detail=json.loads(r[5]))
            for r in self.named("events")
        ]

    def record_sample(self, now_ms: int, depth: int) -> None:
        args = {"at": now_ms, "depth": depth}
        self.db.transaction(lambda c: c.execute(self.queries["record_sample"], args))

    # -- an operator's actions on one task (TaskControl) ------------------------------------

    def task_info(self, task_id: int) -> TaskInfo:
        return operations.task_info(self, task_id)

    def cancel_task(self, task_id: int, now_ms: int, *, by: str) -> TaskInfo:
        """``operations.cancel_task``: a task not run yet is SKIPPED, ``cancelled``."""
        return operations.cancel_task(self, task_id, now_ms, by)

    def retry_task(self, task_id: int, now_ms: int, *, by: str) -> TaskInfo:
        """``operations.retry_task``: a FAILED task runs once more."""
        return operations.retry_task(self, task_id, now_ms, by)


def _lease_state(r: Sequence[Any]) -> rules.LeaseState:
    return rules.LeaseState(holder=r[0], epoch=int(r[1]), expires_ms=int(r[2]))
