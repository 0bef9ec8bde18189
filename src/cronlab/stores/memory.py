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
from cronlab.exceptions import ConfigError, FencedError
from cronlab.ports import STATUSES, Event, Message, NewTask, ProcessInfo, Retry, Run, Task


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

    # -- tasks ------------------------------------------------------------------------------

    def add_tasks(self, tasks: Iterable[NewTask]) -> int:
        with self._lock:
            return sum(self._add(t) for t in tasks)

    def _add(self, t: NewTask) -> int:
        if t.idempotency_key in self._keys:
            return 0
        tid = len(self._rows) + 1
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

    def dispatch_due(self, now_ms: int, limit: int, epoch: int) -> list[Task]:
        with self._lock:
            if epoch < self._max_epoch or not rules.holds(self._lease, epoch, now_ms):
                raise FencedError(epoch, self._lease.epoch)
            self._max_epoch = epoch
            claimed = []
            for row in self._due(now_ms, limit):
                row.task = replace(row.task, status="DISPATCHED", epoch=epoch)
                row.dispatched_ms = now_ms
                claimed.append(row.task)
            self._enqueue(claimed, now_ms)
            return claimed

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

    def read_due(self, now_ms: int, limit: int, copied_since_ms: int | None = None) -> list[Task]:
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
            q.message = replace(q.message, attempt=m.attempt + 1)
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
                q.message = replace(q.message, receives=q.message.receives + 1)
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
