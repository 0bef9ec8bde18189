"""cronlab in an application's own database (issue 31): its tables beside the application's —
PostgreSQL's in schema ``cronlab``, SQLite's prefixed ``cronlab_`` — and an app written once,
whose SQL in ``ctx.tx`` names its own tables (one called ``tasks``, one ``queue``, one
``executions``: cronlab's own bare names), running unchanged on both stores. The app's tables
are as they were, statements and rows, but for what its tasks wrote. Failed first: "… is not
a cronlab store: it has other tables (audit, executions, queue); nothing was written"."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

import cronlab
from cronlab.clock import FakeClock
from cronlab.exceptions import ConfigError, NotFoundError
from cronlab.stores.sql import namespace

from .dist_servers import pg_database

T0 = 1_796_443_920_000  # a whole minute (2026-12-05T04:52:00Z)
THEIRS = [
    "CREATE TABLE tasks (id INTEGER PRIMARY KEY, title TEXT NOT NULL, done INTEGER NOT NULL)",
    "CREATE TABLE queue (name TEXT PRIMARY KEY, size INTEGER)",
    "CREATE TABLE executions (id INTEGER PRIMARY KEY, what TEXT)",
    "CREATE TABLE audit (k TEXT NOT NULL, note TEXT NOT NULL)",
    "CREATE INDEX tasks_trigger ON tasks (title)",  # an index name cronlab's SQLite one had
    "INSERT INTO tasks VALUES (1, 'write the report', 0), (2, 'send it', 0), (3, 'rest', 0)",
    "INSERT INTO queue VALUES ('mail', 3)",
    "INSERT INTO executions VALUES (7, 'the app''s own')",
]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An application's database, holding its tables, before cronlab is pointed at it."""
    if request.param == "postgres":
        with pg_database() as pg:
            with psycopg.connect(pg, autocommit=True) as c:
                for statement in THEIRS:
                    c.execute(statement)
            yield pg
        return
    db = tmp_path / "app.db"
    with sqlite3.connect(db) as c:
        for statement in THEIRS:
            c.execute(statement)
    c.close()
    yield f"sqlite:///{db}"


def theirs(url: str) -> dict[str, Any]:
    """The application's tables and indexes as its own connection sees them: definitions and
    rows in order."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as c:
            found = c.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'cronlab_%'"
                " AND name NOT LIKE 'sqlite_%' ORDER BY name"
            ).fetchall()
            tables = [name for kind, name, _ in found if kind == "table"]
            rows = {n: c.execute(f"SELECT * FROM {n} ORDER BY 1, 2").fetchall() for n in tables}
        c.close()
        return {"objects": found, "rows": rows}
    with psycopg.connect(url) as pg:
        columns = pg.execute(
            "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns"
            " WHERE table_schema = 'public' ORDER BY 1, ordinal_position"
        ).fetchall()
        indexes = pg.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1"
        ).fetchall()
        names = sorted({t for t, *_ in columns})
        rows = {n: pg.execute(f"SELECT * FROM public.{n} ORDER BY 1, 2").fetchall() for n in names}
    return {"objects": columns + indexes, "rows": rows}


def todo_app(url: str, clock: FakeClock) -> tuple[cronlab.App, Any]:
    """An app written once: ``?`` and ``:name`` through ``ctx.tx`` on its own tables, a cron
    schedule and a deferred task."""
    app = cronlab.App(url, clock=clock, name="todo")

    @app.task(name="close")
    def close(ctx: cronlab.Context, task_id: int) -> None:
        ctx.tx.execute("UPDATE tasks SET done = 1 WHERE id = ?", (task_id,))
        note = {"k": ctx.idempotency_key, "note": f"closed {task_id}"}
        ctx.tx.execute("INSERT INTO audit (k, note) VALUES (:k, :note)", note)

    @app.cron("* * * * *")
    @app.task(name="tick")
    def tick(ctx: cronlab.Context) -> None:
        (open_tasks,) = ctx.tx.rows("SELECT count(*) FROM tasks WHERE done = ?", (0,))
        ctx.tx.execute("INSERT INTO audit VALUES (?, ?)", ("tick", f"{open_tasks[0]} open"))
        ctx.defer(close, {"task_id": 2}, delay=timedelta(minutes=1))

    return app, close


def test_an_app_written_once_runs_beside_its_own_tables_on_every_store(url: str) -> None:
    before = theirs(url)
    clock = FakeClock(T0)
    app, close = todo_app(url, clock)
    close.defer(task_id=1, key="close-1")
    counts = app.run_until_idle(timeout=timedelta(seconds=30))
    for _ in range(2):
        clock.advance(60_000)
        counts = app.run_until_idle(timeout=timedelta(seconds=30))
    assert counts["error"] == 0
    store = app.store()
    ran = store.query(store.own("SELECT task, status FROM tasks"))
    assert sorted(tuple(r) for r in ran) == [
        ("close", "DONE"),  # close-1
        ("close", "DONE"),  # deferred by the first tick, due a minute later
        ("close", "PENDING"),  # deferred by the second tick
        ("tick", "DONE"),
        ("tick", "DONE"),
        ("tick", "PENDING"),  # the schedule's next occurrence
    ]
    app.close()
    after = theirs(url)
    assert after["objects"] == before["objects"]  # no table, column or index of theirs changed
    expected = dict(before["rows"])
    expected["tasks"] = [(1, "write the report", 1), (2, "send it", 1), (3, "rest", 0)]
    audit = sorted(after["rows"]["audit"])
    follow_up = f"schedule:tick:{T0 + 60_000}/then/close/1"
    assert audit[:2] == [("close-1", "closed 1"), (follow_up, "closed 2")]
    # the second tick ran beside the first one's follow-up: before or after it
    assert audit[2:] in ([("tick", "2 open")] * 2, [("tick", "1 open"), ("tick", "2 open")])
    expected["audit"] = after["rows"]["audit"]
    assert after["rows"] == expected


def test_cronlabs_tables_go_where_the_store_keeps_them(url: str) -> None:
    """PostgreSQL: schema ``cronlab``, the application's search path unchanged; SQLite: the
    prefix, and an index name of the application's (``tasks_trigger``) left to it."""
    app = cronlab.App(url, name="todo")
    app.store().close()
    app.close()
    mine = {"tasks", "queue", "executions", "audit"}
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as c:
            found = c.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
            index = c.execute("SELECT tbl_name FROM sqlite_master WHERE name = 'tasks_trigger'")
            assert index.fetchall() == [("tasks",)]
        c.close()
        names = {r[0] for r in found}
        assert {"cronlab_schema", "cronlab_tasks", "cronlab_queue", "cronlab_lease"} <= names
        theirs = {n for n in names if not n.startswith((namespace.PREFIX, "sqlite_"))}
        assert theirs == mine  # (sqlite_sequence is SQLite's: AUTOINCREMENT's high marks)
        return
    with psycopg.connect(url) as pg:
        found = pg.execute("SELECT schemaname, tablename FROM pg_tables").fetchall()
        assert pg.execute("SHOW search_path").fetchone() == ('"$user", public',)
    assert {t for s, t in found if s == "public"} == mine
    assert {t for s, t in found if s == "cronlab"} == set(namespace.tables()) - {
        "processes_by_owner"  # (renamed to processes by migration 005)
    }


