"""A store written by cronlab before its tables stood beside the application's (commit
0f99ee6: bare names, alone in their database) moves in place on the first writing open: its
tables (SQLite: renamed ``cronlab_*``, indexes made again under the prefix; PostgreSQL: into
schema ``cronlab``, sequences and indexes with them), its rows kept, its waiting tasks run.
A reader refuses it, untouched. The stores are ``tests/fixtures/store-0f99ee6.*``, made by
that commit's code (``tests/fixtures/make_legacy_stores.py``)."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

import cronlab
from cronlab.clock import FakeClock
from cronlab.exceptions import ConfigError
from cronlab.stores import open_store

from .dist_servers import pg_database

FIXTURES = Path(__file__).parent.parent / "fixtures"
T0 = 1_796_443_920_000  # the fixtures' clock
BEFORE = {"DONE": 6, "PENDING": 4}  # 5 notes and a tick ran; 3 notes an hour away, a tick


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def legacy(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A copy of the store 0f99ee6 wrote; its URL."""
    if request.param == "sqlite":
        shutil.copy(FIXTURES / "store-0f99ee6.db", tmp_path / "old.db")
        yield f"sqlite:///{tmp_path / 'old.db'}"
        return
    dump = (FIXTURES / "store-0f99ee6.sql").read_text()
    script = "\n".join(line for line in dump.splitlines() if not line.startswith("\\"))
    with pg_database() as url:
        with psycopg.connect(url, autocommit=True) as c:
            c.execute(script)  # (pg_dump's psql meta-commands left out)
        yield url


def counts(url: str) -> dict[str, int]:
    store = open_store(url, create=False, read_only=True)
    try:
        return dict(store.query(store.own("SELECT status, count(*) FROM tasks GROUP BY status")))
    finally:
        store.close()


def test_a_reader_refuses_the_old_layout_and_changes_nothing(legacy: str) -> None:
    with pytest.raises(ConfigError, match="lacks migration 014"):
        open_store(legacy, create=False, read_only=True)
    if legacy.startswith("sqlite"):
        with sqlite3.connect(legacy.removeprefix("sqlite:///")) as c:
            assert c.execute("SELECT count(*) FROM tasks").fetchone() == (10,)
        c.close()


def test_the_first_writer_moves_the_store_beside_and_it_runs_on(legacy: str) -> None:
    clock = FakeClock(T0 + 60_000)
    app = cronlab.App(legacy, clock=clock, name="legacy")

    @app.task(name="note")
    def note(ctx: cronlab.Context, n: int) -> None:
        pass

    @app.cron("* * * * *")
    @app.task(name="tick")
    def tick(ctx: cronlab.Context) -> None:
        pass

    app.store()  # opened: moved and migrated
    assert counts(legacy) == BEFORE
    store = open_store(legacy, create=False, read_only=True)
    assert store.schema_versions()[-1] == 16
    assert [s.schedule.name for s in store.list_schedules()] == ["tick"]
    store.close()
    clock.advance(3_600_000)  # the notes an hour away, and the tick
    app.run_until_idle(timeout=timedelta(seconds=30))
    app.close()
    after = counts(legacy)
    assert after["DONE"] == BEFORE["DONE"] + 4 and after["PENDING"] == 1
    assert _bare_names_left(legacy) == []


def _bare_names_left(url: str) -> list[str]:
    """Tables or indexes the old layout's names still hold (none once moved)."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as c:
            found = c.execute(
                "SELECT name FROM sqlite_master WHERE name NOT LIKE 'cronlab_%'"
                " AND name NOT LIKE 'sqlite_%'"  # SQLite's own: indexes, AUTOINCREMENT's
            ).fetchall()
        c.close()
        return [r[0] for r in found]
    with psycopg.connect(url) as c:
        found = c.execute(
            "SELECT relname FROM pg_class c JOIN pg_namespace n"
            " ON n.oid = c.relnamespace WHERE n.nspname = 'public'"
        ).fetchall()
        found += c.execute(
            "SELECT proname FROM pg_proc p JOIN pg_namespace n"
            " ON n.oid = p.pronamespace WHERE n.nspname = 'public'"
        ).fetchall()
    return [r[0] for r in found]
