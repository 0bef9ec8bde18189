"""``stores.errors.explain``: a database's error in the user's words (issue 28: a full or
read-only disk was reported as "the store is damaged")."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from cronlab.stores import errors


def _raised(conn: sqlite3.Connection, sql: str) -> sqlite3.Error:
    with pytest.raises(sqlite3.Error) as caught:
        conn.execute(sql)
    return caught.value


def test_a_full_database_is_a_full_disk() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.execute("PRAGMA max_page_count = 2")
    exc = _raised(conn, "INSERT INTO t VALUES (zeroblob(100000))")
    assert errors.explain(exc).startswith("the disk holding the store is full (")


def test_a_read_only_database_is_read_only(tmp_path: Path) -> None:
    sqlite3.connect(tmp_path / "s.db").execute("CREATE TABLE t (x)").connection.commit()
    conn = sqlite3.connect(f"file:{tmp_path / 's.db'}?mode=ro", uri=True)
    exc = _raised(conn, "INSERT INTO t VALUES (1)")
    assert errors.explain(exc).startswith("the store is read-only")


def test_anything_else_is_still_a_damaged_store() -> None:
    exc = _raised(sqlite3.connect(":memory:"), "SELECT * FROM queue")
    assert errors.explain(exc) == (
        "the store is damaged or not what this cronlab expects "
        "(OperationalError: no such table: queue)"
    )