def test_a_schema_named_in_the_url_keeps_two_stores_apart(url: str) -> None:
    """``?schema=NAME`` (PostgreSQL): two stores in one database, each in its own schema."""
    if url.startswith("sqlite"):
        pytest.skip("SQLite keeps one store per file: the prefix is fixed")
    blue, green = cronlab.App(f"{url}?schema=blue"), cronlab.App(f"{url}?schema=green")
    for app in (blue, green):

        @app.task(name="hello")
        def hello(ctx: cronlab.Context) -> None:
            pass

    blue.tasks["hello"].defer(key="only-blue")
    assert blue.store().task_by_key("only-blue").status == "PENDING"
    with pytest.raises(NotFoundError):
        green.store().task_by_key("only-blue")
    blue.close()
    green.close()


@pytest.mark.parametrize("schema", ["Caps", "pg_temp", "a;drop", "x" * 64, ""])
def test_a_schema_that_is_not_a_plain_name_is_refused(schema: str) -> None:
    with pytest.raises(ConfigError, match="is not a plain schema name"):
        namespace.postgres_schema(schema)


@pytest.mark.postgres
def test_a_role_without_create_on_the_database_uses_a_schema_made_for_it() -> None:
    """A DBA makes schema ``cronlab`` for the application's role, which may not create
    schemas: the store opens in it (``CREATE SCHEMA IF NOT EXISTS`` needs that right even when
    the schema is there)."""
    with pg_database() as url:
        role = "cronlab_t_app"
        with psycopg.connect(url, autocommit=True) as c:
            c.execute(f"DROP ROLE IF EXISTS {role}")
            c.execute(f"CREATE ROLE {role} LOGIN")
            c.execute(f"REVOKE CREATE ON DATABASE {url.rpartition('/')[2]} FROM PUBLIC")
            c.execute(f"CREATE SCHEMA cronlab AUTHORIZATION {role}")
        try:
            as_app = url.replace("postgresql://postgres@", f"postgresql://{role}@")
            app = cronlab.App(as_app, name="todo")
            assert app.store().schema_versions()[-1] == 16
            app.close()
        finally:
            with psycopg.connect(url, autocommit=True) as c:
                c.execute("DROP SCHEMA cronlab CASCADE")
                c.execute(f"DROP ROLE {role}")
