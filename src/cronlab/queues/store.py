"""A queue kept in the store (``ports.QueueTable``): visibility timeout via
``invisible_until_ms``; a claim is one conditional update, so two workers never hold the same
delivery. A message whose worker dies becomes visible again after the timeout (at-least-once).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from contextlib import AbstractContextManager

from cronlab.ports import Clock, Message, QueueTable, Waiter


class StoreQueue:
    """``ports.Queue`` over a store's queue table."""

    def __init__(self, table: QueueTable, clock: Clock) -> None:
        self._table = table
        self._clock = clock

    def claim(self, worker: str, limit: int, visibility_ms: int) -> list[Message]:
        return self._table.queue_claim(worker, limit, visibility_ms, self._clock.now_ms())

    def ack(self, messages: Sequence[Message]) -> int:
        return self._table.queue_ack(messages)

    def depth(self) -> int:
        return self._table.queue_depth()

    def holding(
        self, messages: Sequence[Message], visibility_ms: int
    ) -> AbstractContextManager[None]:
        """Nothing to do: the store's batch transaction holds its messages while it runs (the
        write lock on SQLite, the envelopes' row locks on PostgreSQL)."""
        return contextlib.nullcontext()

    def reconcile(self, now_ms: int, epoch: int) -> int:
        """Enqueue again the leader's DISPATCHED tasks whose message is gone (fenced)."""
        return self._table.reconcile(now_ms, epoch)

    def waiter(self) -> Waiter | None:
        return self._table.waiter("queued")
