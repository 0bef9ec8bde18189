"""Tasks: your functions, registered on an ``App``, deferred from code, run by the workers.

A task is stored by name with its arguments as a JSON object; a worker looks the name up in
the app it imported (``--app module:app``) and calls ``fn(ctx, **arguments)``. Nothing read
from a store is imported, unpickled or evaluated.

``defer`` checks the arguments against the function's signature and JSON before anything is
written; ``defer_many`` streams an iterable in batches, one transaction each, never holding
more than one batch in memory.
"""

from __future__ import annotations

import inspect
import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from cronlab import handlers
from cronlab.core import delays, occurrences
from cronlab.core.chunks import chunks
from cronlab.core.payloads import MAX_KEY, encode
from cronlab.core.policy import from_ms, to_ms
from cronlab.exceptions import ConfigError, ConflictError, TaskArgumentError
from cronlab.ports import KEY_TRIES, NewTask, Tx

if TYPE_CHECKING:
    from cronlab.app import App
    from cronlab.handlers import Context

P = ParamSpec("P")
R = TypeVar("R")
RESERVED = frozenset({"delay", "at", "key"})  # defer()'s own keywords
DEFER_BATCH = 10_000  # tasks per transaction in defer_many
Item = Mapping[str, Any] | tuple[Mapping[str, Any], str | None]


def random_hex() -> str:
    """The random part of a default key (the simulator draws it from its seed instead)."""
    return uuid.uuid4().hex


@dataclass(frozen=True, kw_only=True)
class TaskRef:
    """A deferred task: its row's ``id``, its idempotency ``key`` and when it is ``due``.
    ``added`` is False when a task with that key was there already (then it is that one)."""

    id: int
    key: str
    task: str
    due: datetime
    added: bool


@dataclass(frozen=True, kw_only=True)
class DeferResult:
    """What ``defer_many`` wrote: tasks ``added``, and those whose key was there (``existing``)."""

    added: int
    existing: int


