"""The task rows: inserted PENDING (one, or a million in chunks), read by id or key, counted."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from cronlab.core.chunks import chunks
from cronlab.exceptions import ConflictError, NotFoundError
from cronlab.ports import KEY_TRIES, STATUSES, NewTask, StoredTask
from cronlab.stores.rows import TaskRead
from cronlab.stores.sql.dialect import Conn, TaskRow, task_row
from cronlab.stores.sql.part import Part

CHUNK = 50_000  # tasks per bulk insert


class SqlTasks(Part):
    """The ``tasks`` table: a task is PENDING until dispatched, then DISPATCHED until it is
    DONE, FAILED or SKIPPED; its idempotency key is unique."""

    def get(self, task_id: int) -> StoredTask:
        """One task by id; ``NotFoundError`` when there is none."""
        return self._one("task_get", {"id": task_id}, f"id {task_id}")

    def by_key(self, key: str) -> StoredTask:
        """One task by idempotency key; ``NotFoundError`` when there is none."""
        return self._one("task_by_key", {"key": key}, f"key {key!r}")

    def _one(self, query: str, args: Mapping[str, Any], named: str) -> StoredTask:
        rows = self.named(query, args)
        if not rows:
            raise NotFoundError(f"no task with {named}")
        return TaskRead._make(rows[0]).value()

    def last_error(self, task_id: int) -> str | None:
        """The error a task's newest failed run left (or a skip's reason)."""
        rows = self.named("task_get", {"id": task_id})
        return TaskRead._make(rows[0]).last_error if rows else None

    def add(self, c: Conn, task: NewTask) -> int:
        """Insert ``task`` in ``c``'s transaction; 0 when its key exists already."""
        return int(c.execute(self.queries["add_task"], task._asdict()).rowcount)

    def add_many(
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

    def add_one(self, new: NewTask) -> tuple[bool, StoredTask]:
        """Insert one PENDING task unless its key is taken: (whether it went in, the task that
        holds the key now), read with the insert (``Dialect.add_one``: on PostgreSQL one
        statement, a transaction by itself). On PostgreSQL the holder the insert ran into may
        be deleted (the retention) or not yet visible to the read: the insert is tried again
        (``KEY_TRIES`` times; then ``ConflictError``, nothing written)."""
        row = task_row(new)

        def add(c: Conn) -> tuple[bool, StoredTask]:
            for _ in range(KEY_TRIES):
                found = self.db.add_one(c, row)
                if found is not None:
                    return found[0], TaskRead._make(found[1]).value()
            raise ConflictError(
                f"key {new.idempotency_key!r}: its task was deleted {KEY_TRIES} times while "
                "this insert ran; nothing changed"
            )

        return self.db.at_once(add)

    def _check_taken(self, c: Conn, chunk: Sequence[TaskRow]) -> None:
        """``ConflictError`` for the first row whose key a task of another name or with other
        arguments holds (the rows just inserted hold theirs with the same)."""
        wanted = {key: (name, json.loads(payload)) for key, name, payload, _, _ in chunk}
        found = c.execute(self.queries["tasks_with_keys"], {"keys": self.db.texts(wanted)})
        for key, name, payload in found.fetchall():
            if wanted[key] != (name, json.loads(payload)):
                raise ConflictError(
                    f"key {key!r} is taken by a task for {name} with other arguments: "
                    "nothing changed"
                )

    def next_due_ms(self, after_ms: int) -> int | None:
        """The earliest trigger time of a PENDING task after ``after_ms``, if any."""
        found = self.named("next_due", {"after": after_ms})[0][0]
        return None if found is None else int(found)

    def pending_due(self, now_ms: int) -> int:
        """PENDING tasks whose trigger time has come (``now_ms`` or earlier)."""
        return int(self.named("pending_due", {"now": now_ms})[0][0])

    def counts(self) -> dict[str, int]:
        """Tasks by status, every status present."""
        found = dict(self.named("counts"))
        return {s: int(found.get(s, 0)) for s in STATUSES}
