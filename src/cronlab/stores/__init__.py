"""Stores: one SQL store (``sql.py``) with a dialect per database (``sqlite.py``,
``postgres.py``), and ``memory.py`` (SQLite ``:memory:`` through the same code).

``open_store`` picks the dialect by URL and imports only that one's driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from cronlab import urls

if TYPE_CHECKING:
    from cronlab.stores.sql import SqlStore

Fencing = Literal["lease", "epoch"]


def open_store(url: str, *, create: bool, fencing: Fencing = "lease") -> SqlStore:
    """The store behind ``--store``: ``sqlite:///PATH`` or ``postgresql://…``.

    ``create=False`` refuses a store that does not exist yet (nothing written).
    """
    parsed = urls.parse(url)
    if parsed.scheme == "sqlite":
        from cronlab.stores.sqlite import SqliteStore

        return SqliteStore(parsed.path, create=create, fencing=fencing)
    from cronlab.stores.postgres import PostgresStore

    return PostgresStore(url, create=create, fencing=fencing)
