"""What settling a worker's deliveries takes out of each queue envelope (pure: no I/O).

A queue envelope carries up to ``rows.ENVELOPE`` messages and is delivered whole; its
messages are acked or retried one by one. A ``Settlement`` groups them by the delivery they
came in (the envelope and its receive count), which is what a store checks is still current.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter

from cronlab.ports import Message

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
