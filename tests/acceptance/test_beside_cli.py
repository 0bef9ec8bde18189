"""Issue 31, as a user runs it: ``cronlab enqueue`` and ``cronlab run`` on an app written once,
pointed at a database that already holds the application's tables — one called ``tasks``,
one ``queue``, one ``executions`` — on SQLite and on PostgreSQL. Its SQL in ``ctx.tx`` uses
``?`` and ``:name``; afterwards the application's tables are as they were, definitions and
rows, but for what its tasks wrote. Failed first: "… is not a cronlab store: it has other
tables (audit, executions, queue) and no cronlab_schema; nothing was written"."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import shell
from shell import cronlab

pytestmark = pytest.mark.acceptance

TODO = """
import cronlab

app = cronlab.App(name="todo")


@app.task(name="close")
def close(ctx: cronlab.Context, task_id: int) -> None:
    ctx.tx.execute("UPDATE tasks SET done = 1 WHERE id = ?", (task_id,))
    note = {"k": ctx.idempotency_key, "note": f"closed {task_id}"}
    ctx.tx.execute("INSERT INTO audit (k, note) VALUES (:k, :note)", note)


@app.cron("* * * * * *", catchup="none")
@app.task(name="tick")
def tick(ctx: cronlab.Context) -> None:
    ctx.tx.execute("INSERT INTO audit (k, note) VALUES (?, ?)", (ctx.idempotency_key, "tick"))
"""
THEIRS = [
    "CREATE TABLE tasks (id INTEGER PRIMARY KEY, title TEXT NOT NULL, done INTEGER NOT NULL)",
    "CREATE TABLE queue (name TEXT PRIMARY KEY, size INTEGER)",
    "CREATE TABLE executions (id INTEGER PRIMARY KEY, what TEXT)",
    "CREATE TABLE audit (k TEXT NOT NULL, note TEXT NOT NULL)",
    "INSERT INTO tasks VALUES (1, 'write the report', 0), (2, 'send it', 0)",
    "INSERT INTO queue VALUES ('mail', 3)",
    "INSERT INTO executions VALUES (7, 'the app''s own')",
]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The application's database with its tables, before cronlab comes."""
    (tmp_path / "todo.py").write_text(TODO)
    if request.param == "postgres":
        from contract.dist_servers import pg_database

        with pg_database() as pg:
            with psycopg.connect(pg, autocommit=True) as c:
                for statement in THEIRS:
                    c.execute(statement)
            yield pg
        return
    with sqlite3.connect(tmp_path / "app.db") as c:
        for statement in THEIRS:
            c.execute(statement)
    c.close()
    yield f"sqlite:///{tmp_path / 'app.db'}"


def theirs(url: str) -> dict[str, Any]:
    """The application's tables: their definitions and rows."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as c:
            found = c.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'table'"
                " AND name NOT LIKE 'cronlab_%' AND name NOT LIKE 'sqlite_%' ORDER BY name"
            ).fetchall()
            rows = {n: sorted(c.execute(f"SELECT * FROM {n}").fetchall()) for n, _ in found}
        c.close()
        return {"definitions": found, "rows": rows}
    with psycopg.connect(url) as c:
        found = c.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = 'public' ORDER BY 1, ordinal_position"
        ).fetchall()
        names = sorted({t for t, *_ in found})
        rows = {n: sorted(c.execute(f"SELECT * FROM public.{n}").fetchall()) for n in names}
    return {"definitions": found, "rows": rows}


def run_until_audited(cwd: Path, url: str) -> tuple[int, str]:
    """``cronlab run`` until the deferred close and two ticks are in the audit (30 s at most),
    then SIGTERM: its exit code and stderr."""

    def audited() -> bool:
        notes = [note for _, note in theirs(url)["rows"]["audit"]]
        return "closed 2" in notes and notes.count("tick") >= 2

    return shell.run_until(("run", "--app", "todo:app", "--store", url), cwd, audited)


def test_an_app_written_once_runs_from_the_cli_beside_its_own_tables(
    url: str, tmp_path: Path
) -> None:
    before = theirs(url)
    enqueued = cronlab(
        "enqueue",
        "close",
        "--payload",
        '{"task_id": 2}',
        "--app",
        "todo:app",
        "--store",
        url,
        cwd=tmp_path,
    )
    assert enqueued.returncode == 0, enqueued.stderr
    code, err = run_until_audited(tmp_path, url)
    assert code == 0 and "Traceback" not in err, err[-2000:]
    after = theirs(url)
    assert after["definitions"] == before["definitions"]
    audit = after["rows"]["audit"]
    assert [note for _, note in audit].count("closed 2") == 1
    assert {note for _, note in audit} == {"closed 2", "tick"}
    assert all(k.startswith("schedule:tick:") for k, note in audit if note == "tick")
    expected = dict(before["rows"], audit=audit)
    expected["tasks"] = [(1, "write the report", 0), (2, "send it", 1)]
    assert after["rows"] == expected
