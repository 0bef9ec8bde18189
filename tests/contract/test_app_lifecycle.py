"""An App's lifecycle on SQLite and PostgreSQL (issue 31, item 3): ``app.close()`` and ``with
cronlab.App(...) as app:`` close every connection the App opened, ``run_until_idle`` leaves
nothing open that it opened, and ``defer`` from another thread leaves no connection behind.
Each is counted from outside the App: the files a SQLite store holds open (``/proc/self/fd``)
or the sessions a PostgreSQL database has (``pg_stat_activity``)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

import cronlab
from cronlab.exceptions import ConfigError

from .dist_servers import PG_ADMIN, pg_database


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "postgres":
        with pg_database() as url:
            yield url
        return
    yield f"sqlite:///{tmp_path / 'app.db'}"


def open_connections(url: str) -> Callable[[], int]:
    """How many connections to the store at ``url`` this process holds (SQLite: open files
    of the store, its WAL and lock file; PostgreSQL: the database's sessions but ours)."""
    if url.startswith("sqlite:"):
        path = url.removeprefix("sqlite:///")

        def files() -> int:
            found = 0
            for fd in os.listdir("/proc/self/fd"):
                try:
                    found += os.readlink(f"/proc/self/fd/{fd}").startswith(path)
                except OSError:
                    continue
            return found

        return files
    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]

    def sessions() -> int:
        """(A session the client closed ends on the server a moment later: up to 2 s.)"""
        deadline = time.monotonic() + 2
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            while True:
                row = admin.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (name,)
                ).fetchone()
                found = int(row[0]) if row else 0
                if found == 0 or time.monotonic() > deadline:
                    return found
                time.sleep(0.05)

    return sessions


def an_app(url: str) -> tuple[cronlab.App, list[int]]:
    app, ran = cronlab.App(url, name="life"), []

    @app.task(name="note")
    def note(ctx: cronlab.Context, n: int) -> None:
        ran.append(n)

    return app, ran


def test_a_with_block_closes_every_connection_the_app_opened(store_url: str) -> None:
    held = open_connections(store_url)
    with an_app(store_url)[0] as app:
        app.tasks["note"].defer(n=1)
        app.store().queue_depth()
        assert held() > 0
    assert held() == 0


def test_run_until_idle_closes_the_store_it_opened_and_keeps_one_opened_before(
    store_url: str,
) -> None:
    held = open_connections(store_url)
    app, ran = an_app(store_url)
    app.tasks["note"].defer(n=1)
    app.close()
    assert held() == 0
    assert app.run_until_idle(timeout=30)["ok"] == 1  # (seconds, or a timedelta)
    assert (ran, held()) == ([1], 0)
    store = app.store()
    app.tasks["note"].defer(n=2)
    assert app.run_until_idle(timeout=timedelta(seconds=30))["ok"] == 1
    assert app.store() is store and held() > 0  # opened before: the caller's to close
    app.close()
    assert held() == 0


def test_defer_from_another_thread_leaves_no_connection_once_closed(store_url: str) -> None:
    held = open_connections(store_url)
    app, _ = an_app(store_url)
    threads = [threading.Thread(target=app.tasks["note"].defer, kwargs={"n": n}) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert int(app.store().query(app.store().own("SELECT count(*) FROM tasks"))[0][0]) == 3
    app.close()
    assert held() == 0


@pytest.mark.parametrize(
    ("timeout", "said"),
    [
        ("30", "run_until_idle: timeout must be a timedelta or seconds, got '30'"),
        (0, "run_until_idle: timeout must be above 0 and at most a year, got 0"),
        (True, "run_until_idle: timeout must be a timedelta or seconds, got True"),
    ],
)
def test_a_wrong_timeout_is_a_config_error_that_names_it(
    tmp_path: Path, timeout: object, said: str
) -> None:
    app, _ = an_app(f"sqlite:///{tmp_path / 'app.db'}")
    with pytest.raises(ConfigError) as raised:
        app.run_until_idle(timeout=timeout)  # type: ignore[arg-type]
    assert str(raised.value) == said
