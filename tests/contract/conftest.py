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
from cronlab.stores.sqlite import SqliteStore


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


@pytest.fixture(params=["memory", "sqlite"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    clock = FakeClock(1_700_000_000_000)
    b = {"memory": _memory, "sqlite": _sqlite}[request.param](tmp_path, clock)
    yield b
    if isinstance(b.store, SqliteStore):
        b.store.close()
