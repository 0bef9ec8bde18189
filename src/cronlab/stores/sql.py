"""The SQL store, written once: tasks, fenced dispatch, the queue of envelopes, worker batches,
the lease row, schedules, the process registry and the event log.

What differs between databases lives in a small :class:`Dialect` (``stores/sqlite.py``,
``stores/postgres.py``): connecting, running one transaction (SQLite's writer lock, a
PostgreSQL pool that retries a dropped connection), how id lists go over the wire, the bulk
insert and the enqueue statement, and each named query's text (``stores/sql/<dialect>/``). The
logic below runs the same named queries with the same parameters on both.

Every public write is ONE transaction. Time is integer epoch milliseconds.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from functools import cache, partial
from importlib import resources
from typing import Any, Protocol, TypeVar

from cronlab.core import lease as rules
from cronlab.core import policy
from cronlab.core.policy import Schedule
from cronlab.exceptions import ConfigError, ConflictError, FencedError, NotFoundError
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
from cronlab.stores import Fencing, schedules
from cronlab.stores.rows import Delivery, Envelope, Settlement, task

T = TypeVar("T")
START = (-(1 << 62), -(1 << 62))  # a (trigger_ms, id) before every row
PAGE = 16  # envelopes a claim looks at per query while it fills its limit
MIGRATIONS_TABLE = "cronlab_schema"
Step = Callable[[Tx], bool]
BatchStep = Callable[[Tx], list[bool]]


class Cursor(Protocol):
    """What the store reads of a DB-API cursor."""

    rowcount: int

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Conn(Protocol):
    """An open connection inside a transaction (``sqlite3`` and ``psycopg`` both fit)."""

    def execute(self, sql: Any, params: Any = ..., /) -> Any: ...


class Dialect(Protocol):
    """What one database does its own way; the rest of the store is this module."""

    @property
    def name(self) -> str:
        """``"sqlite"`` or ``"postgresql"``: what a handler's SQL can pick its flavour by."""
        ...

    @property
    def queries(self) -> Mapping[str, str]:
        """The named queries (``stores/sql/<dialect>/queries.sql``)."""
        ...

    @property
    def resume_scan(self) -> bool:
        """The due scan resumes after its last full batch (MVCC keeps dead index entries)."""
        ...

    def transaction(self, fn: Callable[[Conn], T]) -> T:
        """``fn`` in one write transaction, committed when it returns, rolled back if it raises."""
        ...

    def read(self, fn: Callable[[Conn], T]) -> T:
        """``fn`` on a connection that sees committed data (no write lock taken)."""
        ...

    def savepoint(self, c: Conn) -> AbstractContextManager[None]:
        """A nested transaction: an exception inside undoes only what ran inside."""
        ...

    def is_connection_error(self, exc: BaseException) -> bool:
        """True when ``exc`` means the connection failed, not the statement."""
        ...

    def ints(self, values: Iterable[int]) -> Any:
        """An id list as the dialect's queries take it (``:ids``)."""
        ...

    def ids(self, value: Any) -> list[int]:
        """A stored envelope's ``task_ids`` column as a list."""
        ...

    def now(self, c: Conn, caller_ms: int) -> int:
        """The instant lease expiry is judged by (the caller's, or the server's clock)."""
        ...

    def add_tasks(
        self, c: Conn, rows: Iterable[NewTask], progress: Callable[[int], None] | None
    ) -> int:
        """Insert tasks (duplicate keys ignored); returns how many went in."""
        ...

    def enqueue(
        self, c: Conn, tasks: Sequence[tuple[int, int]], now_ms: int, visible_ms: int
    ) -> None:
        """``(task id, attempts so far)`` pairs → envelopes of ``rows.ENVELOPE`` at most, one
        attempt number each, visible at ``visible_ms``."""
        ...

    def run_script(self, c: Conn, script: str) -> None:
        """Run a migration file's statements."""
        ...

    def describe(self) -> str:
        """The store for messages, without secrets."""
        ...

    def close(self) -> None: ...


@cache
def sql_files(dialect: str) -> dict[str, str]:
    """The named-query file and the migrations of ``dialect``, by file name."""
    folder = resources.files("cronlab.stores") / "sql" / dialect
    return {f.name: f.read_text() for f in folder.iterdir() if f.name.endswith(".sql")}


