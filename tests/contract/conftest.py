"""The ``backend`` fixture: every contract test runs against each backend.

Add PostgreSQL, Redis or etcd as further params (marked) without touching the tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cronlab.runtime.clock import FakeClock
from cronlab.stores.memory import MemoryStore
from cronlab.stores.postgres import PostgresStore
from cronlab.stores.sqlite import SqliteStore

from .dist_servers import pg_database


@dataclass
class Backend:
    name: str
    store: Any  # ports.Store + LeaseTable + QueueTable
    clock: FakeClock
    last_error: Callable[[int], str | None]
    status: Callable[[int], str]


def _memory(tmp_path: Path, clock: FakeClock) -> Backend:
    s = MemoryStore()
    return Backend("memory", s, clock, s.last_error, lambda i: s.task(i).status)


def _sqlite(tmp_path: Path, clock: FakeClock) -> Backend:
    s = SqliteStore(tmp_path / "contract.db")

    def one(sql: str, i: int) -> Any:
        return s.query(sql, (i,))[0][0]

    return Backend(
        "sqlite",
        s,
        clock,
        lambda i: one("SELECT last_error FROM tasks WHERE id = ?", i),
        lambda i: one("SELECT status FROM tasks WHERE id = ?", i),
    )


def _postgres(clock: FakeClock) -> Iterator[Backend]:
    # A fresh database per test; the caller's (fake) clock judges lease expiry here.
    with pg_database() as url:
        s = PostgresStore(url, time_source="caller")

        def one(sql: str, i: int) -> Any:
            return s.query(sql, (i,))[0][0]

        yield Backend(
            "postgres",
            s,
            clock,
            lambda i: one("SELECT last_error FROM tasks WHERE id = ?", i),
            lambda i: one("SELECT status FROM tasks WHERE id = ?", i),
        )
        s.close()


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    clock = FakeClock(1_700_000_000_000)
    if request.param == "postgres":
        yield from _postgres(clock)
        return
    b = {"memory": _memory, "sqlite": _sqlite}[request.param](tmp_path, clock)
    yield b
    if isinstance(b.store, SqliteStore):
        b.store.close()
