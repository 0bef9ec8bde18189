"""Handlers registered by name; a worker looks a message's handler up here (never by import path).

An app registers its own (``cronlab.App``: ``@app.task`` registers ``fn(ctx, **arguments)``
under the task's name); the engine has none built in.

A handler is ``fn(ctx, payload) -> bool | None``: it writes through ``ctx.tx``, the worker's
open transaction, so its effect commits together with the execution record and the ack.
Return False for "no effect" (an idempotent duplicate); None or True for "applied". An
``async`` handler runs on the worker's event loop, many at once (``concurrency``); its
``ctx.tx`` writes are queued and run in the same transaction once it returns (``QueuedTx``).
A handler may have its own attempt limit and a timeout: a run past it fails, its effect undone.

A handler may also have a batch form, ``fn(items, tx) -> list[bool]`` over ``(ctx, payload)``
pairs (``@registry.batch_handler(name)``): same semantics, one answer per item, but it can
write a whole worker batch in one statement. The single form stays the reference: a store
falls back to it, one savepoint per message, when a batch raises.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import inspect
import json
import sys
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from cronlab import deadlines
from cronlab.core import payloads
from cronlab.core.policy import from_ms, to_ms
from cronlab.exceptions import ConfigError, NotFoundError, TaskArgumentError, TaskTimeout
from cronlab.ports import Message, NewTask, Retry, Tx

if TYPE_CHECKING:
    import asyncio

    from cronlab.tasks import Task

Handler = Callable[["Context", dict[str, Any]], "bool | Awaitable[bool | None] | None"]
Item = tuple["Context", dict[str, Any]]
BatchHandler = Callable[[Sequence[Item], Tx], list[bool]]
BatchStep = Callable[[Tx], list[bool]]
# A batch form's work that needs no transaction, done before the store takes its write lock:
# ``prepare(items, dialect) -> step(tx)``; ``dialect`` is the store's SQL flavour, if known.
BatchPrepare = Callable[[Sequence[Item], "str | None"], BatchStep]
CONCURRENCY = 100  # async handlers a worker runs at once
# The run under way in this thread (or asyncio task): its registry and the transaction it
# writes through. ``Task.defer`` called from inside a run writes there (``running``).
_RUN: contextvars.ContextVar[tuple[Registry, Tx] | None] = contextvars.ContextVar(
    "cronlab_run", default=None
)


def running(registry: Registry) -> Tx | None:
    """The transaction of the run of one of ``registry``'s handlers under way here, if any:
    a ``Task.defer`` from inside it commits with that run, or not at all."""
    run = _RUN.get()
    return run[1] if run is not None and run[0] is registry else None


@contextlib.contextmanager
def _in_run(registry: Registry, tx: Tx) -> Iterator[None]:
    token = _RUN.set((registry, tx))
    try:
        yield
    finally:
        _RUN.reset(token)


class QueuedTx:
    """An async handler's ``ctx.tx``: while it runs (others run at the same time, on the same
    connection) its writes queue up; once it returns they run, in order, in its savepoint.
    ``execute`` and ``add_task`` return -1, the DB-API's "not known yet"; ``rows`` refuses
    (read through a connection of your own)."""

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect
        self.writes: list[NewTask | tuple[str, Sequence[Any] | Mapping[str, Any]]] = []

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> int:
        self.writes.append((sql, params))
        return -1

    def rows(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        raise RuntimeError(
            "ctx.tx.rows() is not available to an async task: its writes are queued and run "
            "when it returns; read through a connection of your own"
        )

    def add_task(self, task: NewTask) -> int:
        self.writes.append(task)
        return -1

    def holder(self, key: str) -> tuple[int, str, str, int] | None:
        raise RuntimeError("an async task's ctx.tx reads nothing: its writes are queued")

    def apply(self, tx: Tx) -> bool:
        """Run the queued writes through ``tx``, in order."""
        for write in self.writes:
            if isinstance(write, NewTask):
                tx.add_task(write)
            else:
                tx.execute(*write)
        return True


STOPS = (SystemExit, KeyboardInterrupt)


def handler_failure(exc: BaseException) -> bool:
    """True for what a handler's own run can raise and fail by: any ``Exception``, and the
    BaseExceptions a handler's code raises (``asyncio.CancelledError`` from its awaits,
    ``SystemExit``, ``KeyboardInterrupt``). Anything else (a ``GeneratorExit``, the
    simulator's ``Killed``) is the process's, not the run's."""
    if isinstance(exc, (Exception, *STOPS)):
        return True
    aio = sys.modules.get("asyncio")  # (no CancelledError exists before asyncio is loaded)
    return aio is not None and isinstance(exc, aio.CancelledError)


@dataclass(frozen=True, kw_only=True)
class Options:
    """How a worker runs one handler: ``max_attempts`` (None: the worker's), ``timeout_ms``."""

    max_attempts: int | None = None
    timeout_ms: int | None = None
    is_async: bool = False


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
        return from_ms(self.scheduled_ms)

    def defer(
        self,
        task: str | Task[..., Any],
        arguments: Mapping[str, Any] | None = None,
        *,
        delay: timedelta = timedelta(0),
        at: datetime | None = None,
    ) -> bool:
        """Defer a follow-up of ``task`` (a ``Task``, or a handler's name) with ``arguments``,
        due after ``delay`` or ``at``, in this run's transaction: it commits with this run, or
        not at all. False if it already existed (an async task's is queued: True). The
        arguments must be JSON, as ``Task.defer``'s (``TaskArgumentError``, nothing added).

        Its key derives from this task's key, so a duplicate execution adds nothing twice.
        """
        self._follow_ups += 1
        trigger = to_ms(at) if at is not None else self.now_ms + delay // timedelta(milliseconds=1)
        name = task if isinstance(task, str) else task.name
        key = payloads.follow_up_key(self.idempotency_key, name, self._follow_ups)
        if isinstance(task, str):
            if arguments is not None and not isinstance(arguments, Mapping):
                raise TaskArgumentError(
                    f"{task}: arguments must be a mapping, not {type(arguments).__name__}"
                )
            new = NewTask(
                idempotency_key=key,
                task=task,
                trigger_ms=trigger,
                payload=payloads.encode(task, arguments or {}),
            )
        else:
            new = task.new(arguments or {}, trigger, key)
        return self.tx.add_task(new) != 0


class Registry:
    """Handlers by name."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}
        self._options: dict[str, Options] = {}
        self._batch: dict[str, BatchHandler] = {}
        self._prepare: dict[str, BatchPrepare] = {}

    def handler(self, name: str, options: Options | None = None) -> Callable[[Handler], Handler]:
        """Decorator: ``@registry.handler("invoice")``; an async def is marked as such."""

        def register(fn: Handler) -> Handler:
            if name in self._handlers:
                raise ConfigError(f"handler {name!r} is already registered")
            found = options or Options()
            if inspect.iscoroutinefunction(fn) and not found.is_async:
                found = dataclasses.replace(found, is_async=True)
            self._handlers[name] = fn
            self._options[name] = found
            return fn

        return register

    def options(self, name: str) -> Options:
        """How ``name`` runs (defaults for a name not registered)."""
        return self._options.get(name) or Options()

    def batch_handler(
        self, name: str, *, prepare: BatchPrepare | None = None
    ) -> Callable[[BatchHandler], BatchHandler]:
        """Decorator: the batch form of the already registered handler ``name``. With
        ``prepare``, a worker runs that part before its store takes the write lock; it must
        do what the batch form does (the form stays the reference)."""

        def register(fn: BatchHandler) -> BatchHandler:
            self.get(name)  # the single form is the fallback: it must exist
            if name in self._batch:
                raise ConfigError(f"batch handler {name!r} is already registered")
            self._batch[name] = fn
            if prepare is not None:
                self._prepare[name] = prepare
            return fn

        return register

    def get_batch(self, name: str) -> BatchHandler | None:
        """The batch form of ``name``, or None when it has none."""
        return self._batch.get(name)

    def batch_step(self, name: str, items: Sequence[Item], dialect: str | None) -> BatchStep:
        """The step running ``name``'s batch form on ``items``, prepared when it can be."""
        prepare = self._prepare.get(name)
        if prepare is not None:
            return prepare(items, dialect)
        fn = self._batch[name]
        return lambda tx: fn(items, tx)

    def get(self, name: str) -> Handler:
        try:
            return self._handlers[name]
        except KeyError:
            raise NotFoundError(f"no handler named {name!r}") from None

    def names(self) -> list[str]:
        return sorted(self._handlers)

    def runner(self, now: Callable[[], int], concurrency: int = CONCURRENCY) -> Runner:
        """The ``ports.Run`` a worker passes to ``execution.execute``."""
        return Runner(self, now, concurrency)


class _NoTx:
    """The transaction slot of a prepared context before the store opens the transaction."""

    dialect = ""

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> int:
        raise RuntimeError("handler ran outside its transaction")

    def rows(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        raise RuntimeError("handler ran outside its transaction")

    def add_task(self, task: NewTask) -> int:
        raise RuntimeError("handler ran outside its transaction")

    def holder(self, key: str) -> tuple[int, str, str, int] | None:
        raise RuntimeError("handler ran outside its transaction")


class AsyncStep:
    """A prepared async run: ``start(tx)`` is its coroutine (``Runner.gather`` runs many at
    once); calling the step runs it alone, to its end."""

    def __init__(self, runner: Runner, start: Callable[[Tx], Awaitable[bool]]) -> None:
        self._runner, self.start = runner, start

    def __call__(self, tx: Tx) -> bool:
        return bool(self._runner._await(self.start(tx)))


class Runner:
    """``ports.Run``, plus ``prepare``: look up, decode and build the context BEFORE the store
    takes its write lock, so only the handler's own work runs while holding it."""

    def __init__(
        self, registry: Registry, now: Callable[[], int], concurrency: int = CONCURRENCY
    ) -> None:
        self._registry, self._now, self.concurrency = registry, now, concurrency
        self._event_loop: asyncio.AbstractEventLoop | None = None

    def __call__(self, m: Message, tx: Tx) -> bool:
        return self.prepare(m)(tx)

    def retry(self, handler: str, default: Retry) -> Retry:
        """The retry policy of ``handler``'s runs: the worker's, with its own attempt limit."""
        attempts = self._registry.options(handler).max_attempts
        return default if attempts is None else dataclasses.replace(default, max_attempts=attempts)

    def prepare(self, m: Message) -> Callable[[Tx], bool]:
        """The step to run inside the transaction; errors here surface when it runs. A step
        may run more than once (a transaction retried after a lost connection): it numbers
        its follow-ups from one each time, so their keys do not shift. An async handler's
        step is an ``AsyncStep``."""
        try:
            fn = self._registry.get(m.task)
            options = self._registry.options(m.task)
            ctx, payload = self._item(m)
        except Exception as exc:
            return _raise(exc)
        if options.is_async:
            return AsyncStep(self, partial(self._run_async, fn, options, ctx, payload))

        def step(tx: Tx) -> bool:
            ctx.tx, ctx._follow_ups = tx, 0
            started = self._now()
            with deadlines.deadline(options.timeout_ms), _in_run(self._registry, tx):
                result = fn(ctx, payload)
            if inspect.isawaitable(result):  # an async callable not declared async def
                result = self._await(result)
            deadlines.check_time(options.timeout_ms, self._now() - started)
            return result is not False

        return step

    async def _run_async(
        self, fn: Handler, options: Options, ctx: Context, payload: dict[str, Any], tx: Tx
    ) -> bool:
        ctx.tx, ctx._follow_ups = tx, 0
        _RUN.set((self._registry, tx))  # (this asyncio task's own context)
        result: Any = fn(ctx, payload)
        if inspect.isawaitable(result):
            import asyncio  # (on first use: a sync-only worker never loads it)

            timeout = None if options.timeout_ms is None else options.timeout_ms / 1000
            try:
                result = await asyncio.wait_for(result, timeout)
            except TimeoutError:
                raise TaskTimeout(f"ran past its timeout of {timeout:g} s") from None
        return result is not False

    def gather(self, runs: Sequence[tuple[AsyncStep, Tx]]) -> list[bool | BaseException]:
        """Run async steps on this runner's loop, ``concurrency`` at a time; each one's result,
        or the exception it raised, in order."""

        import asyncio

        async def every() -> list[bool | BaseException]:
            gate = asyncio.Semaphore(self.concurrency)

            async def one(step: AsyncStep, tx: Tx) -> bool | BaseException:
                async with gate:
                    try:
                        return await step.start(tx)
                    except BaseException as exc:  # CancelledError, SystemExit too: the run's
                        if not handler_failure(exc):
                            raise
                        return exc

            return list(await asyncio.gather(*(one(s, t) for s, t in runs)))

        out: list[bool | BaseException] = self._await(every())
        return out

    def prepare_batch(
        self, messages: Sequence[Message], dialect: str | None = None
    ) -> BatchStep | None:
        """One step for a batch whose every handler has a batch form (each runs once for all
        its messages); None otherwise, and the store runs the messages one by one. Answers are
        in ``messages`` order; any error (in decoding too) raises when the step runs, and the
        store then runs each message in its single form. ``dialect``: the calling store's SQL
        flavour, for batch forms that prepare SQL."""
        if any(self._registry.get_batch(m.task) is None for m in messages):
            return None
        groups: dict[str, tuple[list[int], list[Item]]] = {}
        now = self._now()  # one instant for the batch: a clock read per message adds up
        try:
            for i, m in enumerate(messages):
                indexes, items = groups.setdefault(m.task, ([], []))
                indexes.append(i)
                items.append(self._item(m, now))
            steps = [
                (indexes, items, self._registry.batch_step(name, items, dialect))
                for name, (indexes, items) in groups.items()
            ]
        except Exception as exc:
            return _raise_batch(exc)
        return partial(self._run_batch, len(messages), steps)

    def _run_batch(
        self, n: int, steps: list[tuple[list[int], list[Item], BatchStep]], tx: Tx
    ) -> list[bool]:
        out = [False] * n
        for indexes, items, batch in steps:
            for ctx, _ in items:
                ctx.tx, ctx._follow_ups = tx, 0  # a retried transaction numbers them again
            with _in_run(self._registry, tx):
                answers = batch(tx)
            for i, applied in zip(indexes, answers, strict=True):
                out[i] = applied
        return out

    def _await(self, awaitable: Awaitable[Any]) -> Any:
        """Run ``awaitable`` to its end on this runner's own loop, in this thread (the
        transaction's connection belongs to it). A loop already running here (the worker
        called from async code, a notebook) is blocked by this synchronous call anyway: it is
        set aside for the duration, not run re-entrantly."""
        import asyncio

        outer = asyncio._get_running_loop()
        asyncio._set_running_loop(None)
        try:
            return self._loop().run_until_complete(awaitable)
        finally:
            asyncio._set_running_loop(outer)

    def _loop(self) -> asyncio.AbstractEventLoop:
        """This runner's event loop, for async handlers (made on first use)."""
        if self._event_loop is None:
            import asyncio

            self._event_loop = asyncio.new_event_loop()
            weakref.finalize(self, _close_loop, self._event_loop)
        return self._event_loop

    def _item(self, m: Message, now_ms: int | None = None) -> Item:
        ctx = Context(
            task_id=m.task_id,
            idempotency_key=m.idempotency_key,
            scheduled_ms=m.trigger_ms,
            attempt=m.attempt,
            now_ms=self._now() if now_ms is None else now_ms,
            tx=_NoTx(),
        )
        return ctx, decode_payload(m.payload)


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Close a runner's loop; one a process died inside (a simulated kill, an exit from a
    handler) still says it runs, and is left to the interpreter's end."""
    with contextlib.suppress(RuntimeError):
        loop.close()


_DECODER = json.JSONDecoder()


def decode_payload(text: str) -> Any:
    """``json.loads(text)``, at a third of its cost for the compact JSON the engine stores
    (``raw_decode`` without the whitespace scans); anything else goes through ``json.loads``,
    which also words the error."""
    try:
        value, end = _DECODER.raw_decode(text)
    except ValueError:
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def _raise(exc: Exception) -> Callable[[Tx], bool]:
    def step(tx: Tx) -> bool:
        raise exc

    return step


def _raise_batch(exc: Exception) -> BatchStep:
    def step(tx: Tx) -> list[bool]:
        raise exc

    return step
