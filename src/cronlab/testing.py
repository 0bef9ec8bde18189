"""Helpers for testing code that runs on cronlab (and for cronlab's own tests and benchmarks)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from cronlab.clock import FakeClock
from cronlab.stores.memory import MemoryStore

__all__ = ["FakeClock", "MemoryStore", "scratch_database"]


@contextmanager
def scratch_database(admin: str, prefix: str = "cronlab_scratch") -> Iterator[str]:
    """A fresh, empty PostgreSQL database made through the ``admin`` URL; yields its URL.
    Dropped afterwards, its connections forced out. Needs the ``postgres`` extra."""
    import psycopg

    from cronlab.stores.postgres import with_database

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(admin, name)
    finally:
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
