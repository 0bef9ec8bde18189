"""What every part of the SQL store stands on: one ``Dialect`` and its named queries.

The store is split by port (``tasks``, ``queue``, ``lease``, ``dispatch``, ``schedules``,
``history``, ``processes``, ``alerts``, ``control``), each a small class over the one dialect
its ``SqlStore`` opened; a part that needs another's (a fence, an insert) is handed it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cronlab.stores.sql import placeholders
from cronlab.stores.sql.dialect import Dialect, fetch


class Part:
    """One port's reads and writes on ``db``; every public write is ONE transaction."""

    def __init__(self, db: Dialect) -> None:
        self.db, self.queries = db, db.queries

    def named(self, name: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """The rows of named read query ``name``, outside any write transaction."""
        args = params or {}
        query = self.queries[name]
        if self.db.name == "postgresql":
            query = placeholders.for_psycopg(query, args)
        return self.db.read(lambda c: fetch(c.execute(query, args)))
