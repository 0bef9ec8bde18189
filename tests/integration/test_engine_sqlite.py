"""The SQLite store across real processes: query plans, migrations, lease races, fencing."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cronlab.exceptions import ConfigError
from cronlab.stores.sqlite import QUERIES as Q
from cronlab.stores.sqlite import SqliteStore, split_statements

from .conftest import wait_until

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("query", ["claim_due", "read_due"])
def test_due_scan_uses_the_partial_pending_index(tmp_path: Path, query: str) -> None:
    store = SqliteStore(tmp_path / "plan.db")
    args = {"epoch": 1, "now": 0, "limit": 5, "after_ms": 0, "after_id": 0}
    plan = store.query(f"EXPLAIN QUERY PLAN {Q[query]}", args)
    details = " | ".join(row[3] for row in plan)
    assert "USING INDEX cronlab_tasks_pending_due (trigger_ms<?)" in details
    assert "SCAN cronlab_tasks" not in details


def test_migrations_are_numbered_applied_once_and_recorded(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "m.db").close()
    again = SqliteStore(tmp_path / "m.db")
    assert again.schema_versions() == [1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15, 16]
    names = again.query(again.own("SELECT name FROM cronlab_schema ORDER BY version"))
    assert names == [
        ("001_base.sql",),
        ("002_fence_per_kind.sql",),
        ("003_dispatched_index.sql",),
        ("004_schedule_app.sql",),
        ("005_processes_by_owner.sql",),
        ("010_operations.sql",),
        ("011_history_horizon.sql",),
        ("012_run_finished.sql",),
        ("013_process_place.sql",),
        ("014_beside_the_app.sql",),
        ("015_task_column.sql",),
        ("016_ids_never_reused.sql",),
    ]


OLD = ["001_init.sql", "002_invoices.sql", "003_copies.sql", "004_slim_queue.sql"]
OLD += ["005_schedules.sql", "006_envelopes.sql"]


def _old_store(path: Path, applied: list[str]) -> None:
    """A store as cronlab 0.1 left it: the same tables, its own migration table."""
    import sqlite3

    from cronlab.stores.sql.dialect import sql_files

    conn = sqlite3.connect(path)
    base = sql_files("shared")["001_base.sql"] + "\n" + sql_files("sqlite")["001_base.sql"]
    for statement in split_statements(base):
        conn.execute(statement)
    conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT)")
    conn.executemany("INSERT INTO schema_version VALUES (?, ?)", enumerate(applied, 1))
    conn.execute("INSERT INTO tasks (idempotency_key, handler, trigger_ms) VALUES ('k', 'h', 1)")
    conn.commit()
    conn.close()


def test_a_store_of_cronlab_0_1_is_refused_untouched(tmp_path: Path) -> None:
    """Its takeover is retired (issue 29): a 0.1 store is a database with other tables."""
    _old_store(tmp_path / "old.db", OLD)
    before = (tmp_path / "old.db").read_bytes()
    with pytest.raises(ConfigError, match="is not a cronlab store"):
        SqliteStore(tmp_path / "old.db")
    assert (tmp_path / "old.db").read_bytes() == before


@pytest.mark.parametrize(
    ("columns", "rows", "tables"),
    [
        ("version INTEGER PRIMARY KEY, name TEXT", [(1, "create_users")], "users"),
        ("version INTEGER PRIMARY KEY, name TEXT", [(1, "001_init.sql")], "users"),  # 0.1's name
        (
            "version INTEGER PRIMARY KEY, name TEXT",
            [(7, "001_init.sql")],
            "tasks lease fence queue",
        ),
        ("version INTEGER PRIMARY KEY, name TEXT, at TEXT", [(1, "001_init.sql", "x")], ""),
        ("version INTEGER PRIMARY KEY, name TEXT", [(2, "002_invoices.sql")], ""),  # no 001
    ],
)
def test_a_schema_version_table_alone_is_not_a_cronlab_0_1_store(
    tmp_path: Path, columns: str, rows: list[tuple[object, ...]], tables: str
) -> None:
    """Issue 28: any ``schema_version(version, name)`` table made a database a 0.1 store.
    Issue 31: such a file is an application's, and the store goes beside its tables (left as
    they were), unless it holds cronlab's own bare table names (``migrate.LOOKALIKE``): a
    store no cronlab of today reads, refused untouched."""
    import sqlite3

    db = tmp_path / "theirs.db"
    conn = sqlite3.connect(db)
    conn.execute(f"CREATE TABLE schema_version ({columns})")
    conn.executemany(f"INSERT INTO schema_version VALUES ({', '.join('?' * len(rows[0]))})", rows)
    for table in tables.split() or ["tasks", "lease", "fence", "queue"]:
        conn.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY)")
        conn.execute(f"INSERT INTO {table} VALUES (7)")
    conn.commit()
    theirs = _their_tables(conn)
    conn.close()
    before = db.read_bytes()
    if "users" not in tables:
        with pytest.raises(ConfigError, match="is not a cronlab store"):
            SqliteStore(db)
        assert db.read_bytes() == before
        return
    SqliteStore(db).close()
    conn = sqlite3.connect(db)
    assert _their_tables(conn) == theirs
    conn.close()


def _their_tables(conn: Any) -> dict[str, Any]:
    """Every table but cronlab's and SQLite's own (``sqlite_sequence``, which AUTOINCREMENT
    keeps: cronlab's ids are noted there under its tables' names): its statement and rows."""
    found = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'cronlab_%'"
        " AND name NOT LIKE 'sqlite_%'"
    ).fetchall()
    return {name: (sql, conn.execute(f"SELECT * FROM {name}").fetchall()) for name, sql in found}


def test_an_apps_own_schema_version_table_in_a_store_is_left_alone(tmp_path: Path) -> None:
    """Issue 28: a migration on a store whose app keeps a ``schema_version`` table of its own
    took the store for 0.1's (and refused it, or dropped the app's table)."""
    import sqlite3

    SqliteStore(tmp_path / "s.db").close()
    conn = sqlite3.connect(tmp_path / "s.db")
    conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO schema_version VALUES (1, 'create_users')")
    conn.execute("DELETE FROM cronlab_schema WHERE version = 11")  # a store before 011
    conn.execute("ALTER TABLE cronlab_schedules DROP COLUMN pruned_through_ms")
    conn.commit()
    conn.close()
    store = SqliteStore(tmp_path / "s.db")
    assert store.schema_versions() == [1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15, 16]
    assert store.query("SELECT * FROM schema_version") == [(1, "create_users")]
    store.close()


def test_a_read_only_store_is_never_migrated(tmp_path: Path) -> None:
    import sqlite3

    SqliteStore(tmp_path / "old.db").close()
    conn = sqlite3.connect(tmp_path / "old.db")
    conn.execute("DELETE FROM cronlab_schema WHERE version = 13")  # a store before 013
    conn.execute("ALTER TABLE cronlab_processes DROP COLUMN place")
    conn.commit()
    conn.close()
    before, files = (tmp_path / "old.db").read_bytes(), sorted(tmp_path.iterdir())
    with pytest.raises(ConfigError, match=r"lacks migration 013, older than"):
        SqliteStore(tmp_path / "old.db", create=False, read_only=True)
    assert (tmp_path / "old.db").read_bytes() == before
    assert sorted(tmp_path.iterdir()) == files


def _contend(
    path: str, owner: str, ttl_ms: int, seconds: float, out: multiprocessing.Queue
) -> None:  # type: ignore[type-arg]
    from cronlab.clock import SystemClock
    from cronlab.election.store import StoreElector

    elector = StoreElector(SqliteStore(path), SystemClock())
    seen: set[int] = set()
    held_until = 0.0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        lease = elector.acquire_or_renew(owner, ttl_ms)
        if lease is not None and lease.epoch not in seen:
            seen.add(lease.epoch)
            out.put((lease.epoch, owner))
            held_until = time.monotonic() + ttl_ms / 1000
        if lease is not None and time.monotonic() > held_until:
            time.sleep(ttl_ms / 1000 * 1.5)  # stop renewing: let it expire so others take over
        time.sleep(0.005)


def test_processes_racing_for_the_lease_never_share_an_epoch(tmp_path: Path) -> None:
    path = str(tmp_path / "race.db")
    SqliteStore(path).close()
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_contend, args=(path, f"p{i}", 200, 3.0, out)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    got: list[tuple[int, str]] = []
    while not out.empty():
        got.append(out.get())
    by_epoch: dict[int, set[str]] = {}
    for epoch, owner in got:
        by_epoch.setdefault(epoch, set()).add(owner)
    assert len(by_epoch) >= 3
    assert all(len(owners) == 1 for owners in by_epoch.values())
    assert sorted(by_epoch) == list(range(1, max(by_epoch) + 1))


PROBE = """
import os, signal, sys
from cronlab.election.store import StoreElector
from cronlab.exceptions import FencedError
from cronlab.clock import SystemClock
from cronlab.stores.sqlite import SqliteStore
store, clock = SqliteStore(sys.argv[1]), SystemClock()
lease = StoreElector(store, clock).acquire_or_renew("old", 1000)
now = clock.now_ms()
print("leader", lease.epoch, flush=True)
os.kill(os.getpid(), signal.SIGSTOP)  # the pause: between "I lead" and the write
try:
    print("wrote", store.dispatch_due(now, 100, lease.epoch), flush=True)