class Signature:
    """Which keyword arguments a task function takes after its ``ctx``."""

    def __init__(self, name: str, fn: Callable[..., Any]) -> None:
        params = list(inspect.signature(fn).parameters.values())
        if not params or params[0].kind not in (
            params[0].POSITIONAL_ONLY,
            params[0].POSITIONAL_OR_KEYWORD,
        ):
            raise ConfigError(f"task {name}: its first parameter must be the Context (ctx)")
        rest = params[1:]
        self.name = name
        self.open = any(p.kind is p.VAR_KEYWORD for p in rest)
        named = [p for p in rest if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if any(p.kind is p.POSITIONAL_ONLY for p in rest):
            raise ConfigError(f"task {name}: its arguments are passed by name; drop the '/'")
        self.names = frozenset(p.name for p in named)
        self.required = frozenset(p.name for p in named if p.default is p.empty)
        clash = sorted(self.names & RESERVED)
        if clash:
            raise ConfigError(
                f"task {name}: parameter {clash[0]!r} is one of defer()'s own keywords "
                f"({', '.join(sorted(RESERVED))}); rename it"
            )

    def check(self, arguments: Mapping[str, Any]) -> None:
        """TaskArgumentError for a missing or unexpected argument."""
        missing = self.required.difference(arguments)
        if missing:
            raise TaskArgumentError(f"{self.name}: missing argument {sorted(missing)[0]!r}")
        if not self.open:
            unknown = set(arguments).difference(self.names)
            if unknown:
                raise TaskArgumentError(f"{self.name}: unexpected argument {sorted(unknown)[0]!r}")


def due_ms(now_ms: int, delay: timedelta | None, at: datetime | None) -> int:
    """When a deferred task is due: now, after ``delay``, or ``at`` (an aware datetime)."""
    if delay is not None and at is not None:
        raise ConfigError("give delay or at, not both")
    if at is not None:
        if not isinstance(at, datetime) or at.tzinfo is None:
            raise ConfigError(f"at must be an aware datetime (with a time zone), got {at!r}")
        due = to_ms(at)
    elif delay is not None:
        if not isinstance(delay, timedelta) or delay < timedelta(0):
            raise ConfigError(f"delay must be a timedelta >= 0, got {delay!r}")
        if delay // timedelta(milliseconds=1) > delays.MAX_DELAY_MS:
            raise ConfigError(f"delay {delay} is longer than a century")
        due = now_ms + delay // timedelta(milliseconds=1)
    else:
        due = now_ms
    if not 0 <= due <= delays.MAX_DUE_MS:
        raise ConfigError(f"due time out of range: {at or delay}")
    return due


class Task(Generic[P, R]):
    """A function registered with ``@app.task``; call it to run it here, ``defer`` it to have
    a worker run it. ``retries``: runs after a failure (None: the worker's ``--max-attempts``);
    ``timeout``: a run that outlasts it fails (its effect undone) and is retried."""

    def __init__(
        self,
        app: App,
        fn: Callable[..., R],
        *,
        name: str,
        retries: int | None,
        timeout: timedelta | None,
    ) -> None:
        if retries is not None and (not isinstance(retries, int) or not 0 <= retries <= 100):
            raise ConfigError(f"task {name}: retries must be 0..100, got {retries!r}")
        if timeout is not None and (
            not isinstance(timeout, timedelta) or not timedelta(0) < timeout <= timedelta(days=1)
        ):
            raise ConfigError(
                f"task {name}: timeout must be a timedelta in (0, 1 day], got {timeout!r}"
            )
        self.app, self.fn, self.name = app, fn, name
        self.retries, self.timeout = retries, timeout
        self.is_async = inspect.iscoroutinefunction(fn)
        self.signature = Signature(name, fn)
        self.__doc__, self.__wrapped__ = fn.__doc__, fn

    def __call__(self, ctx: Context, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(ctx, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<cronlab task {self.name}>"

    def new(self, arguments: Mapping[str, Any], trigger_ms: int, key: str | None) -> NewTask:
        """The task row for these arguments, checked; a fresh key unless one is given."""
        self.signature.check(arguments)
        return NewTask(
            idempotency_key=key if key is not None else f"{self.name}:{random_hex()}",
            task=self.name,
            trigger_ms=trigger_ms,
            payload=encode(self.name, arguments),
        )

    def defer(
        self,
        *,
        delay: timedelta | None = None,
        at: datetime | None = None,
        key: str | None = None,
        **arguments: Any,
    ) -> TaskRef:
        """Store one run of this task, due now, after ``delay`` or ``at``. With ``key``, a
        second defer under it is a no-op that returns the first (the same arguments), or a
        ``ConflictError`` (other arguments); nothing is written for a bad argument. Called
        from inside a running task of the same app, it writes through that run's
        transaction: it commits with the run, or not at all (``_defer_in_run``)."""
        if key is not None:
            check_key(key)
        new = self.new(arguments, due_ms(self.app.clock.now_ms(), delay, at), key)
        tx = handlers.running(self.app.registry)
        if tx is not None:
            return _defer_in_run(tx, new, key is not None)
        added, stored = self.app.defer_store().add_task(new)
        if not added and (stored.task, json.loads(stored.payload)) != (
            new.task,
            json.loads(new.payload),
        ):
            raise ConflictError(
                f"key {new.idempotency_key!r} is taken by a task for {stored.task} with "
                "other arguments: nothing changed"
            )
        return TaskRef(
            id=stored.id,
            key=stored.idempotency_key,
            task=stored.task,
            due=from_ms(stored.trigger_ms),
            added=added,
        )

    async def defer_async(
        self,
        *,
        delay: timedelta | None = None,
        at: datetime | None = None,
        key: str | None = None,
        **arguments: Any,
    ) -> TaskRef:
        """``defer`` from async code: the store's write runs in a thread, not on the loop."""
        import asyncio  # (on first use: importing cronlab does not load it)

        return await asyncio.to_thread(lambda: self.defer(delay=delay, at=at, key=key, **arguments))

    def defer_many(
        self,
        items: Iterable[Item],
        *,
        delay: timedelta | None = None,
        at: datetime | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> DeferResult:
        """Store a run per item — its arguments, or ``(arguments, key)`` — all due at the same
        time. Streamed in batches of ``DEFER_BATCH``, one transaction each (a batch is written
        whole or not at all; a bad item stops the call before its batch is written). A key
        that is there already is counted in ``existing`` and left as it is; one held by other
        arguments is a ``ConflictError``, as ``defer``'s, and its batch is not written."""
        due = due_ms(self.app.clock.now_ms(), delay, at)
        tx = handlers.running(self.app.registry)
        if tx is not None:  # inside a run: with it, in its transaction
            rows = list(self._rows(items, due))
            added = sum(tx.add_task(row) != 0 for row in rows)
            return DeferResult(added=added, existing=len(rows) - added)
        store = self.app.defer_store()
        added = total = 0
        for batch in chunks(self._rows(items, due), DEFER_BATCH):
            added += store.add_tasks(batch, conflicts=True)
            total += len(batch)
            if progress is not None:
                progress(len(batch))
        return DeferResult(added=added, existing=total - added)

    def _rows(self, items: Iterable[Item], due: int) -> Iterator[NewTask]:
        prefix, check, name = f"{self.name}:{random_hex()}:", self.signature.check, self.name
        for i, item in enumerate(items):
            arguments, key = item if isinstance(item, tuple) else (item, None)
            if not isinstance(arguments, Mapping):
                raise TaskArgumentError(f"{name}: item {i} is not a mapping of arguments")
            check(arguments)
            if key is not None:
                check_key(key)
            yield NewTask(
                idempotency_key=key if key is not None else f"{prefix}{i}",
                task=name,
                trigger_ms=due,
                payload=encode(name, arguments),
            )


def _defer_in_run(tx: Tx, new: NewTask, keyed: bool) -> TaskRef:
    """``Task.defer`` inside a run: the row goes into the run's transaction. A keyed defer
    whose key is taken by other arguments is a ``ConflictError`` there too (the run fails,
    its writes undone). An async run's writes wait until it returns: its id is -1 (the
    DB-API's "not known yet"), ``added`` True."""
    added = tx.add_task(new) != 0
    if isinstance(tx, handlers.QueuedTx):
        due = from_ms(new.trigger_ms)
        return TaskRef(id=-1, key=new.idempotency_key, task=new.task, due=due, added=True)
    held = tx.holder(new.idempotency_key)
    for _ in range(KEY_TRIES):  # (the holder the insert ran into was deleted: the key is free)
        if held:
            break
        added = tx.add_task(new) != 0
        held = tx.holder(new.idempotency_key)
    if not held:
        raise ConflictError(f"key {new.idempotency_key!r}: its task was deleted while deferred")
    task_id, handler, payload, trigger_ms = held
    if (
        not added
        and keyed
        and (handler, json.loads(payload)) != (new.task, json.loads(new.payload))
    ):
        raise ConflictError(
            f"key {new.idempotency_key!r} is taken by a task for {handler} with other "
            "arguments: nothing changed"
        )
    due = from_ms(trigger_ms)
    return TaskRef(id=int(task_id), key=new.idempotency_key, task=handler, due=due, added=added)


def check_key(key: object) -> None:
    """ConfigError unless ``key`` is an idempotency key: 1-500 characters, no NUL (which
    PostgreSQL's text refuses), not in the engine's own namespaces (``schedule:``,
    ``backfill:``, ``trigger:``)."""
    if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY or "\x00" in key:
        shown = key if not isinstance(key, str) or len(key) <= 60 else key[:60] + "…"
        raise ConfigError(
            f"an idempotency key is a string of 1-500 characters without NUL, got {shown!r}"
        )
    if occurrences.is_reserved(key):
        raise ConfigError(
            f"idempotency key {key[:60]!r}: keys starting {', '.join(occurrences.RESERVED)} "
            "are the engine's own (a schedule's occurrences); choose another"
        )
