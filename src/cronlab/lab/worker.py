"""The lab's worker: the engine's, which dies on request right after it claims a batch.

``cronlab chaos kill-worker --mid-batch`` asks it (an event ``kill_request`` naming it, valid
until ``until_ms``): the kill lands where the lesson says — the worker holds a batch it never
acks, which comes back after the visibility timeout (redelivered, each task still run once).
A plain SIGKILL lands wherever the worker is, most often between batches, with nothing held.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Sequence
from typing import Any, cast

from cronlab.ports import Event, Message
from cronlab.runtime.worker import Worker, WorkerConfig

REQUEST = (
    "SELECT at_ms, detail FROM events WHERE kind = 'kill_request' AND holder = ? AND at_ms > ? "
    "ORDER BY at_ms DESC LIMIT 1"
)


class LabWorker(Worker):
    """``die()`` is how it goes (SIGKILL this process; the simulator's kill in its world)."""

    def __init__(self, cfg: WorkerConfig, **parts: Any) -> None:
        super().__init__(cfg, **parts)
        self.requests_seen_ms = self.clock.now_ms()
        self.die: Callable[[], None] = lambda: os.kill(os.getpid(), signal.SIGKILL)

    def claimed(self, messages: Sequence[Message]) -> None:
        store = cast(Any, self.store)  # (the SQL store's query, through a relay too)
        found = store.query(store.own(REQUEST), (self.name, self.requests_seen_ms))
        if not found:
            return
        at, detail = found[0]
        self.requests_seen_ms = int(at)
        now = self.clock.now_ms()
        if now >= int(json.loads(detail).get("until_ms", 0)):
            return  # too late: the chaos command has given up on it
        held = {"held": len(messages), "mid_batch": True}
        self.store.record_event(
            Event(kind="killed_mid_batch", at_ms=now, holder=self.name, detail=held)
        )
        self.die()
