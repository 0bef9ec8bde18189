"""``cronlab.App``: your handlers and recurring schedules, registered by name on a store.

```python
app = cronlab.App("sqlite:///cron.db")

@app.handler("bill")                      # looked up by name by the workers; never pickled
def bill(ctx, payload): ...

app.cron("monthly-invoices", "0 0 1 * *", handler="bill", tz="Europe/Berlin",
         catchup="all", overlap="skip")   # an idempotent upsert by name
```

``cronlab scheduler|worker|cluster --store URL --app module:app`` import the module the user
names on the command line (their own code), deploy its schedules to ``--store`` and run its
handlers. Nothing read from a store is ever imported, unpickled or evaluated.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, cast

from cronlab import urls
from cronlab.core.policy import Catchup, Overlap, Schedule
from cronlab.exceptions import ConfigError
from cronlab.handlers import Handler, Registry
from cronlab.ports import Clock, ScheduleStore
from cronlab.runtime.clock import SystemClock


class App:
    """Your handlers and the schedules this code deploys.

    Give a store URL (``sqlite:///PATH``; default: the ``CRONLAB_STORE`` environment variable),
    a store object (``stores.memory.MemoryStore`` in tests), or neither, for an app that runs
    on whatever store the engine is started with. ``cron(...)`` writes at once; every mistake
    is a ConfigError with nothing written.
    """

    def __init__(
        self,
        store_url: str | None = None,
        *,
        store: ScheduleStore | None = None,
        clock: Clock | None = None,
        name: str | None = None,
    ) -> None:
        if store_url is not None and store is not None:
            raise ConfigError("give App a store URL (sqlite:///PATH) or a store, not both")
        if store_url is None and store is None:
            store_url = os.environ.get("CRONLAB_STORE") or None
        if store_url is not None:
            urls.parse(store_url)  # a malformed URL fails here, before any handler is defined
        self.name = name or "app"
        self.store_url = store_url
        self._store = store
        self.clock: Clock = clock or SystemClock()
        self.registry = Registry()
        self.schedules: dict[str, Schedule] = {}
        self._on_start: list[Callable[[Any], None]] = []

    def on_start(self, fn: Callable[[Any], None]) -> Callable[[Any], None]:
        """Decorator: ``fn(store)`` runs when an engine process starts this app on a store
        (create the app's own tables there, say). It must be idempotent."""
        self._on_start.append(fn)
        return fn

    def start(self, store: Any) -> None:
        """Run the ``on_start`` functions on ``store`` (the engine calls this)."""
        for fn in self._on_start:
            fn(store)

    def handler(self, name: str) -> Callable[[Handler], Handler]:
        """Decorator: register ``fn(ctx, payload)`` under ``name`` (a name taken is an error)."""
        return self.registry.handler(name)

    def cron(
        self,
        name: str,
        expr: str,
        *,
        handler: str,
        tz: str = "UTC",
        payload: Mapping[str, Any] | None = None,
        catchup: str = "latest",
        catchup_window: timedelta = timedelta(hours=1),
        overlap: str = "skip",
    ) -> Schedule:
        """Define (or update) the schedule ``name``; running it twice changes nothing.

        A paused schedule stays paused: pausing is the operator's (``cronlab schedule pause``).
        """
        schedule = Schedule(
            name=name,
            cron=expr,
            handler=handler,
            tz=tz,
            payload=dict(payload or {}),
            catchup=cast(Catchup, catchup),
            catchup_window_ms=_window_ms(catchup_window),
            overlap=cast(Overlap, overlap),
        )
        self._check_handler(schedule)
        self.store().put_schedule(schedule, self.clock.now_ms(), replace=True)
        self.schedules[name] = schedule
        return schedule

    def deploy(self, store: ScheduleStore) -> int:
        """Upsert every schedule of this app into ``store``; returns how many changed."""
        now = self.clock.now_ms()
        return sum(store.put_schedule(s, now, replace=True) for s in self.schedules.values())

    def store(self) -> ScheduleStore:
        """The app's store, opened (and migrated) on first use."""
        if self._store is None:
            from cronlab import stores  # the backends load only when a store is used

            if self.store_url is None:
                raise ConfigError("this App has no store: give App a store URL or CRONLAB_STORE")
            self._store = schedule_store(stores.open_store(self.store_url, create=True))
        return self._store

    def _check_handler(self, schedule: Schedule) -> None:
        if schedule.handler not in self.registry.names():
            known = ", ".join(self.registry.names())
            raise ConfigError(
                f"schedule {schedule.name!r}: unknown handler {schedule.handler!r} "
                f"(registered: {known}); define it with @app.handler first"
            )


def _window_ms(window: timedelta) -> int:
    if not isinstance(window, timedelta):
        raise ConfigError(f"catchup_window must be a timedelta, got {window!r}")
    return window // timedelta(milliseconds=1)


def schedule_store(store: Any) -> ScheduleStore:
    """``store`` as the schedules' port (every SQL store keeps schedules)."""
    return cast(ScheduleStore, store)


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
