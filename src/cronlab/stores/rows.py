"""Stored rows as port values (shared by the SQL stores)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cronlab.ports import Message, Task

TaskRow = Sequence[Any]  # (id, idempotency_key, handler, payload, trigger_ms, attempts)


def task(r: TaskRow, status: str, epoch: int | None) -> Task:
    """One ``(id, key, handler, payload, trigger_ms, attempts)`` row as a ``Task``."""
    return Task(
        id=r[0],
        idempotency_key=r[1],
        handler=r[2],
        payload=r[3],
        trigger_ms=r[4],
        attempts=r[5],
        status=status,
        epoch=epoch,
    )


Retried = tuple[tuple[int, int], Message, int]  # (envelope delivery, message, visible at ms)


def remaining(
    task_ids: Sequence[int], done: Sequence[int], again: Sequence[Retried], key: tuple[int, int]
) -> list[int]:
    """An envelope's task ids once its acked ones (``done``) and its retries are out."""
    gone = set(done) | {m.task_id for k, m, _ in again if k == key}
    return [t for t in task_ids if t not in gone]
