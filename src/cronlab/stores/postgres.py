"""The PostgreSQL store (``--store postgresql://user@host:port/db``): the SQLite store's schema
and semantics on a server, for replicas and workers on several machines.

* psycopg 3 with a connection pool; every write is one transaction, retried with backoff when
  the connection drops (a server restart), ``BackendUnavailable`` after ``retry_s``.
* Claims use ``FOR UPDATE SKIP LOCKED`` in large batches; claim, mark and enqueue are one
  statement. A dispatch first locks the fence row, so two leaders' dispatches serialise.
* ``time_source="server"`` (default): lease expiry is judged by the server's clock, never by a
  replica's, so clock skew between hosts cannot elect two leaders. ``"caller"`` takes the
  time the caller passes (the contract tests drive a fake clock that way).
* ``fencing="lease"``: a dispatch must carry the epoch of the unexpired lease row here;
  ``"epoch"``: the lease lives elsewhere (etcd) and a dispatch must carry an epoch no lower
  than the highest one this store has seen.

SQL is data: numbered migrations and named queries in ``stores/sql/postgres/``.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import resources
from itertools import islice
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

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
)
from cronlab.stores import schedules, sqlite
from cronlab.stores.rows import ENVELOPE, Delivery, Envelope, Settlement, task

Fencing = Literal["lease", "epoch"]
TimeSource = Literal["server", "caller"]
T = TypeVar("T")
CHUNK = 50_000
SCHEMES = ("postgresql", "postgres")
START = (-(1 << 62), -(1 << 62))  # a (trigger_ms, id) before every row


def _sql_files() -> dict[str, str]:
    folder = resources.files("cronlab.stores") / "sql" / "postgres"
    return {f.name: f.read_text() for f in folder.iterdir() if f.name.endswith(".sql")}


FILES = _sql_files()
Q = sqlite.parse_queries(FILES["queries.sql"])
MIGRATIONS = sorted((int(n.split("_")[0]), n) for n in FILES if n[:3].isdigit())
# The engine's reports pass the SQLite text of a named query; run our dialect's instead.
DIALECT = {text: Q[name] for name, text in sqlite.Q.items() if name in Q}


def placeholders(sql: str) -> str:
    """Handler SQL written with ``?`` (qmark, as for SQLite) → psycopg's ``%s``."""
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresTx:
    """The open transaction handed to a handler (``ports.Tx``)."""

    def __init__(self, cur: psycopg.Cursor[Any]) -> None:
        self._cur = cur

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> int:
        self._cur.execute(placeholders(sql) if "?" in sql else sql, params)
        return self._cur.rowcount

    def add_task(self, task: NewTask) -> int:
        self._cur.execute(Q["add_task"], _task_row(task))
        return self._cur.rowcount

    # A handler's batch form (``handlers.RowsTx``) picks its SQL by this and reads RETURNING.
    dialect = "postgresql"

    def rows(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        self._cur.execute(placeholders(sql) if "?" in sql else sql, params)
        return self._cur.fetchall()


class PostgresStore:
    """``ports.Store`` + ``LeaseTable`` + ``QueueTable`` on one PostgreSQL database."""

    def __init__(
        self,
        url: str,
        *,
        create: bool = True,
        fencing: Fencing = "lease",
        time_source: TimeSource = "server",
        pool_size: int = 2,
        connect_timeout_s: float = 5.0,
        retry_s: float = 60.0,
    ) -> None:
        self.url, self.fencing, self.time_source, self.retry_s = url, fencing, time_source, retry_s
        self._resume: tuple[int, int] | None = None  # (trigger_ms, id) the due scan resumes after
        self._pool = _open_pool(url, pool_size, connect_timeout_s)
        if not create and not self._run(_has_schema):
            self.close()
            raise ConfigError(f"no cronlab store in {_safe(url)} (nothing was written)")
        self._run(self._migrate)

    # -- plumbing ---------------------------------------------------------------------------

    def close(self) -> None:
        self._pool.close()

    def _run(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``fn`` in one transaction; a dropped connection is retried with backoff."""
        deadline, delay = time.monotonic() + self.retry_s, 0.1
        while True:
            try:
                with self._pool.connection() as conn, conn.transaction():
                    return fn(conn)
            except psycopg.OperationalError as exc:
                if time.monotonic() + delay > deadline:
                    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                    raise BackendUnavailable(f"postgresql {_safe(self.url)}: {reason}") from exc
                time.sleep(delay)
                delay = min(2.0, delay * 2)

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(Q["migrate_lock"])  # replicas starting together migrate one at a time
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT)"
        )
        done = {r[0] for r in conn.execute("SELECT version FROM schema_version")}
        for version, name in MIGRATIONS:
            if version not in done:
                conn.execute(FILES[name])
                conn.execute("INSERT INTO schema_version VALUES (%s, %s)", (version, name))

    def schema_versions(self) -> list[int]:
        """Applied migration numbers, ascending."""
        return [r[0] for r in self.query("SELECT version FROM schema_version ORDER BY version")]

    def query(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        """Read-only SQL for reports and tests; the SQLite text of a named query runs ours."""
        text = DIALECT.get(sql) or (placeholders(sql) if "?" in sql else sql)
        return self._run(lambda c: _rows(c.execute(text, params)))

    def _now(self, conn: psycopg.Connection[Any], caller_ms: int) -> int:
        if self.time_source == "caller":
            return caller_ms
        row = conn.execute(Q["server_ms"]).fetchone()
        assert row is not None
        return int(row[0])

    # -- tasks ------------------------------------------------------------------------------

    def add_tasks(
        self, tasks: Iterable[NewTask], progress: Callable[[int], None] | None = None
    ) -> int:
        """COPY in chunks and insert, all in ONE transaction; ``progress(n)`` after each."""
        rows = list(map(_task_row, tasks))
        return self._run(lambda c: _copy_tasks(c, rows, progress))

    def dispatch_due(self, now_ms: int, limit: int, epoch: int) -> int:
        return self._run(lambda c: self._dispatch(c, now_ms, limit, epoch))

    def _dispatch(self, c: psycopg.Connection[Any], now_ms: int, limit: int, epoch: int) -> int:
        """A full batch leaves the next scan a place to resume from. A resumed scan that comes
        back short looks once more from the beginning, for rows added behind the place."""
        self._fence(c, epoch, now_ms)
        args = {"epoch": epoch, "now": now_ms, "limit": limit}
        first = {**args, "after_ms": START[0], "after_id": START[1]}
        if self._resume is None:
            claimed = _claim_due(c, first)
        else:
            resumed = {**args, "after_ms": self._resume[0], "after_id": self._resume[1]}
            claimed = _claim_due(c, resumed)
            if len(claimed) < limit:
                claimed += _claim_due(c, {**first, "limit": limit - len(claimed)})
        self._resume = (claimed[-1][3], claimed[-1][0]) if len(claimed) >= limit else None
        rows = _plan_schedules(c, claimed, first)
        _enqueue(c, [(r[0], r[2]) for r in rows], now_ms)
        return len(rows)

    def _fence(self, c: psycopg.Connection[Any], epoch: int, now_ms: int) -> None:
        (max_epoch,) = _one(c, Q["fence_lock"])
        if self.fencing == "epoch":
            if epoch < max_epoch:
                raise FencedError(epoch, max_epoch)
        else:
            state = _lease_state(_one(c, Q["lease_read_locked"]))
            if epoch < max_epoch or not rules.holds(state, epoch, self._now(c, now_ms)):
                raise FencedError(epoch, state.epoch)
        c.execute(Q["fence_raise"], {"epoch": epoch})

    def read_due(
        self, now_ms: int, limit: int, copied_since_ms: int | None = None
    ) -> Sequence[Task]:
        rows = self.query(Q["read_due"], {"now": now_ms, "limit": limit})
        if copied_since_ms is not None:
            rows += self.query(Q["read_copied"], {"now": now_ms, "since": copied_since_ms})
        return [task(r, "PENDING", None) for r in rows]

    def enqueue_copies(self, tasks: Sequence[Task], now_ms: int) -> int:
        pairs = [(t.id, t.attempts) for t in tasks]

        def copy(c: psycopg.Connection[Any]) -> None:
            _enqueue(c, pairs, now_ms)
            c.execute(Q["mark_copied"], {"ids": ints(t.id for t in tasks), "now": now_ms})

        self._run(copy)
        return len(tasks)

    def mark_missed(self, before_ms: int, now_ms: int) -> int:
        return self._run(lambda c: c.execute(Q["mark_missed"], {"before": before_ms}).rowcount)

    def counts(self) -> dict[str, int]:
        found = dict(self.query(Q["counts"]))
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
        back and the batch runs again with a savepoint per message. A worker killed mid-batch
        commits nothing; its deliveries come back with ``receives`` one higher. ``relayed``:
        see ``redis.OutboxStore``.
        """
        start = now()

        def batch(isolate: bool) -> Callable[[psycopg.Connection[Any]], dict[str, int]]:
            return lambda c: _Batch(c, worker, start, retry, now, relayed).run_all(
                messages, run, isolate
            )

        batched = sqlite.prepare_batch(run, messages, PostgresTx.dialect)
        try:
            if batched is not None:
                return self._run(
                    lambda c: _Batch(c, worker, start, retry, now, relayed).run_batch(
                        messages, batched
                    )
                )
            return self._run(batch(False))
        except _HandlerFailed:
            return self._run(batch(True))

    # -- lease row (LeaseTable) -------------------------------------------------------------

    def lease_cas(self, owner: str, now_ms: int, ttl_ms: int) -> rules.LeaseState | None:
        if ttl_ms <= 0:
            raise ConfigError(f"lease TTL must be > 0 ms, got {ttl_ms}")

        def cas(c: psycopg.Connection[Any]) -> Any:
            args = {"owner": owner, "now": self._now(c, now_ms), "ttl": ttl_ms}
            return c.execute(Q["lease_cas"], args).fetchone()

        got = self._run(cas)
        return None if got is None else _lease_state(got)

    def lease_release(self, owner: str) -> None:
        self._run(lambda c: c.execute(Q["lease_release"], {"owner": owner}))

    def lease_read(self) -> rules.LeaseState:
        return _lease_state(self.query(Q["lease_read"])[0])

    def server_ms(self) -> int:
        """The server's clock, epoch milliseconds (what lease expiry is judged by)."""
        return int(self.query(Q["server_ms"])[0][0])

    # -- queue (QueueTable) -----------------------------------------------------------------

    def queue_claim(
        self, worker: str, limit: int, visibility_ms: int, now_ms: int
    ) -> list[Message]:
        """Whole envelopes in queue order while they fit ``limit``; the last one is split."""

        def claim(c: psycopg.Connection[Any]) -> list[Any]:
            ids = _pick_envelopes(c, limit, now_ms)
            args = {"until": now_ms + visibility_ms, "worker": worker, "ids": ints(ids)}
            return sorted(c.execute(Q["queue_claim"], args).fetchall()) if ids else []

        return self.queue_messages(self._run(claim))

    def queue_messages(self, envelopes: Sequence[Sequence[Any]]) -> list[Message]:
        """Claimed ``(id, task ids, receives, attempt)`` envelopes → their messages (the
        tasks' columns never change, so they are read after the claim committed)."""
        if not envelopes:
            return []
        wanted = sorted({t for e in envelopes for t in e[1]})
        tasks = {r[0]: r for r in self.query(Q["message_tasks"], {"ids": ints(wanted)})}
        return [
            Message(env, r[0], r[1], r[2], r[3], r[4], receives, attempt)
            for env, ids, receives, attempt in envelopes
            for r in map(tasks.__getitem__, ids)
        ]

    def queue_ack(self, messages: Sequence[Message]) -> int:
        return self._run(lambda c: _settle(c, messages, [], 0))

    def outbox_take(
        self, limit: int, now_ms: int, publish: Callable[[list[Envelope]], None]
    ) -> int:
        """Delete up to ``limit`` visible envelopes and ``publish`` them BEFORE the delete
        commits. For a queue elsewhere (Redis): a crash or failed commit after publishing
        leaves the rows, so they are published again (at-least-once); never lost."""

        def take(c: psycopg.Connection[Any]) -> int:
            args = {"limit": limit, "now": now_ms}
            envelopes = sorted(c.execute(Q["outbox_take"], args).fetchall())
            if envelopes:
                publish([(env, ids, attempt) for env, ids, _, attempt in envelopes])
            return sum(len(e[1]) for e in envelopes)

        return self._run(take)

    def queue_depth(self) -> int:
        return int(self.query(Q["queue_depth"])[0][0])

    # -- processes, events, samples ---------------------------------------------------------

    def register_process(self, info: ProcessInfo) -> None:
        row = (info.role, info.index, info.pid, info.owner, info.started_ms)
        self._run(lambda c: c.execute(Q["register_process"], row))

    def process_exited(self, role: str, index: int, pid: int, now_ms: int) -> None:
        self._run(lambda c: c.execute(Q["process_exited"], (now_ms, role, index, pid)))

    def processes(self) -> list[ProcessInfo]:
        return [
            ProcessInfo(
                role=r[0], index=r[1], pid=r[2], owner=r[3], started_ms=r[4], exited_ms=r[5]
            )
            for r in self.query(Q["processes"])
        ]

    def record_event(self, event: Event) -> None:
        detail = json.dumps(dict(event.detail))
        row = (event.kind, event.at_ms, event.holder, event.epoch, event.pid, detail)
        self._run(lambda c: c.execute(Q["record_event"], row))

    def events(self) -> list[Event]:
        return [
            Event(kind=r[0], at_ms=r[1], holder=r[2], epoch=r[3], pid=r[4], detail=json.loads(r[5]))
            for r in self.query(Q["events"])
        ]

    def record_sample(self, now_ms: int, depth: int) -> None:
        self._run(lambda c: c.execute(Q["record_sample"], (now_ms, depth)))

    # -- schedules (ports.ScheduleStore; the SQLite store's semantics) ----------------------

    def put_schedule(self, schedule: Schedule, now_ms: int, *, replace: bool) -> bool:
        stored = self._run(lambda c: _schedule(c, schedule.name))
        if stored is not None and replace and schedules.same_definition(stored.schedule, schedule):
            return False  # redeploying writes nothing

        def put(c: psycopg.Connection[Any]) -> bool:
            old = _schedule(c, schedule.name, lock=True)
            if old is not None and not replace:
                raise ConflictError(f"a schedule named {schedule.name!r} already exists")
            if old is not None and schedules.same_definition(old.schedule, schedule):
                return False
            c.execute(Q["schedule_upsert"], schedules.to_row(schedule))
            paused = old.schedule.paused if old is not None else schedule.paused
            _rematerialise(c, schedule, now_ms, paused)
            return True

        return self._run(put)

    def get_schedule(self, name: str) -> ScheduleInfo:
        def get(c: psycopg.Connection[Any]) -> ScheduleInfo:
            info = _must_exist(c, name)
            outcome = c.execute(Q["schedule_last_outcome"], {"name": name}).fetchone()
            return dataclasses.replace(info, last_outcome=outcome[0] if outcome else None)

        return self._run(get)

    def list_schedules(self) -> list[ScheduleInfo]:
        names = [r[0] for r in self.query(Q["schedule_names"])]
        return [self.get_schedule(n) for n in names]

    def pause_schedule(self, name: str) -> bool:
        def pause(c: psycopg.Connection[Any]) -> bool:
            _must_exist(c, name, lock=True)
            changed = c.execute(Q["schedule_set_paused"], {"name": name, "paused": 1}).rowcount
            c.execute(Q["schedule_drop_pending"], {"name": name})
            c.execute(Q["schedule_set_next"], {"name": name, "next": None})
            return changed > 0

        return self._run(pause)

    def resume_schedule(self, name: str, now_ms: int) -> bool:
        def resume(c: psycopg.Connection[Any]) -> bool:
            info = _must_exist(c, name, lock=True)
            changed = c.execute(Q["schedule_set_paused"], {"name": name, "paused": 0}).rowcount
            if changed:
                _rematerialise(c, info.schedule, now_ms, False)
            return changed > 0

        return self._run(resume)

    def remove_schedule(self, name: str) -> None:
        def remove(c: psycopg.Connection[Any]) -> None:
            _must_exist(c, name, lock=True)
            c.execute(Q["schedule_drop_pending"], {"name": name})
            c.execute(Q["schedule_delete"], {"name": name})

        self._run(remove)

    def trigger_schedule(self, name: str, now_ms: int) -> str:
        def trigger(c: psycopg.Connection[Any]) -> str:
            task = schedules.triggered(_must_exist(c, name).schedule, now_ms)
            c.execute(Q["add_task"], _task_row(task))
            return task.idempotency_key

        return self._run(trigger)

    def set_idempotency(self, on: bool) -> None:
        """Create or drop the invoices' unique key (``--no-idempotency`` drops it)."""
        sql = (
            "CREATE UNIQUE INDEX IF NOT EXISTS invoices_once ON invoices (customer, period)"
            if on
            else "DROP INDEX IF EXISTS invoices_once"
        )
        try:
            self._run(lambda c: c.execute(sql))
        except psycopg.errors.UniqueViolation as exc:
            raise ConfigError(
                f"cannot turn idempotency on: duplicate invoices exist ({exc})"
            ) from exc


class _HandlerFailed(Exception):
    """A run raised on the fast path: redo the batch with a savepoint per message."""


class _Batch:
    """One worker batch inside an open transaction: runs, execution ends, task updates, acks."""

    def __init__(
        self,
        c: psycopg.Connection[Any],
        worker: str,
        start_ms: int,
        retry: Retry,
        now: Callable[[], int],
        relayed: bool,
    ) -> None:
        self.c, self.worker, self.start_ms, self.retry, self.now = c, worker, start_ms, retry, now
        self.relayed = relayed
        self.ends: list[tuple[Message, str, str | None, int]] = []
        self.done: list[int] = []
        self.acks: list[Message] = []
        self.retries: list[tuple[Message, int]] = []
        self.counts = {"ok": 0, "noop": 0, "error": 0, "failed": 0}

    def run_all(self, messages: Sequence[Message], run: Run, isolate: bool) -> dict[str, int]:
        with self.c.cursor() as cur:
            tx = PostgresTx(cur)
            for m in messages:
                if not isolate:
                    self._run_fast(m, run, tx)
                elif (error := self._run_isolated(m, run, tx)) is not None:
                    self._failed(m, error)
        self._flush()
        return self.counts

    def run_batch(self, messages: Sequence[Message], batched: sqlite.BatchStep) -> dict[str, int]:
        """Fast path with one step for all messages; it raising means redo per message."""
        with self.c.cursor() as cur:
            try:
                applied = batched(PostgresTx(cur))
            except psycopg.OperationalError:
                raise  # the connection, not the handler: the whole transaction is retried
            except Exception as exc:
                raise _HandlerFailed from exc
        for m, ok in zip(messages, applied, strict=True):
            self._succeeded(m, ok)
        self._flush()
        return self.counts

    def _run_fast(self, m: Message, run: Run, tx: PostgresTx) -> None:
        try:
            applied = run(m, tx)
        except psycopg.OperationalError:
            raise  # the connection, not the handler: the whole transaction is retried
        except Exception as exc:
            raise _HandlerFailed from exc
        self._succeeded(m, applied)

    def _run_isolated(self, m: Message, run: Run, tx: PostgresTx) -> Exception | None:
        try:
            with self.c.transaction():  # a savepoint: a failure undoes this message only
                applied = run(m, tx)
        except psycopg.OperationalError:
            raise
        except Exception as exc:
            return exc
        self._succeeded(m, applied)
        return None

    def _succeeded(self, m: Message, applied: bool) -> None:
        outcome = "ok" if applied else "noop"
        self.counts[outcome] += 1
        self.ends.append((m, outcome, None, self.now()))
        self.done.append(m.task_id)
        self.acks.append(m)

    def _failed(self, m: Message, exc: BaseException) -> None:
        error, now = f"{type(exc).__name__}: {exc}", self.now()
        final = m.attempt >= self.retry.max_attempts
        outcome = "failed" if final else "error"
        self.counts[outcome] += 1
        self.ends.append((m, outcome, error, now))
        if final:
            self.c.execute(Q["task_failed"], (error, m.task_id))
            self.acks.append(m)
        else:
            self.c.execute(Q["task_error"], (error, m.task_id))
            self.retries.append((m, now + self.retry.delay_ms(m.attempt)))

    def _executions(self) -> dict[str, Any]:
        return {**_columns(self.ends), "worker": self.worker, "start": self.start_ms}

    def _flush(self) -> None:
        if not self.ends:
            return
        self.c.execute(Q["execution_insert"], self._executions())
        self.c.execute(Q["task_done"], {"ids": ints(self.done)})
        if self.relayed:  # settled on the stream; a retry waits in the outbox for the relay
            for m, at in self.retries:
                _enqueue(self.c, [(m.task_id, m.attempt)], self.now(), at)
        else:
            _settle(self.c, self.acks, self.retries, self.now())


def _claim_due(c: psycopg.Connection[Any], args: dict[str, int]) -> list[Any]:
    """Claimed ``(id, key, attempts, trigger_ms)`` rows, oldest trigger first."""
    return sorted(c.execute(Q["claim_due"], args).fetchall(), key=lambda r: (r[3], r[0]))


def _enqueue(
    c: psycopg.Connection[Any], tasks: Sequence[tuple[int, int]], now_ms: int, visible_ms: int = 0
) -> None:
    """Enqueue ``(task id, attempts so far)`` pairs as messages, in envelopes, visible at
    ``visible_ms``; a dispatch (visible at once) counts them as dispatched, a retry not."""
    if not tasks:
        return
    args = {
        "ids": ints(t[0] for t in tasks),
        "attempts": ints(t[1] for t in tasks),
        "envelope": ENVELOPE,
        "now": now_ms,
        "visible": visible_ms,
    }
    c.execute(Q["enqueue"], args)
    if not visible_ms:
        c.execute(Q["count_dispatched"], {"n": len(tasks)})


PAGE = 16  # envelopes locked per look at the queue while a claim fills its limit


def _pick_envelopes(c: psycopg.Connection[Any], limit: int, now_ms: int) -> list[int]:
    """Visible envelopes (locked) holding ``limit`` messages at most, the last one split."""
    picked: list[int] = []
    total, after = 0, 0
    while total < limit:
        page = c.execute(Q["queue_visible"], {"now": now_ms, "after": after, "page": PAGE})
        rows = page.fetchall()
        for env, size in rows:
            picked.append(env)
            if total + size > limit:
                keep = limit - total
                c.execute(Q["queue_split"], {"id": env, "keep": keep})
                c.execute(Q["queue_keep"], {"id": env, "keep": keep})
            total += size
            if total >= limit:
                break
        if len(rows) < PAGE:
            break
        after = rows[-1][0]
    return picked


def _settle(
    c: psycopg.Connection[Any],
    acks: Sequence[Message],
    retries: Sequence[tuple[Message, int]],
    now_ms: int,
) -> int:
    """Take acked and retried messages out of their envelopes (see the SQLite store's
    ``_settle``); a retry goes into an envelope of its own. Returns the messages acked."""
    plan = Settlement.of(acks, retries)
    keys = list(plan.removed)
    whole = {
        "ids": ints(k[0] for k in keys),
        "receives": ints(k[1] for k in keys),
        "sizes": ints(plan.removed[k] for k in keys),
    }
    settled = {(r[0], r[1]) for r in c.execute(Q["queue_ack_whole"], whole).fetchall()}
    acked = 0
    for key in keys:
        if key not in settled and not _shrink(c, key, plan):
            continue  # stale: the envelope was delivered again meanwhile
        acked += plan.acked[key]
        for m, at in plan.retried(key):
            _enqueue(c, [(m.task_id, m.attempt)], now_ms, at)
    return acked


def _shrink(c: psycopg.Connection[Any], key: Delivery, plan: Settlement) -> bool:
    """Take some messages out of a current envelope; False when it is not current."""
    row = c.execute(Q["queue_envelope"], key).fetchone()
    if row is None:
        return False
    left = plan.left(key, row[0])
    if left:
        c.execute(Q["queue_shrink"], (left, len(left), key[0]))
    else:
        c.execute(Q["queue_delete"], (key[0],))
    return True


def _columns(ends: Sequence[tuple[Message, str, str | None, int]]) -> dict[str, str]:
    return {
        "tasks": ints(m.task_id for m, *_ in ends),
        "messages": ints(m.id for m, *_ in ends),
        "receives": ints(m.receives for m, *_ in ends),
        "attempts": ints(m.attempt for m, *_ in ends),
        "outcomes": texts(e[1] for e in ends),
        "errors": texts(e[2] for e in ends),
        "ends": ints(e[3] for e in ends),
    }


def ints(values: Iterable[int]) -> str:
    """A PostgreSQL array literal ``{1,2}`` for a ``%s::bigint[]`` parameter: several times
    cheaper to build and to send than psycopg's adaptation of a list."""
    return "{" + ",".join(map(str, values)) + "}"


def texts(values: Iterable[str | None]) -> str:
    """A PostgreSQL array literal of quoted strings and NULLs, for a ``%s::text[]``."""
    return "{" + ",".join(map(_quoted, values)) + "}"


def _quoted(v: str | None) -> str:
    if v is None:
        return "NULL"
    return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _copy_tasks(
    c: psycopg.Connection[Any],
    rows: list[tuple[str, str, str, int, str | None]],
    progress: Callable[[int], None] | None,
) -> int:
    inserted = 0
    c.execute(Q["add_tasks_tmp"])
    with c.cursor() as cur:
        for chunk in _chunks(rows):
            with cur.copy(Q["add_tasks_copy"]) as copy:
                for row in chunk:
                    copy.write_row(row)
            inserted += cur.execute(Q["add_tasks_from_tmp"]).rowcount
            cur.execute("TRUNCATE add_tasks_tmp")
            if progress:
                progress(len(chunk))
    return inserted


def _chunks(rows: list[T]) -> Iterator[list[T]]:
    it = iter(rows)
    while chunk := list(islice(it, CHUNK)):
        yield chunk


def _open_pool(url: str, size: int, timeout_s: float) -> ConnectionPool[Any]:
    """A pool whose first connection is up, or a one-line ``BackendUnavailable``."""
    _probe(url, timeout_s)  # says why (refused, unknown database …) instead of a pool timeout
    pool: ConnectionPool[Any] = ConnectionPool(
        url,
        min_size=1,
        max_size=max(1, size),
        timeout=timeout_s,
        kwargs={"connect_timeout": max(1, int(timeout_s))},
        open=False,
    )
    try:
        pool.open(wait=True, timeout=timeout_s)
    except (PoolTimeout, psycopg.Error) as exc:
        pool.close()
        raise BackendUnavailable(
            f"postgresql {_safe(url)} unreachable within {timeout_s:g} s ({type(exc).__name__})"
        ) from exc
    return pool


def _probe(url: str, timeout_s: float) -> None:
    try:
        psycopg.connect(url, connect_timeout=max(1, int(timeout_s))).close()
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BackendUnavailable(f"postgresql {_safe(url)} unreachable: {reason}") from exc


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` instead (host, port, user and options kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


@contextmanager
def scratch_database(admin: str, prefix: str = "cronlab_scratch") -> Iterator[str]:
    """A fresh, empty database made through ``admin``; its URL. Dropped afterwards, its
    connections forced out (for tests and benchmarks)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(admin, name)
    finally:
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _safe(url: str) -> str:
    """The URL without a password, for messages."""
    scheme, sep, rest = url.partition("://")
    creds, at, host = rest.rpartition("@")
    return f"{scheme}{sep}{creds.split(':')[0]}{at}{host}" if at else url


def _has_schema(c: psycopg.Connection[Any]) -> bool:
    row = c.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()
    return bool(row and row[0])


def _schedule(c: psycopg.Connection[Any], name: str, *, lock: bool = False) -> ScheduleInfo | None:
    query = Q["schedule_get_locked" if lock else "schedule_get"]
    row = c.execute(query, {"name": name}).fetchone()
    if row is None:
        return None
    return ScheduleInfo(
        schedule=schedules.from_row(row[:9]),
        next_fire_ms=row[9],
        last_fire_ms=row[10],
        last_reason=row[11],
    )


def _must_exist(c: psycopg.Connection[Any], name: str, *, lock: bool = False) -> ScheduleInfo:
    info = _schedule(c, name, lock=lock)
    if info is None:
        raise NotFoundError(f"no schedule named {name!r}")
    return info


def _rematerialise(c: psycopg.Connection[Any], s: Schedule, now_ms: int, paused: bool) -> None:
    """Replace the schedule's waiting occurrence by ``next_fire(now)`` (none while paused)."""
    c.execute(Q["schedule_drop_pending"], {"name": s.name})
    next_ms = None if paused else policy.next_fire(s, now_ms)
    if next_ms is not None:
        c.execute(Q["add_task"], _task_row(schedules.occurrence(s, next_ms)))
    c.execute(Q["schedule_set_next"], {"name": s.name, "next": next_ms})


def _plan_schedules(c: psycopg.Connection[Any], rows: list[Any], args: dict[str, int]) -> list[Any]:
    """Plan the claimed schedule occurrences in this transaction (see the SQLite store's)."""
    if not any(r[1].startswith(schedules.OCCURRENCE_PREFIX) for r in rows):
        return rows  # the bulk path (invoices): nothing to plan, nothing built
    runs: list[Any] = []
    claimed = 0
    view = _PgRows(c)
    while rows:
        skipped, due_added = schedules.plan_claimed(view, [(r[0], r[1]) for r in rows], args["now"])
        runs += [r for r in rows if r[0] not in skipped]
        claimed += len(rows)
        room = args["limit"] - claimed
        more = due_added and room > 0
        rows = _claim_due(c, {**args, "limit": room}) if more else []
    return runs


class _PgRows:
    """``schedules.Rows`` over the open dispatch transaction."""

    def __init__(self, c: psycopg.Connection[Any]) -> None:
        self.c = c

    def schedule_info(self, name: str) -> ScheduleInfo | None:
        return _schedule(self.c, name)

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


def _rows(cur: psycopg.Cursor[Any]) -> list[Any]:
    return cur.fetchall() if cur.description is not None else []


def _one(c: psycopg.Connection[Any], sql: str) -> tuple[Any, ...]:
    row = c.execute(sql).fetchone()
    assert row is not None
    return tuple(row)


def _lease_state(r: Sequence[Any]) -> rules.LeaseState:
    return rules.LeaseState(holder=r[0], epoch=int(r[1]), expires_ms=int(r[2]))


def _task_row(t: NewTask) -> tuple[str, str, str, int, str | None]:
    return (t.idempotency_key, t.handler, t.payload, t.trigger_ms, t.schedule)
