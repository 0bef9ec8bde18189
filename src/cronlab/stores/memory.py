"""The in-memory store: the same contract as SQLite, for unit and contract tests.

One lock makes every method atomic (the equivalent of one transaction). Handlers get a
transaction that can add follow-up tasks but has no SQL.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

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
)
from cronlab.stores import schedules


@dataclass(kw_only=True)
class _Row:
    task: Task
    schedule: str | None
    dispatched_ms: int | None = None
    last_error: str | None = None


@dataclass(kw_only=True)
class _Queued:
    message: Message
    invisible_until_ms: int = 0


@dataclass(frozen=True, kw_only=True)
class Execution:
    """A recorded run of a message (the SQLite store keeps the same in ``executions``)."""

    id: int
    task_id: int
    message_id: int
    worker: str
    start_ms: int
    end_ms: int | None = None
    outcome: str = "running"
    error: str | None = None


class MemoryTx:
    """A handler's view of the batch: follow-ups are kept until the run succeeds."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self.added: list[NewTask] = []

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> int:
        raise ConfigError("the memory store runs no SQL; use a SQL store for this handler")

    def add_task(self, task: NewTask) -> int:
        if task.idempotency_key in self._store._keys or task in self.added:
            return 0
        self.added.append(task)
        return 1


class MemoryStore:
    """``ports.Store`` + ``LeaseTable`` + ``QueueTable`` in process memory."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._rows: dict[int, _Row] = {}
        self._keys: dict[str, int] = {}
        self._lease = rules.FREE
        self._max_epoch = 0
        self._queue: dict[int, _Queued] = {}
        self._next_message = 1
        self.executions: list[Execution] = []
        self._processes: dict[tuple[str, int], ProcessInfo] = {}
        self._events: list[Event] = []
        self.samples: list[tuple[int, int]] = []
        self.dispatched_total = 0
        self._schedules: dict[str, ScheduleInfo] = {}
        self._last_task_id = 0  # ids are never reused, even after a waiting occurrence is dropped

    # -- tasks ------------------------------------------------------------------------------

    def add_tasks(self, tasks: Iterable[NewTask]) -> int:
        with self._lock:
            return sum(self._add(t) for t in tasks)

    def _add(self, t: NewTask) -> int:
        if t.idempotency_key in self._keys:
            return 0
        self._last_task_id += 1
        tid = self._last_task_id
        task = Task(
            id=tid,
            idempotency_key=t.idempotency_key,
            handler=t.handler,
            payload=t.payload,
            trigger_ms=t.trigger_ms,
        )
        self._rows[tid] = _Row(task=task, schedule=t.schedule)
        self._keys[t.idempotency_key] = tid
        return 1

    def _due(self, now_ms: int, limit: int) -> list[_Row]:
        due = [
            r
            for r in self._rows.values()
            if r.task.status == "PENDING" and r.task.trigger_ms <= now_ms
        ]
        return sorted(due, key=lambda r: (r.task.trigger_ms, r.task.id))[:limit]

    def dispatch_due(self, now_ms: int, limit: int, epoch: int) -> int:
        with self._lock:
            if epoch < self._max_epoch or not rules.holds(self._lease, epoch, now_ms):
                raise FencedError(epoch, self._lease.epoch)
            self._max_epoch = epoch
            claimed = self._plan_schedules(self._claim(now_ms, limit, epoch), now_ms, limit, epoch)
            self._enqueue(claimed, now_ms)
            return len(claimed)

    def _claim(self, now_ms: int, limit: int, epoch: int) -> list[Task]:
        claimed = []
        for row in self._due(now_ms, limit):
            row.task = replace(row.task, status="DISPATCHED", epoch=epoch)
            row.dispatched_ms = now_ms
            claimed.append(row.task)
        return claimed

    def _plan_schedules(self, batch: list[Task], now_ms: int, limit: int, epoch: int) -> list[Task]:
        """Plan claimed schedule occurrences; claim the caught-up ones too (see SQLite's)."""
        runs: list[Task] = []
        claimed = 0
        view = _MemoryRows(self)
        while batch:
            pairs = [(t.id, t.idempotency_key) for t in batch]
            skipped, due_added = schedules.plan_claimed(view, pairs, now_ms)
            runs += [t for t in batch if t.id not in skipped]
            claimed += len(batch)
            more = due_added and limit > claimed
            batch = self._claim(now_ms, limit - claimed, epoch) if more else []
        return runs

    def _enqueue(self, tasks: Sequence[Task], now_ms: int) -> None:
        for t in tasks:
            m = Message(
                id=self._next_message,
                task_id=t.id,
                idempotency_key=t.idempotency_key,
                handler=t.handler,
                payload=t.payload,
                trigger_ms=t.trigger_ms,
                receives=0,
                attempt=t.attempts + 1,
            )
            self._queue[m.id] = _Queued(message=m)
            self._next_message += 1
        self.dispatched_total += len(tasks)

    def read_due(
        self, now_ms: int, limit: int, copied_since_ms: int | None = None
    ) -> Sequence[Task]:
        with self._lock:
            due = [r.task for r in self._due(now_ms, limit)]
            if copied_since_ms is None:
                return due
            return due + [
                r.task
                for r in self._rows.values()
                if r.task.epoch is None
                and r.dispatched_ms is not None
                and r.dispatched_ms >= copied_since_ms
                and r.task.trigger_ms <= now_ms
            ]

    def enqueue_copies(self, tasks: Sequence[Task], now_ms: int) -> int:
        with self._lock:
            self._enqueue(tasks, now_ms)
            for t in tasks:
                row = self._rows[t.id]
                if row.task.status == "PENDING":
                    row.task = replace(row.task, status="DISPATCHED")
                    row.dispatched_ms = now_ms
            return len(tasks)

    def mark_missed(self, before_ms: int, now_ms: int) -> int:
        with self._lock:
            rows = [
                r
                for r in self._rows.values()
                if r.task.status == "PENDING" and r.task.trigger_ms < before_ms
            ]
            for r in rows:
                r.task = replace(r.task, status="MISSED")
            return len(rows)

    def counts(self) -> dict[str, int]:
        with self._lock:
            found = {s: 0 for s in STATUSES}
            for r in self._rows.values():
                found[r.task.status] += 1
            return found

    def task(self, task_id: int) -> Task:
        """One task by id (tests)."""
        with self._lock:
            return self._rows[task_id].task

    def last_error(self, task_id: int) -> str | None:
        with self._lock:
            return self._rows[task_id].last_error

    # -- executions -------------------------------------------------------------------------

    def execute(
        self,
        worker: str,
        messages: Sequence[Message],
        run: Run,
        retry: Retry,
        now: Callable[[], int],
    ) -> dict[str, int]:
        counts = {"ok": 0, "noop": 0, "error": 0, "failed": 0}
        with self._lock:
            for m in messages:
                outcome = self._run_one(worker, m, run, retry, now)
                counts[outcome] += 1
        return counts

    def _run_one(
        self, worker: str, m: Message, run: Run, retry: Retry, now: Callable[[], int]
    ) -> str:
        start = now()
        tx = MemoryTx(self)
        try:
            outcome, error = ("ok" if run(m, tx) else "noop"), None
        except Exception as exc:
            outcome, error = "error", f"{type(exc).__name__}: {exc}"
        self.executions.append(
            Execution(
                id=len(self.executions) + 1,
                task_id=m.task_id,
                message_id=m.id,
                worker=worker,
                start_ms=start,
                end_ms=now(),
                outcome=outcome,
                error=error,
            )
        )
        return self._settle(m, outcome, error, tx, retry, now())

    def _settle(
        self, m: Message, outcome: str, error: str | None, tx: MemoryTx, retry: Retry, now_ms: int
    ) -> str:
        row = self._rows[m.task_id]
        attempts = row.task.attempts + 1
        if error is None:
            self.add_tasks(tx.added)
            row.task = replace(row.task, status="DONE", attempts=attempts)
            self._ack(m)
            return outcome
        row.last_error = error
        if m.attempt >= retry.max_attempts:
            row.task = replace(row.task, status="FAILED", attempts=attempts)
            self._ack(m)
            self.executions[-1] = replace(self.executions[-1], outcome="failed")
            return "failed"
        row.task = replace(row.task, attempts=attempts)
        q = self._queue.get(m.id)
        if q is not None and q.message.receives == m.receives:
            q.message = q.message._replace(attempt=m.attempt + 1)
            q.invisible_until_ms = now_ms + retry.delay_ms(m.attempt)
        return "error"

    # -- lease row --------------------------------------------------------------------------

    def lease_cas(self, owner: str, now_ms: int, ttl_ms: int) -> rules.LeaseState | None:
        with self._lock:
            new = rules.acquire_or_renew(self._lease, owner, now_ms, ttl_ms)
            if new is not None:
                self._lease = new
            return new

    def lease_release(self, owner: str) -> None:
        with self._lock:
            self._lease = rules.release(self._lease, owner)

    def lease_read(self) -> rules.LeaseState:
        with self._lock:
            return self._lease

    # -- queue ------------------------------------------------------------------------------

    def queue_claim(
        self, worker: str, limit: int, visibility_ms: int, now_ms: int
    ) -> list[Message]:
        with self._lock:
            visible = [q for q in self._queue.values() if q.invisible_until_ms <= now_ms]
            claimed = []
            for q in visible[:limit]:
                q.message = q.message._replace(receives=q.message.receives + 1)
                q.invisible_until_ms = now_ms + visibility_ms
                claimed.append(q.message)
            return claimed

    def queue_ack(self, messages: Sequence[Message]) -> int:
        with self._lock:
            return sum(self._ack(m) for m in messages)

    def _ack(self, m: Message) -> int:
        q = self._queue.get(m.id)
        if q is None or q.message.receives != m.receives:
            return 0
        del self._queue[m.id]
        return 1

    def queue_depth(self) -> int:
        with self._lock:
            return len(self._queue)

    # -- schedules (ports.ScheduleStore) ----------------------------------------------------

    def put_schedule(self, schedule: Schedule, now_ms: int, *, replace: bool) -> bool:
        with self._lock:
            stored = self._schedules.get(schedule.name)
            if stored is not None and not replace:
                raise ConflictError(f"a schedule named {schedule.name!r} already exists")
            if stored is not None and schedules.same_definition(stored.schedule, schedule):
                return False
            if stored is not None:
                schedule = _replace(schedule, paused=stored.schedule.paused)
            info = stored or ScheduleInfo(schedule=schedule)
            self._schedules[schedule.name] = _replace(info, schedule=schedule)
            self._rematerialise(schedule.name, now_ms)
            return True

    def get_schedule(self, name: str) -> ScheduleInfo:
        with self._lock:
            info = self._must_exist(name)
            done = [r.task for r in self._rows.values() if r.schedule == name]
            done = [t for t in done if t.status != "PENDING"]
            last = max(done, key=lambda t: (t.trigger_ms, t.id), default=None)
            return _replace(info, last_outcome=last.status if last else None)

    def list_schedules(self) -> list[ScheduleInfo]:
        with self._lock:
            return [self.get_schedule(n) for n in sorted(self._schedules)]

    def pause_schedule(self, name: str) -> bool:
        return self._set_paused(name, True, 0)

    def resume_schedule(self, name: str, now_ms: int) -> bool:
        return self._set_paused(name, False, now_ms)

    def remove_schedule(self, name: str) -> None:
        with self._lock:
            self._must_exist(name)
            self._drop_pending(name)
            del self._schedules[name]

    def trigger_schedule(self, name: str, now_ms: int) -> str:
        with self._lock:
            task = schedules.triggered(self._must_exist(name).schedule, now_ms)
            self._add(task)
            return task.idempotency_key

    def _set_paused(self, name: str, paused: bool, now_ms: int) -> bool:
        with self._lock:
            info = self._must_exist(name)
            if info.schedule.paused == paused:
                return False
            self._schedules[name] = _replace(info, schedule=_replace(info.schedule, paused=paused))
            self._rematerialise(name, now_ms)
            return True

    def _must_exist(self, name: str) -> ScheduleInfo:
        info = self._schedules.get(name)
        if info is None:
            raise NotFoundError(f"no schedule named {name!r}")
        return info

    def _rematerialise(self, name: str, now_ms: int) -> None:
        """Replace the waiting occurrence by ``next_fire(now)`` (none while paused)."""
        self._drop_pending(name)
        info = self._schedules[name]
        next_ms = None if info.schedule.paused else policy.next_fire(info.schedule, now_ms)
        if next_ms is not None:
            self._add(schedules.occurrence(info.schedule, next_ms))
        self._schedules[name] = _replace(info, next_fire_ms=next_ms)

    def _drop_pending(self, name: str) -> None:
        for tid, r in list(self._rows.items()):
            key = r.task.idempotency_key
            waiting = r.task.status == "PENDING" and key.startswith(schedules.OCCURRENCE_PREFIX)
            if r.schedule == name and waiting:
                del self._rows[tid], self._keys[key]

    # -- processes, events, samples ---------------------------------------------------------

    def register_process(self, info: ProcessInfo) -> None:
        with self._lock:
            self._processes[(info.role, info.index)] = info

    def process_exited(self, role: str, index: int, pid: int, now_ms: int) -> None:
        with self._lock:
            info = self._processes.get((role, index))
            if info is not None and info.pid == pid:
                self._processes[(role, index)] = replace(info, exited_ms=now_ms)

    def processes(self) -> list[ProcessInfo]:
        with self._lock:
            return [self._processes[k] for k in sorted(self._processes)]

    def record_event(self, event: Event) -> None:
        with self._lock:
            self._events.append(event)

    def events(self) -> list[Event]:
        with self._lock:
            return sorted(self._events, key=lambda e: e.at_ms)

    def record_sample(self, now_ms: int, depth: int) -> None:
        with self._lock:
            self.samples.append((now_ms, depth))


_replace = replace


class _MemoryRows:
    """``schedules.Rows`` over the store (its lock is held by ``dispatch_due``)."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def schedule_info(self, name: str) -> ScheduleInfo | None:
        return self.store._schedules.get(name)

    def running_before(self, name: str, fire_ms: int) -> bool:
        return any(
            r.schedule == name and r.task.status == "DISPATCHED" and r.task.trigger_ms < fire_ms
            for r in self.store._rows.values()
        )

    def add_task(self, task: NewTask) -> int:
        return self.store._add(task)

    def skip(self, task_id: int, reason: str) -> None:
        row = self.store._rows[task_id]
        row.task = replace(row.task, status="SKIPPED")
        row.last_error = reason

    def fired(self, name: str, fire_ms: int, next_fire_ms: int | None, reason: str | None) -> None:
        info = self.store._schedules[name]
        last = max(fire_ms, info.last_fire_ms or fire_ms)
        self.store._schedules[name] = replace(
            info,
            last_fire_ms=last,
            next_fire_ms=next_fire_ms,
            last_reason=reason or info.last_reason,
        )
