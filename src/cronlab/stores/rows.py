"""Stored rows as port values (shared by the SQL stores)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cronlab.ports import Task

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