except FencedError as exc:
    print("fenced", exc.epoch, exc.current, flush=True)
"""


def _stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


def test_a_leader_paused_past_its_ttl_has_its_write_refused(tmp_path: Path) -> None:
    from cronlab.clock import SystemClock
    from cronlab.election.store import StoreElector
    from cronlab.ports import NewTask

    path = str(tmp_path / "fence.db")
    store, clock = SqliteStore(path), SystemClock()
    store.add_tasks(
        [NewTask(idempotency_key=f"k{i}", task="invoice", trigger_ms=0) for i in range(10)]
    )
    probe = subprocess.Popen([sys.executable, "-c", PROBE, path], stdout=subprocess.PIPE, text=True)
    assert probe.stdout is not None
    try:
        assert probe.stdout.readline().split() == ["leader", "1"]
        wait_until(lambda: _stopped(probe.pid), 10, "the probe to stop itself")
        time.sleep(1.1)  # past its TTL while stopped
        new = wait_until(
            lambda: StoreElector(store, clock).acquire_or_renew("new", 5000),
            10,
            "a standby to take the lease",
        )
        assert new.epoch == 2
        os.kill(probe.pid, signal.SIGCONT)
        assert probe.stdout.readline().split() == ["fenced", "1", "2"]
    finally:
        probe.kill()
        probe.wait()
        probe.stdout.close()
    assert store.counts()["PENDING"] == 10
    assert store.queue_depth() == 0
