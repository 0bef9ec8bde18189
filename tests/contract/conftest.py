"""The ``backend`` fixture: every contract test runs against each backend — the one SQL store
on SQLite ``:memory:`` (``memory``), a SQLite file and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cronlab.clock import FakeClock
from cronlab.stores.memory import MemoryStore
from cronlab.stores.postgres import PostgresStore
from cronlab.stores.sql import SqlStore
from cronlab.stores.sqlite import SqliteStore

from .dist_servers import pg_database


@dataclass
class Backend:
    name: str
    store: SqlStore
    clock: FakeClock
    last_error: Callable[[int], str | None]
    status: Callable[[int], str]


def _memory(tmp_path: Path, clock: FakeClock) -> Backend:
    s = MemoryStore()
    return Backend("memory", s, clock, s.last_error, lambda i: s.task(i).status)


def _sqlite(tmp_path: Path, clock: FakeClock) -> Backend:
    s = SqliteStore(tmp_path / "contract.db")
    return Backend("sqlite", s, clock, s.last_error, lambda i: s.task(i).status)


def _postgres(clock: FakeClock) -> Iterator[Backend]:
    # A fresh database per test; the caller's (fake) clock judges lease expiry here.
    with pg_database() as url:
        s = PostgresStore(url, time_source="caller")
        yield Backend("postgres", s, clock, s.last_error, lambda i: s.task(i).status)
        s.close()


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    clock = FakeClock(1_700_000_000_000)
    if request.param == "postgres":
        yield from _postgres(clock)
        return
    b = {"memory": _memory, "sqlite": _sqlite}[request.param](tmp_path, clock)
    yield b
    b.store.close()
