"""A queue kept in the store (``ports.QueueTable``): visibility timeout via
``invisible_until_ms``; a claim is one conditional update, so two workers never hold the same
delivery. A message whose worker dies becomes visible again after the timeout (at-least-once).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

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

    @contextlib.contextmanager
    def holding(
        self, groups: Sequence[Sequence[Message]], visibility_ms: int
    ) -> Iterator[Sequence[Sequence[Message]]]:
        """The first group, and the groups sharing an envelope with it; the others are given
        back at once (``queue_release``). A store's transaction holds only its own messages
        (the write lock on SQLite, the envelopes' row locks on PostgreSQL): a group queued
        behind a handler that outlasts the visibility timeout would be received again by
        another worker and charged an attempt it never started (PostgreSQL seeds 510, 1017
        and 12941 at 438121c). The first group is the one holding the oldest envelope, so
        what is given back is younger and nothing waits behind it for ever."""
        first = {m.id for m in groups[0]} if groups else set()
        kept = [g for g in groups if any(m.id in first for m in g)]
        back = [m for g in groups if not any(m.id in first for m in g) for m in g]
        if back:
            self._table.queue_release(back)
        yield kept

    @property
    def in_store(self) -> bool:
        return True  # a batch's transaction settles its messages in the table

    def committed(self, messages: Sequence[Message]) -> None:
        """Nothing to do: the batch's transaction settled them."""

    def relay(self) -> int:
        return 0  # the dispatch's own transaction enqueued them

    def reconcile(self, now_ms: int, epoch: int) -> int:
        """Enqueue again the leader's DISPATCHED tasks whose message is gone (fenced)."""
        return self._table.reconcile(now_ms, epoch)

    def waiter(self) -> Waiter | None:
        return self._table.waiter("queued")