def parse_queries(text: str) -> dict[str, str]:
    """``-- name: X`` blocks → {X: sql}; comment lines inside a block are dropped."""
    queries: dict[str, str] = {}
    name = ""
    for line in text.splitlines():
        if line.startswith("-- name:"):
            name = line.removeprefix("-- name:").strip()
            queries[name] = ""
        elif name and not line.lstrip().startswith("--"):
            queries[name] += line + "\n"
    return {k: v.strip() for k, v in queries.items()}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Migration:
    """A numbered migration file; ``replaces`` names the older files it squashes."""

    version: int
    name: str
    script: str
    replaces: tuple[str, ...] = ()


def migrations(files: Mapping[str, str]) -> list[Migration]:
    """The numbered files in order."""
    found = []
    for name, script in files.items():
        if not name[:3].isdigit():
            continue
        first = script.splitlines()[0] if script else ""
        replaces = tuple(first.removeprefix("-- replaces:").split()) if "replaces:" in first else ()
        found.append(Migration(version=int(name[:3]), name=name, script=script, replaces=replaces))
    return sorted(found, key=lambda m: m.version)


class SqlTx:
    """The open transaction a handler writes through (``ports.Tx``), committed with its ack.

    ``execute`` takes the dialect's own placeholders (SQLite ``?``/``:name``, PostgreSQL
    ``%s``/``%(name)s``); ``dialect`` says which.
    """

    def __init__(self, c: Conn, store: SqlStore) -> None:
        self._c, self._store = c, store
        self.dialect = store.d.name

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> int:
        return int(self._c.execute(sql, params).rowcount)

    def rows(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        """Run one bound statement; the rows it produced (e.g. by RETURNING)."""
        return fetch(self._c.execute(sql, params))

    def add_task(self, task: NewTask) -> int:
        return int(self._c.execute(self._store.q["add_task"], task_args(task)).rowcount)


class SqlStore:
    """``ports.Store`` + ``LeaseTable`` + ``QueueTable`` + ``ScheduleStore`` on one database.

    ``fencing="lease"``: a dispatch must carry the epoch of the unexpired lease row in this
    store. ``"epoch"``: the lease lives elsewhere (etcd); a dispatch must carry an epoch no
    lower than the highest one seen. Both raise the stored ``max_epoch``.
    """

    def __init__(self, dialect: Dialect, *, create: bool = True, fencing: Fencing = "lease"):
        self.d, self.q, self.fencing = dialect, dialect.queries, fencing
        self._resume: tuple[int, int] | None = None  # (trigger_ms, id) the due scan resumes after
        try:
            self._migrate(create)
        except BaseException:
            dialect.close()
            raise

    def close(self) -> None:
        self.d.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.d.describe()}>"

    # -- schema -----------------------------------------------------------------------------

    def _migrate(self, create: bool) -> None:
        """Apply what is missing; refuse a database that is not ours or is newer than us."""
        files = sql_files(self.d.name)
        steps = migrations(files)
        applied = self.d.read(partial(self._applied, steps, create))
        if all(m.version in applied for m in steps):
            return  # a reader (status, report) never waits for the write lock
        self.d.transaction(partial(self._apply, steps, create))

    def _applied(self, steps: Sequence[Migration], create: bool, c: Conn) -> set[int]:
        tables = {r[0] for r in c.execute(self.q["tables"]).fetchall()}
        if MIGRATIONS_TABLE not in tables:
            if "schema_version" in tables:
                return set()  # an earlier release's store: _apply upgrades it
            if tables:
                raise ConfigError(
                    f"{self.d.describe()} is not a cronlab store: it has other tables "
                    f"({', '.join(sorted(tables)[:3])}) and no {MIGRATIONS_TABLE}; "
                    "nothing was written"
                )
            if not create:
                raise ConfigError(f"no cronlab store in {self.d.describe()} (nothing was written)")
            return set()
        versions = {int(r[0]) for r in c.execute(f"SELECT version FROM {MIGRATIONS_TABLE}")}
        newest = max((m.version for m in steps), default=0)
        if versions and max(versions) > newest:
            raise ConfigError(
                f"store {self.d.describe()} is at schema version {max(versions)}, newer than "
                f"this cronlab's {newest}: upgrade cronlab (nothing was written)"
            )
        return versions

    def _apply(self, steps: Sequence[Migration], create: bool, c: Conn) -> None:
        c.execute(self.q["migrate_lock"])
        applied = self._applied(steps, create, c)
        tables = {r[0] for r in c.execute(self.q["tables"]).fetchall()}
        if MIGRATIONS_TABLE not in tables:
            c.execute(f"CREATE TABLE {MIGRATIONS_TABLE} (version INTEGER PRIMARY KEY, name TEXT)")
        if "schema_version" in tables:
            applied = self._upgrade_old(c, steps)
        for m in steps:
            if m.version not in applied:
                self.d.run_script(c, m.script)
                self._record(c, m)

    def _upgrade_old(self, c: Conn, steps: Sequence[Migration]) -> set[int]:
        """A store of cronlab 0.1 (table ``schema_version``): its migrations are squashed into
        our baseline; a store that had not applied all of them must upgrade through 0.1."""
        old = {r[0] for r in c.execute("SELECT name FROM schema_version").fetchall()}
        base = steps[0]
        if not set(base.replaces) <= old:
            missing = ", ".join(sorted(set(base.replaces) - old))
            raise ConfigError(
                f"store {self.d.describe()} is at an older cronlab schema (missing {missing}): "
                "start cronlab 0.1 on it once to finish its migrations, then this release"
            )
        self._record(c, base)
        c.execute("DROP TABLE schema_version")
        return {base.version}

    def _record(self, c: Conn, m: Migration) -> None:
        c.execute(
            f"INSERT INTO {MIGRATIONS_TABLE} (version, name) VALUES ({m.version}, '{m.name}')"
        )

    def schema_versions(self) -> list[int]:
        """Applied migration numbers, ascending."""
        rows = self.query(f"SELECT version FROM {MIGRATIONS_TABLE} ORDER BY version")
        return [int(r[0]) for r in rows]

    # -- reads for reports, tests and apps --------------------------------------------------

    def query(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        """Read-only SQL in the dialect's own placeholders (bound parameters)."""
        return self.d.read(lambda c: fetch(c.execute(sql, params)))

    def named(self, name: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """A named read query of the dialect (the report's, for instance)."""
        return self.query(self.q[name], params or {})

    def write(self, fn: Callable[[SqlTx], T]) -> T:
        """``fn`` in one write transaction, through a handler's ``Tx`` (apps' own tables)."""
        return self.d.transaction(lambda c: fn(SqlTx(c, self)))

    def task(self, task_id: int) -> Task:
        """One task by id; ``NotFoundError`` when there is none."""
        rows = self.named("task_get", {"id": task_id})
        if not rows:
            raise NotFoundError(f"no task with id {task_id}")
        r = rows[0]
        return task(r[:6], r[6], r[7])

    def last_error(self, task_id: int) -> str | None:
        """The error a task's newest failed run left (or a skip's reason)."""
        rows = self.named("task_get", {"id": task_id})
        return rows[0][8] if rows else None

    # -- tasks ------------------------------------------------------------------------------

    def add_tasks(
        self, tasks: Iterable[NewTask], progress: Callable[[int], None] | None = None
    ) -> int:
        """Insert PENDING tasks in ONE transaction; ``progress(n)`` after each chunk."""
        return self.d.transaction(lambda c: self.d.add_tasks(c, tasks, progress))

    def dispatch_due(self, now_ms: int, limit: int, epoch: int) -> int:
        return self.d.transaction(lambda c: self._dispatch(c, now_ms, limit, epoch))

    def _dispatch(self, c: Conn, now_ms: int, limit: int, epoch: int) -> int:
        """Fence, claim, plan schedules, enqueue. A full batch leaves the next scan a place to
        resume from; a resumed scan that comes back short looks once more from the start."""
        self._fence(c, epoch, now_ms)
        args = {"epoch": epoch, "now": now_ms, "limit": limit}
        if self._resume is None:
            claimed = self._claim(c, args, START)
        else:
            claimed = self._claim(c, args, self._resume)
            if len(claimed) < limit:
                claimed += self._claim(c, {**args, "limit": limit - len(claimed)}, START)
        full = self.d.resume_scan and len(claimed) >= limit
        self._resume = (claimed[-1][3], claimed[-1][0]) if full else None
        rows = self._plan_schedules(c, claimed, args)
        self._enqueue(c, [(r[0], r[2]) for r in rows], now_ms)
        return len(rows)

    def _claim(self, c: Conn, args: dict[str, int], after: tuple[int, int]) -> list[Any]:
        """Claimed ``(id, key, attempts, trigger_ms)`` rows, oldest trigger first."""
        full = {**args, "after_ms": after[0], "after_id": after[1]}
        return sorted(c.execute(self.q["claim_due"], full).fetchall(), key=lambda r: (r[3], r[0]))

    def _fence(self, c: Conn, epoch: int, now_ms: int) -> None:
        (max_epoch,) = c.execute(self.q["fence_lock"]).fetchone()
        if self.fencing == "epoch":
            if epoch < max_epoch:
                raise FencedError(epoch, max_epoch)
        else:
            state = _lease_state(c.execute(self.q["lease_read_locked"]).fetchone())
            if epoch < max_epoch or not rules.holds(state, epoch, self.d.now(c, now_ms)):
                raise FencedError(epoch, state.epoch)
        c.execute(self.q["fence_raise"], {"epoch": epoch})

    def _enqueue(
        self, c: Conn, tasks: Sequence[tuple[int, int]], now_ms: int, visible_ms: int = 0
    ) -> None:
        """Enqueue ``(task id, attempts so far)``; a dispatch (visible at once) counts them."""
        if not tasks:
            return
        self.d.enqueue(c, tasks, now_ms, visible_ms)
        if not visible_ms:
            c.execute(self.q["count_dispatched"], {"n": len(tasks)})

    def _plan_schedules(self, c: Conn, rows: list[Any], args: dict[str, int]) -> list[Any]:
        """Plan the claimed schedule occurrences in this transaction; the rows that run.

        Caught-up occurrences the plan inserts are already due: they are claimed (and planned)
        here too, up to the batch limit, so one fenced transaction judges them all at one now.
        """
        if not any(r[1].startswith(schedules.OCCURRENCE_PREFIX) for r in rows):
            return rows  # the bulk path: nothing to plan, nothing built
        runs: list[Any] = []
        claimed = 0
        view = _Rows(self, c)
        while rows:
            pairs = [(r[0], r[1]) for r in rows]
            skipped, due_added = schedules.plan_claimed(view, pairs, args["now"])
            runs += [r for r in rows if r[0] not in skipped]
            claimed += len(rows)
            room = args["limit"] - claimed
            rows = self._claim(c, {**args, "limit": room}, START) if due_added and room > 0 else []
        return runs

    def read_due(
        self, now_ms: int, limit: int, copied_since_ms: int | None = None
    ) -> Sequence[Task]:
        def read(c: Conn) -> list[Any]:
            rows = c.execute(self.q["read_due"], {"now": now_ms, "limit": limit}).fetchall()
            if copied_since_ms is not None:
                args = {"now": now_ms, "since": copied_since_ms}
                rows += c.execute(self.q["read_copied"], args).fetchall()
            return list(rows)

        return [task(r, "PENDING", None) for r in self.d.read(read)]

    def enqueue_copies(self, tasks: Sequence[Task], now_ms: int) -> int:
        def copy(c: Conn) -> None:
            self._enqueue(c, [(t.id, t.attempts) for t in tasks], now_ms)
            c.execute(
                self.q["mark_copied"], {"ids": self.d.ints(t.id for t in tasks), "now": now_ms}
            )

        self.d.transaction(copy)
        return len(tasks)

    def mark_missed(self, before_ms: int, now_ms: int) -> int:
        return self.d.transaction(
            lambda c: int(c.execute(self.q["mark_missed"], {"before": before_ms}).rowcount)
        )

    def counts(self) -> dict[str, int]:
        found = dict(self.named("counts"))
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
        batched = _prepare_batch(run, messages, self.d.name)
        steps = [] if batched else _prepare(run, messages)

        def fast(c: Conn) -> dict[str, int]:
            b = _Batch(self, c, worker, start, retry, now, relayed)
            return b.run_batch(messages, batched) if batched else b.run_all(steps, isolate=False)

        try:
            return self.d.transaction(fast)
        except _HandlerFailed:
            steps = steps or _prepare(run, messages)
            return self.d.transaction(
                lambda c: _Batch(self, c, worker, start, retry, now, relayed).run_all(
                    steps, isolate=True
                )
            )

    # -- lease row (LeaseTable) -------------------------------------------------------------

    def lease_cas(self, owner: str, now_ms: int, ttl_ms: int) -> rules.LeaseState | None:
        if ttl_ms <= 0:
            raise ConfigError(f"lease TTL must be > 0 ms, got {ttl_ms}")

        def cas(c: Conn) -> Any:
            args = {"owner": owner, "now": self.d.now(c, now_ms), "ttl": ttl_ms}
            return c.execute(self.q["lease_cas"], args).fetchone()

        got = self.d.transaction(cas)
        return None if got is None else _lease_state(got)

    def lease_release(self, owner: str) -> None:
        self.d.transaction(lambda c: c.execute(self.q["lease_release"], {"owner": owner}))

    def lease_read(self) -> rules.LeaseState:
        return _lease_state(self.named("lease_read")[0])

    # -- queue (QueueTable) -----------------------------------------------------------------

    def queue_claim(
        self, worker: str, limit: int, visibility_ms: int, now_ms: int
    ) -> list[Message]:
        """Whole envelopes in queue order while they fit ``limit``; the last one is split."""
        if not self.named("queue_any_visible", {"now": now_ms}):
            return []  # an idle worker polls without taking the write lock

        def claim(c: Conn) -> list[Any]:
            ids = self._pick_envelopes(c, limit, now_ms)
            if not ids:
                return []
            args = {"until": now_ms + visibility_ms, "worker": worker, "ids": self.d.ints(ids)}
            got = c.execute(self.q["queue_claim"], args).fetchall()
            return sorted((env, self.d.ids(t), rec, att) for env, t, rec, att in got)

        return self.queue_messages(self.d.transaction(claim))

    def _pick_envelopes(self, c: Conn, limit: int, now_ms: int) -> list[int]:
        """Visible envelopes holding ``limit`` messages at most, the last one split to fit."""
        picked: list[int] = []
        total, after = 0, 0
        while total < limit:
            args = {"now": now_ms, "after": after, "page": PAGE}
            rows = c.execute(self.q["queue_visible"], args).fetchall()
            for env, size in rows:
                picked.append(env)
                if total + size > limit:
                    keep = {"id": env, "keep": limit - total}
                    c.execute(self.q["queue_split"], keep)
                    c.execute(self.q["queue_keep"], keep)
                total += size
                if total >= limit:
                    break
            if len(rows) < PAGE:
                break
            after = rows[-1][0]
        return picked

    def queue_messages(self, envelopes: Sequence[Sequence[Any]]) -> list[Message]:
        """Claimed ``(id, task ids, receives, attempt)`` envelopes → their messages (the
        tasks' columns never change, so they are read after the claim committed)."""
        if not envelopes:
            return []
        wanted = self.d.ints(sorted({t for e in envelopes for t in e[1]}))
        tasks = {r[0]: r for r in self.named("message_tasks", {"ids": wanted})}
        return [
            Message(env, r[0], r[1], r[2], r[3], r[4], receives, attempt)
            for env, ids, receives, attempt in envelopes
            for r in map(tasks.__getitem__, ids)
        ]

    def outbox_take(
        self, limit: int, now_ms: int, publish: Callable[[list[Envelope]], None]
    ) -> int:
        """Delete up to ``limit`` visible envelopes and ``publish`` them BEFORE the delete
        commits. For a queue elsewhere (Redis): a crash or failed commit after publishing
        leaves the rows, so they are published again (at-least-once); never lost."""

        def take(c: Conn) -> int:
            rows = c.execute(self.q["outbox_take"], {"limit": limit, "now": now_ms}).fetchall()
            envelopes: list[Envelope] = sorted(
                (env, self.d.ids(ids), attempt) for env, ids, attempt in rows
            )
            if envelopes:
                publish(envelopes)
            return sum(len(e[1]) for e in envelopes)

        return self.d.transaction(take)

    def queue_ack(self, messages: Sequence[Message]) -> int:
        return self.d.transaction(lambda c: self._settle(c, messages, [], 0))

    def queue_depth(self) -> int:
        return int(self.named("queue_depth")[0][0])

    def _settle(
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
            "ids": self.d.ints(k[0] for k in keys),
            "receives": self.d.ints(k[1] for k in keys),
            "sizes": self.d.ints(plan.removed[k] for k in keys),
        }
        settled = {(r[0], r[1]) for r in c.execute(self.q["queue_ack_whole"], whole).fetchall()}
        acked = 0
        for key in keys:
            if key not in settled and not self._shrink(c, key, plan):
                continue  # stale: the envelope was delivered again meanwhile
            acked += plan.acked[key]
            for m, at in plan.retried(key):
                self._enqueue(c, [(m.task_id, m.attempt)], now_ms, at)
        return acked

    def _shrink(self, c: Conn, key: Delivery, plan: Settlement) -> bool:
        """Take some messages out of a current envelope; False when it is not current."""
        row = c.execute(self.q["queue_envelope"], {"id": key[0], "receives": key[1]}).fetchone()
        if row is None:
            return False
        left = plan.left(key, self.d.ids(row[0]))
        if left:
            args = {"id": key[0], "ids": self.d.ints(left), "size": len(left)}
            c.execute(self.q["queue_shrink"], args)
        else:
            c.execute(self.q["queue_delete"], {"id": key[0]})
        return True

    # -- processes, events, samples ---------------------------------------------------------

    def register_process(self, info: ProcessInfo) -> None:
        args = {
            "role": info.role,
            "idx": info.index,
            "pid": info.pid,
            "owner": info.owner,
            "started": info.started_ms,
        }
        self.d.transaction(lambda c: c.execute(self.q["register_process"], args))

    def process_exited(self, role: str, index: int, pid: int, now_ms: int) -> None:
        args = {"now": now_ms, "role": role, "idx": index, "pid": pid}
        self.d.transaction(lambda c: c.execute(self.q["process_exited"], args))

    def processes(self) -> list[ProcessInfo]:
        return [
            ProcessInfo(
                role=r[0], index=r[1], pid=r[2], owner=r[3], started_ms=r[4], exited_ms=r[5]
            )
            for r in self.named("processes")
        ]

    def record_event(self, event: Event) -> None:
        args = {
            "kind": event.kind,
            "at": event.at_ms,
            "holder": event.holder,
            "epoch": event.epoch,
            "pid": event.pid,
            "detail": json.dumps(dict(event.detail)),
        }
        self.d.transaction(lambda c: c.execute(self.q["record_event"], args))

    def events(self) -> list[Event]:
        return [
            Event(kind=r[0], at_ms=r[1], holder=r[2], epoch=r[3], pid=r[4], detail=json.loads(r[5]))
            for r in self.named("events")
        ]

    def record_sample(self, now_ms: int, depth: int) -> None:
        args = {"at": now_ms, "depth": depth}
        self.d.transaction(lambda c: c.execute(self.q["record_sample"], args))

    # -- schedules (ports.ScheduleStore) ----------------------------------------------------

    def put_schedule(self, schedule: Schedule, now_ms: int, *, replace: bool) -> bool:
        stored = self.d.read(lambda c: self._schedule(c, schedule.name))
        if stored is not None and replace and schedules.same_definition(stored.schedule, schedule):
            return False  # read outside the lock: redeploying takes no write lock

        def put(c: Conn) -> bool:
            old = self._schedule(c, schedule.name, lock=True)
            if old is not None and not replace:
                raise ConflictError(f"a schedule named {schedule.name!r} already exists")
            if old is not None and schedules.same_definition(old.schedule, schedule):
                return False
            c.execute(self.q["schedule_upsert"], schedules.to_row(schedule))
            paused = old.schedule.paused if old is not None else schedule.paused
            self._rematerialise(c, schedule, now_ms, paused)
            return True

        return self.d.transaction(put)

    def get_schedule(self, name: str) -> ScheduleInfo:
        def get(c: Conn) -> ScheduleInfo:
            info = self._must_exist(c, name)
            outcome = c.execute(self.q["schedule_last_outcome"], {"name": name}).fetchone()
            return dataclasses.replace(info, last_outcome=outcome[0] if outcome else None)

        return self.d.read(get)

    def list_schedules(self) -> list[ScheduleInfo]:
        return [self.get_schedule(r[0]) for r in self.named("schedule_names")]

    def pause_schedule(self, name: str) -> bool:
        def pause(c: Conn) -> bool:
            self._must_exist(c, name, lock=True)
            args = {"name": name, "paused": 1}
            changed = int(c.execute(self.q["schedule_set_paused"], args).rowcount)
            c.execute(self.q["schedule_drop_pending"], {"name": name})
            c.execute(self.q["schedule_set_next"], {"name": name, "next": None})
            return changed > 0

        return self.d.transaction(pause)

    def resume_schedule(self, name: str, now_ms: int) -> bool:
        def resume(c: Conn) -> bool:
            info = self._must_exist(c, name, lock=True)
            args = {"name": name, "paused": 0}
            changed = int(c.execute(self.q["schedule_set_paused"], args).rowcount)
            if changed:
                self._rematerialise(c, info.schedule, now_ms, False)
            return changed > 0

        return self.d.transaction(resume)

    def remove_schedule(self, name: str) -> None:
        def remove(c: Conn) -> None:
            self._must_exist(c, name, lock=True)
            c.execute(self.q["schedule_drop_pending"], {"name": name})
            c.execute(self.q["schedule_delete"], {"name": name})

        self.d.transaction(remove)

    def trigger_schedule(self, name: str, now_ms: int) -> str:
        def trigger(c: Conn) -> str:
            new = schedules.triggered(self._must_exist(c, name).schedule, now_ms)
            c.execute(self.q["add_task"], task_args(new))
            return new.idempotency_key

        return self.d.transaction(trigger)

    def _schedule(self, c: Conn, name: str, *, lock: bool = False) -> ScheduleInfo | None:
        query = self.q["schedule_get_locked" if lock else "schedule_get"]
        row = c.execute(query, {"name": name}).fetchone()
        if row is None:
            return None
        return ScheduleInfo(
            schedule=schedules.from_row(row[:9]),
            next_fire_ms=row[9],
            last_fire_ms=row[10],
            last_reason=row[11],
        )

    def _must_exist(self, c: Conn, name: str, *, lock: bool = False) -> ScheduleInfo:
        info = self._schedule(c, name, lock=lock)
        if info is None:
            raise NotFoundError(f"no schedule named {name!r}")
        return info

    def _rematerialise(self, c: Conn, s: Schedule, now_ms: int, paused: bool) -> None:
        """Replace the schedule's waiting occurrence by ``next_fire(now)`` (none while paused)."""
        c.execute(self.q["schedule_drop_pending"], {"name": s.name})
        next_ms = None if paused else policy.next_fire(s, now_ms)
        if next_ms is not None:
            c.execute(self.q["add_task"], task_args(schedules.occurrence(s, next_ms)))
        c.execute(self.q["schedule_set_next"], {"name": s.name, "next": next_ms})


class _Rows:
    """``schedules.Rows`` over the open dispatch transaction."""

    def __init__(self, store: SqlStore, c: Conn) -> None:
        self.store, self.c, self.q = store, c, store.q

    def schedule_info(self, name: str) -> ScheduleInfo | None:
        return self.store._schedule(self.c, name)

    def running_before(self, name: str, fire_ms: int) -> bool:
        args = {"name": name, "fire": fire_ms}
        return self.c.execute(self.q["schedule_running_before"], args).fetchone() is not None

    def add_task(self, task: NewTask) -> int:
        return int(self.c.execute(self.q["add_task"], task_args(task)).rowcount)

    def skip(self, task_id: int, reason: str) -> None:
        self.c.execute(self.q["task_skip"], {"id": task_id, "reason": reason})

    def fired(self, name: str, fire_ms: int, next_fire_ms: int | None, reason: str | None) -> None:
        args = {"name": name, "fire": fire_ms, "next": next_fire_ms, "reason": reason}
        self.c.execute(self.q["schedule_fired"], args)


def _prepare(run: Run, messages: Sequence[Message]) -> list[tuple[Message, Step]]:
    """Work a run can do before the write transaction (``handlers.Runner.prepare``)."""
    prepare: Callable[[Message], Step] | None = getattr(run, "prepare", None)
    if prepare is not None:
        return [(m, prepare(m)) for m in messages]
    return [(m, partial(run, m)) for m in messages]


def _prepare_batch(run: Run, messages: Sequence[Message], dialect: str) -> BatchStep | None:
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
        store: SqlStore,
        c: Conn,
        worker: str,
        start_ms: int,
        retry: Retry,
        now: Callable[[], int],
        relayed: bool,
    ) -> None:
        self.store, self.c, self.q = store, c, store.q
        self.worker, self.start_ms, self.retry, self.now = worker, start_ms, retry, now
        self.relayed = relayed
        self.ends: list[list[Any]] = []  # [task, message, receive, attempt, end, outcome, error]
        self.done: list[int] = []
        self.acks: list[Message] = []
        self.retries: list[tuple[Message, int]] = []
        self.counts = {"ok": 0, "noop": 0, "error": 0, "failed": 0}

    def run_all(self, steps: Sequence[tuple[Message, Step]], *, isolate: bool) -> dict[str, int]:
        tx = SqlTx(self.c, self.store)
        for m, step in steps:
            if not isolate:
                self._succeeded(m, self._guard(step, tx))
            elif (error := self._run_isolated(m, step, tx)) is not None:
                self._failed(m, error)
        self._flush()
        return self.counts

    def run_batch(self, messages: Sequence[Message], batched: BatchStep) -> dict[str, int]:
        """Fast path with one step for all messages; it raising means redo per message. The
        batch commits as one, so its runs share one end instant."""
        applied = self._guard(batched, SqlTx(self.c, self.store))
        end = self.now()
        outcomes = ["ok" if a else "noop" for a in applied]
        self.ends = [
            [m.task_id, m.id, m.receives, m.attempt, end, o, None]
            for m, o in zip(messages, outcomes, strict=True)
        ]
        self.done = [m.task_id for m in messages]
        self.acks = list(messages)
        self.counts["ok"] = outcomes.count("ok")
        self.counts["noop"] = len(outcomes) - self.counts["ok"]
        self._flush()
        return self.counts

    def _guard(self, step: Callable[[Tx], T], tx: SqlTx) -> T:
        try:
            return step(tx)
        except Exception as exc:
            if self.store.d.is_connection_error(exc):
                raise  # the connection, not the handler: the whole transaction is retried
            raise _HandlerFailed from exc

    def _run_isolated(self, m: Message, step: Step, tx: SqlTx) -> Exception | None:
        try:
            with self.store.d.savepoint(self.c):
                applied = step(tx)
        except Exception as exc:
            if self.store.d.is_connection_error(exc):
                raise
            return exc
        self._succeeded(m, applied)
        return None

    def _succeeded(self, m: Message, applied: bool) -> None:
        outcome = "ok" if applied else "noop"
        self.counts[outcome] += 1
        self.ends.append([m.task_id, m.id, m.receives, m.attempt, self.now(), outcome, None])
        self.done.append(m.task_id)
        self.acks.append(m)

    def _failed(self, m: Message, exc: BaseException) -> None:
        error, now = f"{type(exc).__name__}: {exc}", self.now()
        final = m.attempt >= self.retry.max_attempts
        outcome = "failed" if final else "error"
        self.counts[outcome] += 1
        self.ends.append([m.task_id, m.id, m.receives, m.attempt, now, outcome, error])
        args = {"error": error, "id": m.task_id}
        if final:
            self.c.execute(self.q["task_failed"], args)
            self.acks.append(m)
        else:
            self.c.execute(self.q["task_error"], args)
            self.retries.append((m, now + self.retry.delay_ms(m.attempt)))

    def _flush(self) -> None:
        if not self.ends:
            return
        rows = {"rows": json.dumps(self.ends), "worker": self.worker, "start": self.start_ms}
        self.c.execute(self.q["execution_insert"], rows)
        self.c.execute(self.q["task_done"], {"ids": self.store.d.ints(self.done)})
        if self.relayed:  # settled on the stream; a retry waits in the outbox for the relay
            for m, at in self.retries:
                self.store._enqueue(self.c, [(m.task_id, m.attempt)], self.now(), at)
        else:
            self.store._settle(self.c, self.acks, self.retries, self.now())


def task_args(t: NewTask) -> dict[str, Any]:
    """``add_task``'s parameters."""
    return {
        "key": t.idempotency_key,
        "handler": t.handler,
        "payload": t.payload,
        "trigger": t.trigger_ms,
        "schedule": t.schedule,
    }


def task_row(t: NewTask) -> tuple[str, str, str, int, str | None]:
    """A task as a positional row (the bulk inserts)."""
    return (t.idempotency_key, t.handler, t.payload, t.trigger_ms, t.schedule)


def chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` at most, never all in memory at once."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def fetch(cursor: Any) -> list[Any]:
    """The rows a statement produced; none for one that produces no rows."""
    return list(cursor.fetchall()) if cursor.description is not None else []


def _lease_state(r: Sequence[Any]) -> rules.LeaseState:
    return rules.LeaseState(holder=r[0], epoch=int(r[1]), expires_ms=int(r[2]))
