"""``cronlab.App``: your tasks and their schedules, on a store.

```python
app = cronlab.App("sqlite:///cron.db")

@app.cron("0 0 1 * *", tz="Europe/Berlin", catchup="all", overlap="skip")
@app.task
def monthly(ctx: cronlab.Context) -> None: ...

@app.task
def bill(ctx: cronlab.Context, plan: str, customer: int) -> None: ...

bill.defer(plan="pro", customer=7)     # a worker runs it, now
app.run()                              # scheduler + worker in this process
```

Schedules declared in code are the truth: ``app.sync()`` writes them (``app.run()``,
``cronlab cluster``/``scheduler``/``run --app`` and ``cronlab schedule sync`` call it) —
importing the module writes nothing. ``cronlab scheduler|worker|cluster|run --app module:app``
import the module the user names (their own code); nothing read from a store is ever
imported, unpickled or evaluated.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, overload

from cronlab import urls
from cronlab.clock import SystemClock
from cronlab.core import zones
from cronlab.core.policy import Catchup, Overlap, Schedule
from cronlab.exceptions import ConfigError
from cronlab.handlers import Context, Handler, Options, Registry
from cronlab.ports import Clock, RunCounts, ScheduleStore, SyncReport
from cronlab.tasks import Task

if TYPE_CHECKING:
    from cronlab.stores import TimeSource
    from cronlab.stores.sql import SqlStore

P = ParamSpec("P")
R = TypeVar("R")
TaskFn = Callable[Concatenate[Context, P], R]
Alerts = tuple[int | None, int | None]  # a schedule's alert_after_ms, alert_on_failures


class App:
    """Your tasks and the schedules this code declares.

    Give a store URL (``sqlite:///PATH`` or ``postgresql://…``; default: the ``CRONLAB_STORE``
    environment variable), a store object (``cronlab.testing.MemoryStore`` in tests), or
    neither, for an app that runs on whatever store the engine is started with. ``name``
    tells this app's schedules from another's on a shared store (``sync`` removes only its
    own); by default, the module that makes the App (``jobs`` for ``--app jobs:app`` and for
    ``python jobs.py``), so two services differ unless their modules share a name (then
    give each a ``name``). Every mistake is a ConfigError, with nothing written.
    """

    def __init__(
        self,
        store_url: str | None = None,
        *,
        store: SqlStore | None = None,
        clock: Clock | None = None,
        name: str | None = None,
    ) -> None:
        if store_url is not None and store is not None:
            raise ConfigError("give App a store URL (sqlite:///PATH) or a store, not both")
        if store_url is None and store is None:
            store_url = os.environ.get("CRONLAB_STORE") or None
        if store_url is not None:
            urls.parse(store_url)  # a malformed URL fails here, before any task is defined
        self.name = name or _maker()
        self.store_url = store_url
        self._store = store
        self._local = threading.local()
        self._opened: list[SqlStore] = []  # every store it opened (``close`` closes them)
        self._opening = threading.Lock()
        self.clock: Clock = clock or SystemClock()
        self.registry = Registry()
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.schedules: dict[str, Schedule] = {}
        self._on_start: list[Callable[[Any], None]] = []

    # -- tasks --------------------------------------------------------------------------------

    @overload
    def task(self, fn: TaskFn[P, R]) -> Task[P, R]: ...

    @overload
    def task(
        self,
        *,
        name: str | None = None,
        retries: int | None = None,
        timeout: timedelta | None = None,
    ) -> Callable[[TaskFn[P, R]], Task[P, R]]: ...

    def task(
        self,
        fn: TaskFn[P, R] | None = None,
        *,
        name: str | None = None,
        retries: int | None = None,
        timeout: timedelta | None = None,
    ) -> Task[P, R] | Callable[[TaskFn[P, R]], Task[P, R]]:
        """Decorator: register ``fn(ctx, **arguments)`` (``def`` or ``async def``) as a task,
        named ``module.qualname`` (``<locals>`` left out) unless ``name`` is given.
        ``retries``: how many times a failed run is tried again (default: the worker's
        ``--max-attempts``); ``timeout``: a run that outlasts it fails, its effect undone."""

        def register(f: TaskFn[P, R]) -> Task[P, R]:
            task_name = name or _default_name(f)
            if task_name in self.tasks or task_name in self.registry.names():
                raise ConfigError(f"a task named {task_name!r} is already registered")
            task = Task[P, R](self, f, name=task_name, retries=retries, timeout=timeout)
            options = Options(
                max_attempts=None if retries is None else retries + 1,
                timeout_ms=None if timeout is None else timeout // timedelta(milliseconds=1),
                is_async=task.is_async,
            )
            self.registry.handler(task_name, options)(_caller(f))
            self.tasks[task_name] = task
            return task

        return register if fn is None else register(fn)

    # -- schedules ----------------------------------------------------------------------------

    def cron(
        self,
        expr: str,
        /,
        *,
        tz: str = "UTC",
        catchup: Catchup = "latest",
        catchup_window: timedelta = timedelta(hours=1),
        overlap: Overlap = "skip",
        name: str | None = None,
        args: Mapping[str, Any] | None = None,
        alert_after: timedelta | None = None,
        alert_on_failures: int | None = None,
    ) -> Callable[[Task[P, R]], Task[P, R]]:
        """Decorator on a task: run it on the cron expression ``expr`` in time zone ``tz``
        (the schedule is named after the task unless ``name`` is given; ``args`` are the
        task's arguments). ``catchup`` (all, latest, none) says what runs for occurrences
        missed while no scheduler was up, within ``catchup_window``; ``overlap`` (skip,
        allow) what happens when a run is due while the previous one still runs.
        ``alert_after``: alert when a run has not started this long after its occurrence;
        ``alert_on_failures``: alert after this many failed runs in a row (the leader raises
        both, to the log, the store and ``--alert-webhook``).

        A declared schedule is written by ``sync``; a paused one stays paused.
        """
        window_ms = _window_ms(catchup_window)
        alerts: Alerts = (_alert_ms(alert_after), alert_on_failures)

        def declare(task: Task[P, R]) -> Task[P, R]:
            if not isinstance(task, Task):
                raise ConfigError("@app.cron(expr) goes on an @app.task (put it above)")
            arguments = dict(args or {})
            task.new(arguments, 0, "check")  # the arguments must fit the task: refused now
            schedule = self._schedule(
                name or task.name,
                expr,
                task.name,
                tz,
                arguments,
                catchup,
                window_ms,
                overlap,
                alerts,
            )
            if schedule.name in self.schedules:
                raise ConfigError(f"a schedule named {schedule.name!r} is already declared")
            self.schedules[schedule.name] = schedule
            return task

        return declare

    def _schedule(
        self,
        name: str,
        expr: str,
        task: str,
        tz: str,
        payload: Mapping[str, Any] | None,
        catchup: Catchup,
        window_ms: int,
        overlap: Overlap,
        alerts: Alerts = (None, None),
    ) -> Schedule:
        zones.check(tz)  # (the Schedule value takes one a store holds already)
        schedule = Schedule(
            name=name,
            cron=expr,
            task=task,
            tz=tz,
            payload=dict(payload or {}),
            catchup=catchup,
            catchup_window_ms=window_ms,
            overlap=overlap,
            alert_after_ms=alerts[0],
            alert_on_failures=alerts[1],
        )
        if schedule.task not in self.registry.names():
            known = ", ".join(self.registry.names()) or "none"
            raise ConfigError(
                f"schedule {schedule.name!r}: unknown task {schedule.task!r} "
                f"(registered: {known}); define it with @app.task first"
            )
        return schedule

    def sync(self, store: ScheduleStore | None = None) -> SyncReport:
        """Write the declared schedules to ``store`` (default: the app's), in one transaction:
        what was added, changed and removed (only this app's; see ``App.name``)."""
        target = store if store is not None else self.store()
        wanted = list(self.schedules.values())
        now = self.clock.now_ms
        return target.sync_schedules(self.name, wanted, now(), clock=now)

    # -- running ------------------------------------------------------------------------------

    def run(
        self,
        *,
        concurrency: int = 100,
        scan_interval: timedelta = timedelta(seconds=1),
        keep: timedelta = timedelta(days=30),
        alert_webhook: str | None = None,
        metrics_port: int | None = None,
    ) -> None:
        """Scheduler and worker in this process, on the app's store, until SIGINT/SIGTERM (or
        KeyboardInterrupt). Syncs the schedules first. Several processes may run it on one
        store: one leads (a fenced lease), all work. The leader prunes run history older
        than ``keep`` and sends alerts to ``alert_webhook``; ``metrics_port`` serves
        Prometheus metrics on 127.0.0.1."""
        from cronlab.runtime import embedded
        from cronlab.runtime.duties import Operations
        from cronlab.runtime.retention import parse_keep

        ops = Operations(
            keep_ms=parse_keep(f"{keep // timedelta(seconds=1)}s"),
            alert_webhook=alert_webhook,
            metrics_port=metrics_port,
        )
        try:
            embedded.run(self, concurrency=concurrency, scan_interval=scan_interval, ops=ops)
        finally:
            self.close()  # the process's engine is done: nothing it opened stays open

    def run_until_idle(
        self, *, concurrency: int = 100, timeout: timedelta | float | None = None
    ) -> RunCounts:
        """Run what is due, and what that defers due by then, until nothing due is left
        pending or queued (tests, scripts); the runs' outcome counts, a ``RunCounts``
        (``counts["ok"]``, ``noop``, ``error``, ``failed``, ``stale``). Syncs the schedules
        first. ``timeout`` (a timedelta, or seconds): give up after so long (TimeoutError).
        A store this call opened is closed again as it returns (one opened before stays)."""
        from cronlab.runtime import embedded

        timeout = _timeout(timeout)
        ours = self._store is None and self.store_url is not None
        try:
            return embedded.run_until_idle(self, concurrency=concurrency, timeout=timeout)
        finally:
            if ours and self._store is not None:
                self._release(self._store)

    def _release(self, store: SqlStore) -> None:
        """Close ``store``, which this App opened, and forget it."""
        with self._opening:
            self._opened = [s for s in self._opened if s is not store]
        if self._store is store:
            self._store = None
        store.close()

    def on_start(self, fn: Callable[[Any], None]) -> Callable[[Any], None]:
        """Decorator: ``fn(store)`` runs when an engine process starts this app on a store
        (create the app's own tables there, say). It must be idempotent."""
        self._on_start.append(fn)
        return fn

    def start(self, store: Any) -> None:
        """Run the ``on_start`` functions on ``store`` (the engine calls this)."""
        for fn in self._on_start:
            fn(store)

    # -- stores -------------------------------------------------------------------------------

    def use_store(self, store_url: str) -> None:
        """Run on ``store_url`` from now on, instead of the URL given to ``App`` (the CLI's
        ``--store``)."""
        urls.parse(store_url)
        self.store_url, self._store = store_url, None
        self._local = threading.local()

    def store(self) -> SqlStore:
        """The app's store, opened (and migrated) on first use."""
        if self._store is None:
            self._store = self._open()
        return self._store

    def _open(self) -> SqlStore:
        """A new connection to the app's store (one per thread: a SQLite connection is not
        shared between threads)."""
        from cronlab import stores  # the backends load only when a store is used

        if self._store is not None and self.store_url is None:
            return self._store  # given as an object: shared (a :memory: store is thread-safe)
        if self.store_url is None:
            raise ConfigError("this App has no store: give App a store URL or CRONLAB_STORE")
        caller = not isinstance(self.clock, SystemClock)  # a test's clock rules its store
        source: TimeSource = "caller" if caller else "server"
        opened = stores.open_store(self.store_url, create=True, time_source=source, any_thread=True)
        with self._opening:
            self._opened.append(opened)
        return opened

    def close(self) -> None:
        """Close every store this App opened: its store and the connections ``defer`` opened
        in each thread. Call it once no thread of yours is deferring: a ``defer`` under way
        in another thread may fail (a later one opens a connection anew). A store given to
        ``App`` as an object is the caller's, and stays open. The App can be used again: its
        next use opens a store anew."""
        with self._opening:
            opened, self._opened = self._opened, []
        if self.store_url is not None:
            self._store = None
        self._local = threading.local()
        for store in opened:
            store.close()

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def defer_store(self) -> SqlStore:
        """Where ``defer`` writes from this thread: the app's store, or this thread's own
        connection to a SQLite file."""
        if self.store_url is None or not self.store_url.startswith("sqlite:"):
            return self.store()
        if threading.current_thread() is threading.main_thread():
            return self.store()
        found: SqlStore | None = getattr(self._local, "store", None)
        if found is None:
            found = self._local.store = self._open()
        return found


def _caller(fn: Callable[..., Any]) -> Handler:
    """The registry's ``fn(ctx, payload)`` form of a task function: arguments by name."""
    if inspect.iscoroutinefunction(fn):

        async def call_async(ctx: Context, payload: dict[str, Any]) -> Any:
            return await fn(ctx, **payload)

        return call_async

    def call(ctx: Context, payload: dict[str, Any]) -> Any:
        return fn(ctx, **payload)

    return call


def _maker() -> str:
    """The module whose code makes the App (the first frame outside this one)."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    return _module(frame.f_globals.get("__name__") or "__main__")


def _module(name: str) -> str:
    """A module's name, a script run as ``python jobs.py`` named after its file, as a worker
    that imports ``--app jobs:app`` names it."""
    if name != "__main__":
        return name
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    path = getattr(main, "__file__", None)
    if spec is not None and spec.name:
        return str(spec.name)
    return os.path.splitext(os.path.basename(path))[0] if path else name


def _default_name(fn: Callable[..., Any]) -> str:
    """``module.qualname`` (a script's module named as ``_module`` names it)."""
    module = _module(getattr(fn, "__module__", None) or "task")
    qualname = getattr(fn, "__qualname__", getattr(fn, "__name__", "task"))
    name = f"{module}.{qualname.replace('.<locals>', '')}"  # a function made inside another
    if "<" in name:
        raise ConfigError(f"task {name!r}: give it a name (@app.task(name=...))")
    return name


def _timeout(value: timedelta | float | None) -> timedelta | None:
    """``run_until_idle``'s timeout as a timedelta; a ConfigError names a wrong one."""
    if value is None or isinstance(value, timedelta):
        seconds = None if value is None else value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise ConfigError(f"run_until_idle: timeout must be a timedelta or seconds, got {value!r}")
    if seconds is not None and not 0 < seconds <= 86_400 * 366:
        raise ConfigError(
            f"run_until_idle: timeout must be above 0 and at most a year, got {value!r}"
        )
    return None if seconds is None else timedelta(seconds=seconds)


def _alert_ms(after: timedelta | None) -> int | None:
    if after is None:
        return None
    if not isinstance(after, timedelta):
        raise ConfigError(f"alert_after must be a timedelta, got {after!r}")
    return after // timedelta(milliseconds=1)


def _window_ms(window: timedelta) -> int:
    if not isinstance(window, timedelta):
        raise ConfigError(f"catchup_window must be a timedelta, got {window!r}")
    return window // timedelta(milliseconds=1)


def schedule_store(store: Any) -> ScheduleStore:
    """``store`` as the schedules' port (every SQL store keeps schedules)."""
    store_: ScheduleStore = store
    return store_


def load(spec: str) -> App:
    """The ``App`` named by ``--app module:attribute`` (the user's own code, imported by path).

    The working directory is on the import path, as with ``python -m``.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"--app {spec!r}: expected module:attribute, e.g. jobs:app")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"--app {spec!r}: cannot import {module_name!r}: {exc}") from None
    except Exception as exc:  # the user's module raised (or does not parse): say where, briefly
        raise ConfigError(
            f"--app {spec!r}: importing {module_name} failed: {_where(exc)}"
        ) from None
    app = getattr(module, attr, None)
    if not isinstance(app, App):
        raise ConfigError(f"--app {spec!r}: {module_name}.{attr} is not a cronlab.App")
    return app


def _where(exc: BaseException) -> str:
    """``Error: message (file:line)`` for the innermost frame of the user's code (not ours, not
    the import machinery's); a SyntaxError names its own file and line."""
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} ({exc.filename}:{exc.lineno})"
    ours = os.path.dirname(__file__)
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith(ours) and "importlib" not in f.filename
    ]
    place = f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{place}"
