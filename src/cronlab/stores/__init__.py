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
TimeSource = Literal["server", "caller"]
LOCK_WAIT_S = 5.0  # a write's longest wait for a lock: below the default 10 s lease TTL


def preload(url: str) -> None:
    """Import the dialect (and its driver) ``url`` needs, without connecting: a process can
    do its imports while it waits (the cluster's start gate). A bad URL is left to
    ``open_store`` to say."""
    try:
        scheme = urls.parse(url).scheme
    except Exception:
        return
    if scheme == "sqlite":
        import cronlab.stores.sqlite
    else:
        import cronlab.stores.postgres  # noqa: F401


def open_store(
    url: str,
    *,
    create: bool,
    read_only: bool = False,
    fencing: Fencing = "lease",
    lock_wait_s: float | None = None,
    time_source: TimeSource = "server",
    any_thread: bool = False,
) -> SqlStore:
    """The store behind ``--store``: ``sqlite:///PATH`` or ``postgresql://…``.

    ``create=False`` refuses a store that does not exist yet (nothing written); ``read_only``
    (a command that only reads) also never changes it: no migration, and a SQLite file is
    opened read-only, with no lock file beside it.
    ``lock_wait_s``: how long a write may wait for a lock before ``BackendUnavailable`` (a
    scheduler passes half its lease TTL, so a writer paused inside its transaction cannot
    hold it past a takeover); None: ``LOCK_WAIT_S`` on SQLite, no limit on PostgreSQL (where
    handlers run inside the transaction, as long as they take).
    ``time_source``: on a server, whose clock judges due-ness and lease expiry — the
    server's, or the caller's (an ``App`` given a clock of its own: a test's ``FakeClock``).
    ``any_thread``: a SQLite connection that another thread may close (``App.close``; it is
    still used by one thread at a time).
    """
    parsed = urls.parse(url)
    if parsed.scheme == "sqlite":
        from cronlab.stores.sqlite import SqliteStore

        wait_s = LOCK_WAIT_S if lock_wait_s is None else lock_wait_s
        return SqliteStore(
            parsed.path,
            create=create,
            read_only=read_only,
            fencing=fencing,
            lock_wait_s=wait_s,
            any_thread=any_thread,
        )
    from cronlab.stores.postgres import PostgresStore

    return PostgresStore(
        url,
        create=create,
        read_only=read_only,
        fencing=fencing,
        lock_wait_s=lock_wait_s,
        time_source=time_source,
    )
