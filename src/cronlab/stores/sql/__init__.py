"""The SQL store, written once for SQLite and PostgreSQL.

``store.SqlStore`` answers the engine's ports, one part per port (``tasks``, ``dispatch``,
``queue``, ``lease``, ``schedules``, ``history``, ``processes``, ``alerting``,
``operations``), each a small class over one ``dialect.Dialect``; the dialect (``stores/sqlite.py``,
``stores/postgres.py``) holds what differs: connecting, running one transaction (SQLite's
writer lock, PostgreSQL's pool that retries a dropped connection), how id lists go over the
wire, the bulk insert and the enqueue statement, and each named query's text
(``<dialect>/queries.sql``: same names, same parameters; ``shared/queries.sql`` those both
take as they are). Migrations are numbered the same on both (``<dialect>/NNN_*.sql``).
"""

from __future__ import annotations

from cronlab.stores.sql.batch import SqlTx
from cronlab.stores.sql.dialect import Conn, Dialect
from cronlab.stores.sql.store import SqlStore

__all__ = ["Conn", "Dialect", "SqlStore", "SqlTx"]
