"""Handlers registered by name; a worker looks a message's handler up here (never by import path).

A handler is ``fn(ctx, payload) -> bool | None``: it writes through ``ctx.tx``, the worker's
open transaction, so its effect commits together with the execution record and the ack.
Return False for "no effect" (an idempotent duplicate); None or True for "applied".
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from cronlab.exceptions import ConfigError, NotFoundError
from cronlab.ports import Message, NewTask, Tx
from cronlab.runtime.clock import to_datetime, to_ms

Handler = Callable[["Context", dict[str, Any]], "bool | None"]

# Kept with the handler it belongs to; parameters bound. ON CONFLICT DO NOTHING turns a second
# execution into a no-op while the unique key exists (idempotency on).
INVOICE_SQL = (
    "INSERT INTO invoices (customer, period, task_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
)


@dataclass(kw_only=True)
class Context:
    """What a handler knows about its run, and the transaction it writes through."""

    task_id: int
    idempotency_key: str
    scheduled_ms: int
    attempt: int
    now_ms: int
    tx: Tx
    _follow_ups: int = field(default=0, repr=False)

    @property
    def scheduled_for(self) -> datetime:
        """The trigger instant, an aware UTC datetime (computed on demand: it is rarely read)."""
        return to_datetime(self.scheduled_ms)

    def schedule(
        self,
        handler: str,
        payload: dict[str, Any] | None = None,
        *,
        delay: timedelta = timedelta(0),
        at: datetime | None = None,
    ) -> bool:
        """Add a follow-up task in this run's transaction; False if it already existed.

        Its key derives from this task's key, so a duplicate execution adds nothing twice.
        """
        self._follow_ups += 1
        trigger = to_ms(at) if at is not None else self.now_ms + int(delay.total_seconds() * 1000)
        key = f"{self.idempotency_key}/then/{handler}/{self._follow_ups}"
        task = NewTask(
            idempotency_key=key,
            handler=handler,
            trigger_ms=trigger,
            payload=json.dumps(payload or {}),
        )
        return self.tx.add_task(task) > 0


class Registry:
    """Handlers by name."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}

    def handler(self, name: str) -> Callable[[Handler], Handler]:
        """Decorator: ``@registry.handler("invoice")``."""

        def register(fn: Handler) -> Handler:
            if name in self._handlers:
                raise ConfigError(f"handler {name!r} is already registered")
            self._handlers[name] = fn
            return fn

        return register

    def get(self, name: str) -> Handler:
        try:
            return self._handlers[name]
        except KeyError:
            raise NotFoundError(f"no handler named {name!r}") from None

    def names(self) -> list[str]:
        return sorted(self._handlers)

    def runner(self, now: Callable[[], int]) -> Runner:
        """The ``ports.Run`` a worker passes to ``Store.execute``."""
        return Runner(self, now)


class _NoTx:
    """The transaction slot of a prepared context before the store opens the transaction."""

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> int:
        raise RuntimeError("handler ran outside its transaction")

    def add_task(self, task: NewTask) -> int:
        raise RuntimeError("handler ran outside its transaction")


class Runner:
    """``ports.Run``, plus ``prepare``: look up, decode and build the context BEFORE the store
    takes its write lock, so only the handler's own work runs while holding it."""

    def __init__(self, registry: Registry, now: Callable[[], int]) -> None:
        self._registry, self._now = registry, now

    def __call__(self, m: Message, tx: Tx) -> bool:
        return self.prepare(m)(tx)

    def prepare(self, m: Message) -> Callable[[Tx], bool]:
        """The step to run inside the transaction; errors here surface when it runs."""
        try:
            fn = self._registry.get(m.handler)
            payload = json.loads(m.payload)
        except Exception as exc:
            return _raise(exc)
        ctx = Context(
            task_id=m.task_id,
            idempotency_key=m.idempotency_key,
            scheduled_ms=m.trigger_ms,
            attempt=m.attempt,
            now_ms=self._now(),
            tx=_NoTx(),
        )

        def step(tx: Tx) -> bool:
            ctx.tx = tx
            return fn(ctx, payload) is not False

        return step


def _raise(exc: Exception) -> Callable[[Tx], bool]:
    def step(tx: Tx) -> bool:
        raise exc

    return step


registry = Registry()


@registry.handler("invoice")
def invoice(ctx: Context, payload: dict[str, Any]) -> bool:
    """Write one invoice row; False when (customer, period) already has one.

    ``work_ms`` in the payload simulates the billing call's latency (the lab's slow worker).
    """
    if work_ms := int(payload.get("work_ms", 0)):
        time.sleep(work_ms / 1000)
    row = (str(payload["customer"]), str(payload["period"]), ctx.task_id)
    return ctx.tx.execute(INVOICE_SQL, row) > 0


@registry.handler("fail")
def fail(ctx: Context, payload: dict[str, Any]) -> bool:
    """Raise until attempt ``payload["until"]`` (default: always) — for retry demos and tests."""
    until = int(payload.get("until", 1 << 30))
    if ctx.attempt < until:
        raise RuntimeError(
            f"{payload.get('message', 'failing on purpose')} (attempt {ctx.attempt})"
        )
    return True
