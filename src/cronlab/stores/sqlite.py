"""The SQLite store: tasks, lease row, fence, queue, executions, processes and events in one file.

One connection per process, WAL journal, ``busy_timeout`` so writers queue instead of failing,
``BEGIN IMMEDIATE`` for every write so a transaction takes the write lock before it reads (the
fencing check and the claim can then not interleave with another writer). SQL is data:
numbered migrations and named queries in ``stores/sql/``.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from importlib import resources
from itertools import islice
from pathlib import Path
from typing import Any, Literal

from cronlab.core import lease as rules
from cronlab.core import policy
from cronlab.core.policy import Schedule
from cronlab.exceptions import (
    BackendUnavailable,
    ConfigError,
    ConflictError,
    FencedError,
    NotFoundError,
)
from cronlab.ports import (
    STATUSES,
    Event,
    Message,
    NewTask,
    ProcessInfo,
    Retry,
    Run,
    ScheduleInfo,
    Task,
    Tx,
)
from cronlab.stores import schedules
from cronlab.stores.rows import ENVELOPE, Delivery, Envelope, Settlement, task

Fencing = Literal["lease", "epoch"]
BUSY_TIMEOUT_MS = 60_000
HAS_SCHEMA = "SELECT 1 FROM sqlite_master WHERE name = 'schema_version'"
CHUNK = 50_000


def _sql_files() -> dict[str, str]:
    folder = resources.files("cronlab.stores") / "sql"
    return {f.name: f.read_text() for f in folder.iterdir() if f.name.endswith(".sql")}


def parse_queries(text: str) -> dict[str, str]:
    """``-- name: X`` blocks → {X: sql}; comment lines inside a block are dropped."""
    queries: dict[str, str] = {}
    name = ""
    for line in text.splitlines():
        if line.startswith("-- name:"):
            name = line.removeprefix("-- name:").strip()
            queries[name] = ""
        elif name and not line.startswith("--"):
            queries[name] += line + "\n"
    return {k: v.strip() for k, v in queries.items()}


def split_statements(script: str) -> list[str]:
    """A migration script → its statements (SQLite decides where one is complete)."""
    statements, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            statements.append(buf.strip())
            buf = ""
    return [s for s in statements if s.strip(" ;\n")]


FILES = _sql_files()
Q = parse_queries(FILES["queries.sql"])
MIGRATIONS = sorted((int(n.split("_")[0]), n) for n in FILES if n[:3].isdigit())


class SqliteTx:
    """The open transaction handed to a handler (``ports.Tx``)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> int:
        return self._conn.execute(sql, params).rowcount

    def add_task(self, task: NewTask) -> int:
        return self._conn.execute(Q["add_task"], _task_row(task)).rowcount

    # A handler's batch form (``handlers.RowsTx``) picks its SQL by this and reads RETURNING.
    dialect = "sqlite"

    def rows(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return self._conn.execute(sql, params).fetchall()


class SqliteStore:
    """``ports.Store`` + ``LeaseTable`` + ``QueueTable`` on one SQLite file.

    ``fencing="lease"``: a dispatch must carry the epoch of the unexpired lease row in this
    file. ``"epoch"``: the lease lives elsewhere (etcd …); a dispatch must carry an epoch no
    lower than the highest one seen. Both raise the stored ``max_epoch``.
    """

    def __init__(self, path: str | Path, *, create: bool = True, fencing: Fencing = "lease"):
        self.path = Path(path)
        self.fencing = fencing
        self._conn = _connect(self.path, create)
        self._writer = _WriterLock(self.path)
        self._migrate()

    # -- plumbing ---------------------------------------------------------------------------

    def close(self) -> None:
        self._conn.close()
        self._writer.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """A write transaction holding the write lock from its first statement."""
        with self._writer:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise BackendUnavailable(f"sqlite {self.path}: {exc}") from exc
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _migrate(self) -> None:
        if not self._conn.execute(HAS_SCHEMA).fetchone():
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT)"
            )
        applied = set(self.schema_versions())
        for version, name in MIGRATIONS:
            if version in applied:
                continue  # a reader (status, report, chaos) never waits for the write lock
            with self._tx() as c:
                done = c.execute("SELECT 1 FROM schema_version WHERE version = ?", (version,))
                if done.fetchone():
                    continue
                for statement in split_statements(FILES[name]):
                    c.execute(statement)
                c.execute("INSERT INTO schema_version VALUES (?, ?)", (version, name))

    def schema_versions(self) -> list[int]:
        """Applied migration numbers, ascending."""
        rows = self._conn.execute("SELECT version FROM schema_version ORDER BY version")
        return [r[0] for r in rows]

    def query(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        """Read-only SQL for reports and tests (bound parameters)."""
        return self._conn.execute(sql, params).fetchall()

    # -- tasks ------------------------------------------------------------------------------

    def add_tasks(
        self, tasks: Iterable[NewTask], progress: Callable[[int], None] | None = None
    ) -> int:
        """Insert in chunks inside ONE transaction; ``progress(n)`` after each chunk."""
        inserted = 0
        it = iter(tasks)
        with self._tx() as c:
            while chunk := [_task_row(t) for t in islice(it, CHUNK)]:
                before = c.total_changes
                c.executemany(Q["add_task"], chunk)
                inserted += c.total_changes - before
                if progress:
                    progress(len(chunk))
        return inserted

    def dispatch_due(self, now_ms: int, limit: int, epoch: int) -> int:
        with self._tx() as c:
            self._fence(c, epoch, now_ms)
            args = {"epoch": epoch, "now": now_ms, "limit": limit}
            rows = c.execute(Q["claim_due"], args).fetchall()
            rows = _plan_schedules(c, rows, args)
            self._enqueue(c, [(r[0], r[2]) for r in rows], now_ms)
        return len(rows)

    def _fence(self, c: sqlite3.Connection, epoch: int, now_ms: int) -> None:
        (max_epoch,) = c.execute(Q["fence_read"]).fetchone()
        state = self._lease_state(c)
        ok = epoch >= max_epoch and (self.fencing == "epoch" or rules.holds(state, epoch, now_ms))
        if not ok:
            raise FencedError(epoch, state.epoch if self.fencing == "lease" else max_epoch)
        c.execute(Q["fence_raise"], {"epoch": epoch})

    def _enqueue(
        self, c: sqlite3.Connection, tasks: Sequence[tuple[int, int]], now_ms: int
    ) -> None:
        """Enqueue ``(task id, attempts so far)`` pairs as messages, in envelopes."""
        c.executemany(Q["enqueue"], envelopes(tasks, now_ms))
        c.execute(Q["count_dispatched"], {"n": len(tasks)})

    def read_due(
        self, now_ms: int, limit: int, copied_since_ms: int | None = None
    ) -> Sequence[Task]:
        rows = self._conn.execute(Q["read_due"], {"now": now_ms, "limit": limit}).fetchall()
        if copied_since_ms is not None:
            args = {"now": now_ms, "since": copied_since_ms}
            rows += self._conn.execute(Q["read_copied"], args).fetchall()
        return [task(r, "PENDING", None) for r in rows]

    def enqueue_copies(self, tasks: Sequence[Task], now_ms: int) -> int:
        rows = [(t.id, t.attempts) for t in tasks]
        with self._tx() as c:
            self._enqueue(c, rows, now_ms)
            c.executemany(Q["mark_dispatched"], [(now_ms, t.id) for t in tasks])
        return len(tasks)

    def mark_missed(self, before_ms: int, now_ms: int) -> int:
        with self._tx() as c:
            return c.execute(Q["mark_missed"], {"before": before_ms}).rowcount

    def counts(self) -> dict[str, int]:
        found = dict(self._conn.execute(Q["counts"]).fetchall())
        return {s: int(found.get(s, 0)) for s in STATUSES}

    # -- executions -------------------------------------------------------------------------

    def execute(
        self,
        worker: str,
        messages: Sequence[Message],
        run: Run,
        retry: Retry,
        now: Callable[[], int],
        *,
        relayed: bool = False,
    ) -> dict[str, int]:
        """Run the batch in ONE transaction with its execution records, task updates and acks.

        Fast path: every run in one transaction. If a run raises, that transaction is rolled
        back and the batch runs again with a savepoint per message, so one failing handler
        does not undo the others' effects. A worker killed mid-batch commits nothing; its
        deliveries come back after the visibility timeout with ``receives`` one higher, which
        is how ``report`` counts the abandoned runs. ``relayed``: see ``redis.OutboxStore``.
        """
        start = now()
        batched = prepare_batch(run, messages, SqliteTx.dialect)
        steps = [] if batched else _prepare(run, messages)
        try:
            with self._tx() as c:
                b = _Batch(c, worker, start, retry, now, relayed)
                if batched:
                    return b.run_batch(messages, batched)
                return b.run_all(steps, isolate=False)
        except _HandlerFailed:
            steps = steps or _prepare(run, messages)
            with self._tx() as c:
                return _Batch(c, worker, start, retry, now, relayed).run_all(steps, isolate=True)

    # -- lease row (LeaseTable) -------------------------------------------------------------

    def lease_cas(self, owner: str, now_ms: int, ttl_ms: int) -> rules.LeaseState | None:
        if ttl_ms <= 0:
            raise ConfigError(f"lease TTL must be > 0 ms, got {ttl_ms}")
        with self._tx() as c:
            row = c.execute(Q["lease_cas"], {"owner": owner, "now": now_ms, "ttl": ttl_ms})
            got = row.fetchone()
        return (
            None
            if got is None
            else rules.LeaseState(holder=got[0], epoch=got[1], expires_ms=got[2])
        )

    def lease_release(self, owner: str) -> None:
        with self._tx() as c:
            c.execute(Q["lease_release"], {"owner": owner})

    def lease_read(self) -> rules.LeaseState:
        return self._lease_state(self._conn)

    @staticmethod
    def _lease_state(c: sqlite3.Connection) -> rules.LeaseState:
        holder, epoch, expires = c.execute(Q["lease_read"]).fetchone()
        return rules.LeaseState(holder=holder, epoch=epoch, expires_ms=expires)

    # -- queue (QueueTable) -----------------------------------------------------------------

    def queue_claim(
        self, worker: str, limit: int, visibility_ms: int, now_ms: int
    ) -> list[Message]:
        """Whole envelopes in queue order while they fit ``limit``; the last one is split."""
        if not self._conn.execute(Q["queue_any_visible"], {"now": now_ms}).fetchone():
            return []  # an idle worker polls without taking the write lock
        with self._tx() as c:
            ids = _pick_envelopes(c, limit, now_ms)
            args = {"until": now_ms + visibility_ms, "worker": worker, "ids": json.dumps(ids)}
            claimed = [
                (env, json.loads(task_ids), receives, attempt)
                for env, task_ids, receives, attempt in c.execute(Q["queue_claim"], args)
            ]
        return self.queue_messages(claimed)

    def queue_messages(self, envelopes: Sequence[Sequence[Any]]) -> list[Message]:
        """Claimed ``(id, task ids, receives, attempt)`` envelopes → their messages (the
        tasks' columns never change, so they are read after the claim committed)."""
        wanted = json.dumps(sorted({t for e in envelopes for t in e[1]}))
        tasks = {r[0]: r for r in self._conn.execute(Q["message_tasks"], {"ids": wanted})}
        return [
            Message(env, r[0], r[1], r[2], r[3], r[4], receives, attempt)
            for env, ids, receives, attempt in envelopes
            for r in map(tasks.__getitem__, ids)
        ]

    def outbox_take(
        self, limit: int, now_ms: int, publish: Callable[[list[Envelope]], None]
    ) -> int:
        """Delete up to ``limit`` visible envelopes and ``publish`` them BEFORE the delete
        commits (see the PostgreSQL store's)."""
        with self._tx() as c:
            rows = c.execute(Q["outbox_take"], {"limit": limit, "now": now_ms}).fetchall()
            envelopes = [(env, json.loads(ids), attempt) for env, ids, attempt in sorted(rows)]
            if envelopes:
                publish(envelopes)
        return sum(len(e[1]) for e in envelopes)

    def queue_ack(self, messages: Sequence[Message]) -> int:
        with self._tx() as c:
            return _settle(c, messages, [], 0)

    def queue_depth(self) -> int:
        return int(self._conn.execute(Q["queue_depth"]).fetchone()[0])

    # -- processes, events, samples ---------------------------------------------------------

    def register_process(self, info: ProcessInfo) -> None:
        with self._tx() as c:
            c.execute(
                Q["register_process"],
                (info.role, info.index, info.pid, info.owner, info.started_ms),
            )

    def process_exited(self, role: str, index: int, pid: int, now_ms: int) -> None:
        with self._tx() as c:
            c.execute(Q["process_exited"], (now_ms, role, index, pid))

    def processes(self) -> list[ProcessInfo]:
        rows = self._conn.execute(Q["processes"]).fetchall()
        return [
            ProcessInfo(
                role=r[0], index=r[1], pid=r[2], owner=r[3], started_ms=r[4], exited_ms=r[5]
            )
            for r in rows
        ]

    def record_event(self, event: Event) -> None:
        row = (
            event.kind,
            event.at_ms,
            event.holder,
            event.epoch,
            event.pid,
            json.dumps(dict(event.detail)),
        )
        with self._tx() as c:
            c.execute(Q["record_event"], row)

    def events(self) -> list[Event]:
        rows = self._conn.execute(Q["events"]).fetchall()
        return [
            Event(kind=r[0], at_ms=r[1], holder=r[2], epoch=r[3], pid=r[4], detail=json.loads(r[5]))
            for r in rows
        ]

    def record_sample(self, now_ms: int, depth: int) -> None:
        with self._tx() as c:
            c.execute(Q["record_sample"], (now_ms, depth))

    # -- schedules (ports.ScheduleStore) ----------------------------------------------------

    def put_schedule(self, schedule: Schedule, now_ms: int, *, replace: bool) -> bool:
        stored = self._schedule(self._conn, schedule.name)
        if stored is not None and replace and schedules.same_definition(stored.schedule, schedule):
            return False  # read outside the lock: redeploying takes no write lock
        with self._tx() as c:
            stored = self._schedule(c, schedule.name)
            if stored is not None and not replace:
                raise ConflictError(f"a schedule named {schedule.name!r} already exists")
            if stored is not None and schedules.same_definition(stored.schedule, schedule):
                return False
            c.execute(Q["schedule_upsert"], schedules.to_row(schedule))
            paused = stored.schedule.paused if stored is not None else schedule.paused
            _rematerialise(c, schedule, now_ms, paused)
        return True

    def get_schedule(self, name: str) -> ScheduleInfo:
        info = self._schedule(self._conn, name)
        if info is None:
            raise NotFoundError(f"no schedule named {name!r}")
        outcome = self._conn.execute(Q["schedule_last_outcome"], {"name": name}).fetchone()
        return dataclasses.replace(info, last_outcome=outcome[0] if outcome else None)

    def list_schedules(self) -> list[ScheduleInfo]:
        names = [r[0] for r in self._conn.execute(Q["schedule_names"])]
        return [self.get_schedule(n) for n in names]

    def pause_schedule(self, name: str) -> bool:
        with self._tx() as c:
            self._must_exist(c, name)
            changed = c.execute(Q["schedule_set_paused"], {"name": name, "paused": 1}).rowcount
            c.execute(Q["schedule_drop_pending"], {"name": name})
            c.execute(Q["schedule_set_next"], {"name": name, "next": None})
        return changed > 0

    def resume_schedule(self, name: str, now_ms: int) -> bool:
        with self._tx() as c:
            info = self._must_exist(c, name)
            changed = c.execute(Q["schedule_set_paused"], {"name": name, "paused": 0}).rowcount
            if changed:
                _rematerialise(c, info.schedule, now_ms, False)
        return changed > 0

    def remove_schedule(self, name: str) -> None:
        with self._tx() as c:
            self._must_exist(c, name)
            c.execute(Q["schedule_drop_pending"], {"name": name})
            c.execute(Q["schedule_delete"], {"name": name})

    def trigger_schedule(self, name: str, now_ms: int) -> str:
        with self._tx() as c:
            task = schedules.triggered(self._must_exist(c, name).schedule, now_ms)
            c.execute(Q["add_task"], _task_row(task))
        return task.idempotency_key

    def _must_exist(self, c: sqlite3.Connection, name: str) -> ScheduleInfo:
        info = self._schedule(c, name)
        if info is None:
            raise NotFoundError(f"no schedule named {name!r}")
        return info

    @staticmethod
    def _schedule(c: sqlite3.Connection, name: str) -> ScheduleInfo | None:
        row = c.execute(Q["schedule_get"], {"name": name}).fetchone()
        if row is None:
            return None
        return ScheduleInfo(
            schedule=schedules.from_row(row[:9]),
            next_fire_ms=row[9],
            last_fire_ms=row[10],
            last_reason=row[11],
        )

    def set_idempotency(self, on: bool) -> None:
        """Create or drop the invoices' unique key (``--no-idempotency`` drops it)."""
        sql = (
            "CREATE UNIQUE INDEX IF NOT EXISTS invoices_once ON invoices (customer, period)"
            if on
            else "DROP INDEX IF EXISTS invoices_once"
        )
        try:
            with self._tx() as c:
                c.execute(sql)
        except sqlite3.IntegrityError as exc:
            raise ConfigError(
                f"cannot turn idempotency on: duplicate invoices exist ({exc})"
            ) from exc


def _rematerialise(c: sqlite3.Connection, s: Schedule, now_ms: int, paused: bool) -> None:
    """Replace the schedule's waiting occurrence by ``next_fire(now)`` (none while paused)."""
    c.execute(Q["schedule_drop_pending"], {"name": s.name})
    next_ms = None if paused else policy.next_fire(s, now_ms)
    if next_ms is not None:
        c.execute(Q["add_task"], _task_row(schedules.occurrence(s, next_ms)))
    c.execute(Q["schedule_set_next"], {"name": s.name, "next": next_ms})


def _plan_schedules(c: sqlite3.Connection, rows: list[Any], args: dict[str, int]) -> list[Any]:
    """Plan the claimed schedule occurrences in this transaction; the rows that run.

    Caught-up occurrences the plan inserts are already due: they are claimed (and planned)
    here too, up to the batch limit, so one fenced transaction judges them all at one ``now``.
    """
    if not any(r[1].startswith(schedules.OCCURRENCE_PREFIX) for r in rows):
        return rows  # the bulk path (invoices): nothing to plan, nothing built
    runs: list[Any] = []
    claimed = 0
    view = _SqliteRows(c)
    while rows:
        skipped, due_added = schedules.plan_claimed(view, [(r[0], r[1]) for r in rows], args["now"])
        runs += [r for r in rows if r[0] not in skipped]
        claimed += len(rows)
        room = args["limit"] - claimed
        more = due_added and room > 0
        rows = c.execute(Q["claim_due"], {**args, "limit": room}).fetchall() if more else []
    return runs


class _SqliteRows:
    """``schedules.Rows`` over the open dispatch transaction."""

    def __init__(self, c: sqlite3.Connection) -> None:
        self.c = c

    def schedule_info(self, name: str) -> ScheduleInfo | None:
        return SqliteStore._schedule(self.c, name)

    def running_before(self, name: str, fire_ms: int) -> bool:
        args = {"name": name, "fire": fire_ms}
        return self.c.execute(Q["schedule_running_before"], args).fetchone() is not None

    def add_task(self, task: NewTask) -> int:
        return self.c.execute(Q["add_task"], _task_row(task)).rowcount

    def skip(self, task_id: int, reason: str) -> None:
        self.c.execute(Q["task_skip"], {"id": task_id, "reason": reason})

    def fired(self, name: str, fire_ms: int, next_fire_ms: int | None, reason: str | None) -> None:
        args = {"name": name, "fire": fire_ms, "next": next_fire_ms, "reason": reason}
        self.c.execute(Q["schedule_fired"], args)


Step = Callable[[Tx], bool]
BatchStep = Callable[[Tx], list[bool]]


def _prepare(run: Run, messages: Sequence[Message]) -> list[tuple[Message, Step]]:
    """Work a run can do before the write lock (``handlers.Runner.prepare``), if it offers it."""
    prepare: Callable[[Message], Step] | None = getattr(run, "prepare", None)
    if prepare is not None:
        return [(m, prepare(m)) for m in messages]
    return [(m, partial(run, m)) for m in messages]


def prepare_batch(run: Run, messages: Sequence[Message], dialect: str) -> BatchStep | None:
    """The whole batch as one step (``handlers.Runner.prepare_batch``), if the run offers it:
    handlers with a batch form then write every message's effect in one statement."""
    prepare: Callable[[Sequence[Message], str], BatchStep] | None = getattr(
        run, "prepare_batch", None
    )
    return prepare(messages, dialect) if prepare is not None else None


class _HandlerFailed(Exception):
    """A run raised on the fast path: redo the batch with a savepoint per message."""


class _Batch:
    """One worker batch inside an open transaction: runs, execution ends, task updates, acks."""

    def __init__(
        self,
        c: sqlite3.Connection,
        worker: str,
        start_ms: int,
        retry: Retry,
        now: Callable[[], int],
        relayed: bool,
    ) -> None:
        self.c, self.worker, self.start_ms, self.retry, self.now = c, worker, start_ms, retry, now
        self.relayed = relayed
        self.ends: list[tuple[object, ...]] = []
        self.done: list[tuple[int]] = []
        self.acks: list[Message] = []
        self.retries: list[tuple[Message, int]] = []
        self.counts = {"ok": 0, "noop": 0, "error": 0, "failed": 0}

    def run_all(self, steps: Sequence[tuple[Message, Step]], *, isolate: bool) -> dict[str, int]:
        tx = SqliteTx(self.c)
        for m, step in steps:
            if not isolate:
                self._run_fast(m, step, tx)
            elif (error := self._run_isolated(m, step, tx)) is not None:
                self._failed(m, error)
        self._flush()
        return self.counts

    def run_batch(self, messages: Sequence[Message], batched: BatchStep) -> dict[str, int]:
        """Fast path with one step for all messages; it raising means redo per message.

        The batch commits as one, so its runs share one end instant; the rows are built in
        one pass, not per message, to keep the write lock short."""
        try:
            applied = batched(SqliteTx(self.c))
        except Exception as exc:
            raise _HandlerFailed from exc
        end, w, start = self.now(), self.worker, self.start_ms
        outcomes = ["ok" if a else "noop" for a in applied]
        self.ends = [
            (m.task_id, m.id, m.receives, w, m.attempt, start, end, o, None)
            for m, o in zip(messages, outcomes, strict=True)
        ]
        self.done = [(m.task_id,) for m in messages]
        self.acks = list(messages)
        self.counts["ok"] = outcomes.count("ok")
        self.counts["noop"] = len(outcomes) - self.counts["ok"]
        self._flush()
        return self.counts

    def _run_fast(self, m: Message, step: Step, tx: SqliteTx) -> None:
        try:
            applied = step(tx)
        except Exception as exc:
            raise _HandlerFailed from exc
        self._succeeded(m, applied)

    def _run_isolated(self, m: Message, step: Step, tx: SqliteTx) -> Exception | None:
        self.c.execute("SAVEPOINT message")
        try:
            applied = step(tx)
        except Exception as exc:
            self.c.execute("ROLLBACK TO message")
            self.c.execute("RELEASE message")
            return exc
        self.c.execute("RELEASE message")
        self._succeeded(m, applied)
        return None

    def _succeeded(self, m: Message, applied: bool) -> None:
        outcome = "ok" if applied else "noop"
        self.counts[outcome] += 1
        self._end(m, outcome, None, self.now())
        self.done.append((m.task_id,))
        self.acks.append(m)

    def _failed(self, m: Message, exc: BaseException) -> None:
        error = f"{type(exc).__name__}: {exc}"
        now = self.now()
        if m.attempt < self.retry.max_attempts:
            self.counts["error"] += 1
            self._end(m, "error", error, now)
            self.c.execute(Q["task_error"], (error, m.task_id))
            self.retries.append((m, now + self.retry.delay_ms(m.attempt)))
        else:
            self.counts["failed"] += 1
            self._end(m, "failed", error, now)
            self.c.execute(Q["task_failed"], (error, m.task_id))
            self.acks.append(m)

    def _end(self, m: Message, outcome: str, error: str | None, end_ms: int) -> None:
        self.ends.append(
            (
                m.task_id,
                m.id,
                m.receives,
                self.worker,
                m.attempt,
                self.start_ms,
                end_ms,
                outcome,
                error,
            )
        )

    def _flush(self) -> None:
        self.c.executemany(Q["execution_insert"], self.ends)
        self.c.executemany(Q["task_done"], self.done)
        if self.relayed:  # settled on the stream; a retry waits in the outbox for the relay
            for m, at in self.retries:
                _enqueue_retry(self.c, m, at, self.now())
        else:
            _settle(self.c, self.acks, self.retries, self.now())


def envelopes(tasks: Sequence[tuple[int, int]], now_ms: int) -> list[Any]:
    """``(task id, attempts so far)`` pairs → ``enqueue`` rows, ``ENVELOPE`` tasks at most each,
    one attempt number per envelope."""
    by_attempt: dict[int, list[int]] = {}
    for task_id, attempts in tasks:
        by_attempt.setdefault(attempts + 1, []).append(task_id)
    return [
        (json.dumps(ids[i : i + ENVELOPE]), len(ids[i : i + ENVELOPE]), attempt, now_ms, 0)
        for attempt, ids in by_attempt.items()
        for i in range(0, len(ids), ENVELOPE)
    ]


def _pick_envelopes(c: sqlite3.Connection, limit: int, now_ms: int) -> list[int]:
    """Visible envelopes holding ``limit`` messages at most, the last one split to fit."""
    picked, total = [], 0
    split: tuple[int, int] | None = None
    for env, size in c.execute(Q["queue_visible"], {"now": now_ms}):
        picked.append(env)
        if total + size > limit:
            split = (env, limit - total)
        total += size
        if total >= limit:
            break
    if split is not None:
        env, keep = split
        (text,) = c.execute(Q["queue_task_ids"], (env,)).fetchone()
        ids = json.loads(text)
        rest = {"id": env, "rest": json.dumps(ids[keep:]), "size": len(ids) - keep}
        c.execute(Q["queue_split"], rest)
        c.execute(Q["queue_shrink"], (json.dumps(ids[:keep]), keep, env))
    return picked


def _settle(
    c: sqlite3.Connection,
    acks: Sequence[Message],
    retries: Sequence[tuple[Message, int]],
    now_ms: int,
) -> int:
    """Take acked and retried messages out of their envelopes, if the delivery given is still
    the envelope's latest (a stale one settles nothing); a retry goes into an envelope of its
    own, visible at the time given. Returns the messages acked."""
    plan = Settlement.of(acks, retries)
    acked = 0
    for key, n in plan.removed.items():
        whole = c.execute(Q["queue_ack_whole"], (*key, n)).rowcount
        if not whole and not _shrink(c, key, plan):
            continue  # stale: the envelope was delivered again meanwhile
        acked += plan.acked[key]
        for m, at in plan.retried(key):
            _enqueue_retry(c, m, at, now_ms)
    return acked


def _shrink(c: sqlite3.Connection, key: Delivery, plan: Settlement) -> bool:
    """Take some messages out of a current envelope; False when it is not current."""
    row = c.execute(Q["queue_envelope"], key).fetchone()
    if row is None:
        return False
    left = plan.left(key, json.loads(row[0]))
    if left:
        c.execute(Q["queue_shrink"], (json.dumps(left), len(left), key[0]))
    else:
        c.execute(Q["queue_delete"], (key[0],))
    return True


def _enqueue_retry(c: sqlite3.Connection, m: Message, at_ms: int, now_ms: int) -> None:
    """The message's next attempt, in an envelope of its own, visible at ``at_ms``."""
    c.execute(Q["enqueue"], (json.dumps([m.task_id]), 1, m.attempt + 1, now_ms, at_ms))


class _WriterLock:
    """Writers queue on an OS file lock (``PATH.writer``) before ``BEGIN IMMEDIATE``.

    SQLite's busy handler polls: a writer that finds the lock taken sleeps 1, 2, 5 … up to
    100 ms between tries, so with several processes the lock often sits free while they all
    sleep. ``flock`` blocks in the kernel and wakes a waiter the moment the holder lets go.
    The kernel drops the lock of a process that dies, so a SIGKILLed writer never wedges the
    store. SQLite's own lock stays the guarantee; this only orders the writers.
    """

    def __init__(self, db: Path) -> None:
        self._fd = os.open(f"{db}.writer", os.O_RDWR | os.O_CREAT, 0o600)

    def __enter__(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        os.close(self._fd)


def _connect(path: Path, create: bool) -> sqlite3.Connection:
    if not create and not path.is_file():
        raise ConfigError(f"no store at {str(path)!r} (file does not exist)")
    uri = f"file:{path}?mode={'rwc' if create else 'rw'}"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if not create and not conn.execute(HAS_SCHEMA).fetchone():
            conn.close()
            raise ConfigError(f"{str(path)!r} is not a cronlab store (no schema_version)")
        conn.execute("PRAGMA journal_mode = WAL")  # a write: only on a store of ours
        conn.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.Error as exc:
        raise ConfigError(f"cannot open store {str(path)!r}: {exc}") from exc
    return conn


def _task_row(t: NewTask) -> tuple[str, str, str, int, str | None]:
    return (t.idempotency_key, t.handler, t.payload, t.trigger_ms, t.schedule)
