"""The in-memory store: the SQL store on a private SQLite ``:memory:`` database.

Not a second implementation: the same ``stores/sql/`` code, statements and handler runs as a
file store, so unit tests on it prove what they seem to. Gone with the process.
"""

from __future__ import annotations

from cronlab.stores import Fencing, sql
from cronlab.stores.sqlite import MEMORY, SqliteDialect


class MemoryStore(sql.SqlStore):
    """``ports.Store`` and friends in process memory (threads may share it)."""

    def __init__(self, *, fencing: Fencing = "lease") -> None:
        super().__init__(SqliteDialect(MEMORY), fencing=fencing)
