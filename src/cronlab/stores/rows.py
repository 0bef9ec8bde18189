"""Stored rows as port values (shared by the SQL stores)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from cronlab.ports import Message, Task

TaskRow = Sequence[Any]  # (id, idempotency_key, handler, payload, trigger_ms, attempts)


def by_column(columns: Sequence[str], row: Sequence[Any]) -> dict[str, Any]:
    """``row``'s values by name: ``columns`` names them, in the query's order (a value's
    fields where the names are its fields)."""
    return dict(zip(columns, row, strict=True))


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


# Tasks per queue envelope: a claim, an ack or a retry writes one row per envelope.
ENVELOPE = 500
# An envelope as an outbox hands it to a queue elsewhere: (id, task ids, attempt).
Envelope = tuple[int, Sequence[int], int]

Delivery = tuple[int, int]  # an envelope and its receive count
DELIVERY = itemgetter(0, 6)  # a Message's (id, receives): the delivery it came in


@dataclass(frozen=True)
class Settlement:
    """Acked messages, and retried ones with the instant their retry is due, grouped by the
    envelope delivery they came in: what a store takes out of each envelope."""

    acks: Sequence[Message]
    retries: Sequence[tuple[Delivery, Message, int]]
    acked: Counter[Delivery]  # messages acked, per delivery
    removed: Counter[Delivery]  # messages taken out (acked and retried), per delivery

    @classmethod
    def of(cls, acks: Sequence[Message], retries: Sequence[tuple[Message, int]]) -> Settlement:
        acked = Counter(map(DELIVERY, acks))  # without a Python loop per message
        tagged = [(DELIVERY(m), m, at) for m, at in retries]
        return cls(acks, tagged, acked, acked + Counter(k for k, _, _ in tagged))

    def retried(self, key: Delivery) -> list[tuple[Message, int]]:
        """The retries taken out of ``key``'s envelope, with the instant each is due."""
        return [(m, at) for k, m, at in self.retries if k == key]

    def left(self, key: Delivery, task_ids: Sequence[int]) -> list[int]:
        """``key``'s envelope's task ids once its acked and retried messages are out."""
        gone = {m.task_id for m in self.acks if DELIVERY(m) == key}
        gone |= {m.task_id for m, _ in self.retried(key)}
        return [t for t in task_ids if t not in gone]
