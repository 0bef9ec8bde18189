"""What a database's own error says about the store, in the user's words: a full or read-only
disk is not a damaged store, and the one line should say which it is."""

from __future__ import annotations

# SQLite's primary result codes (``sqlite3.Error.sqlite_errorname``, before any ``_`` suffix
# of an extended code) and PostgreSQL's SQLSTATEs → what they mean for the store.
SQLITE = {
    "SQLITE_FULL": "the disk holding the store is full",
    "SQLITE_READONLY": "the store is read-only (its file, directory or disk)",
    "SQLITE_IOERR": "the disk holding the store failed to read or write",
    "SQLITE_CANTOPEN": "a file of the store cannot be opened",
    "SQLITE_PERM": "the store is read-only (its file, directory or disk)",
}
POSTGRESQL = {
    "53100": "the disk holding the store is full",
    "25006": "the store is read-only (a read-only transaction or standby server)",
    "58030": "the database server failed to read or write its disk",
}
DAMAGED = "the store is damaged or not what this cronlab expects"


def explain(exc: BaseException) -> str:
    """A one-line reason for an error the database raised (with the driver's own words)."""
    name = getattr(exc, "sqlite_errorname", None)
    found = SQLITE.get(_primary(name)) if isinstance(name, str) else None
    state = getattr(exc, "sqlstate", None)
    if found is None and isinstance(state, str):
        found = POSTGRESQL.get(state)
    if found is None:
        return f"{DAMAGED} ({type(exc).__name__}: {exc})"
    return f"{found} ({exc})"


def _primary(name: str) -> str:
    """``SQLITE_READONLY_DBMOVED`` → ``SQLITE_READONLY``."""
    return "_".join(name.split("_")[:2])
