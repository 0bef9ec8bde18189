"""Issue 28, data: writes to a file the user did not name, commands that change a file they
only read, and silent no-ops. Each case wrote somewhere else, changed a file or reported
success having done nothing; now it does what was asked, or says in one line why not."""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from shell import cronlab

from cronlab.ports import ProcessInfo
from cronlab.stores.sqlite import SqliteStore

pytestmark = pytest.mark.acceptance
ODD_NAMES = ["real#1.db", "q?mode=ro.db", "a%20b.db", "a b.db", "pct%41#x?.db"]
ADD = ["schedule", "add", "nightly", "0 0 * * *", "--handler", "fail"]
READERS = (
    ["status"],
    ["report"],
    ["runs"],
    ["schedule", "list"],
    ["schedule", "show", "nightly"],
    ["task", "show", "1"],  # (nightly's next occurrence)
)


def one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2 and done.stdout == "", done.stderr[-500:]
    assert done.stderr.startswith("cronlab: error: ") and done.stderr.count("\n") == 1, done.stderr[
        -500:
    ]
    assert "Traceback" not in done.stderr
    for word in words:
        assert word in done.stderr, done.stderr


def files(where: Path) -> list[str]:
    return sorted(p.name for p in where.iterdir())


@pytest.mark.parametrize("name", ODD_NAMES)
def test_a_sqlite_path_with_uri_characters_is_the_file_named(name: str, tmp_path: Path) -> None:
    """``sqlite:///data/real#1.db`` wrote into ``data/real``; a new such path ended in a
    traceback (the path went into a ``file:`` URI unescaped)."""
    url = f"sqlite:///{tmp_path / name}"
    added = cronlab("schedule", "add", "nightly", "0 0 * * *", "--handler", "fail", "--store", url)
    assert added.returncode == 0, added.stderr[-500:]
    assert files(tmp_path) == sorted([name, f"{name}.writer"])
    listed = cronlab("schedule", "list", "--store", url)
    assert listed.returncode == 0 and "nightly" in listed.stdout, listed.stderr[-500:]


@pytest.mark.parametrize("name", ODD_NAMES)
def test_read_only_commands_create_no_file(name: str, tmp_path: Path) -> None:
    """Read-only commands created stray empty files (``jobs``, ``q``, ``a b.db``) beside a
    store whose name holds ``?``, ``#`` or ``%XX``, and said nothing was written."""
    store = tmp_path / "s"
    store.mkdir()
    plain = f"sqlite:///{store / 'plain.db'}"
    add = ("schedule", "add", "nightly", "0 0 * * *", "--handler", "fail", "--store", plain)
    assert cronlab(*add).returncode == 0
    (store / "plain.db").rename(store / name)
    (store / "plain.db.writer").unlink()
    url = f"sqlite:///{store / name}"
    before = files(store)
    for command in READERS:
        done = cronlab(*command, "--store", url)
        assert done.returncode == 0, (command, done.stderr[-500:])
    assert files(store) == before


@pytest.mark.parametrize("name", ODD_NAMES)
def test_a_read_only_command_on_a_missing_store_is_one_line_and_creates_nothing(
    name: str, tmp_path: Path
) -> None:
    for command in READERS:
        one_line_error(cronlab(*command, "--store", f"sqlite:///{tmp_path / name}"), "no store")
    assert files(tmp_path) == []


def _their_db(path: Path, *, wal: bool = False) -> None:
    """Another program's database that keeps its own ``schema_version(version, name)``."""
    with sqlite3.connect(path) as conn:
        if wal:
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO schema_version VALUES (1, 'create_users')")
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO users VALUES (1, 'Ada')")
    conn.close()


@pytest.mark.parametrize("wal", [False, True], ids=["rollback journal", "WAL"])
@pytest.mark.parametrize("command", [*READERS, ["check"]], ids=" ".join)
def test_a_read_only_command_on_another_programs_schema_version_db_changes_nothing(
    command: list[str], wal: bool, tmp_path: Path
) -> None:
    """``cronlab status`` took a database with a ``schema_version(version, name)`` table for a
    cronlab 0.1 store: switched it to WAL (its header changed for good), gave it a ``.writer``
    file and told the user to "start cronlab 0.1 on it"."""
    db = tmp_path / "theirs.db"
    _their_db(db, wal=wal)
    before = db.read_bytes()
    one_line_error(cronlab(*command, "--store", f"sqlite:///{db}"), "no cronlab store in")
    assert db.read_bytes() == before and files(tmp_path) == ["theirs.db"]


def test_a_writer_on_another_programs_schema_version_db_builds_beside_it(tmp_path: Path) -> None:
    """A writer took it over as a 0.1 store (or said to start cronlab 0.1 on it). Issue 31:
    it is an application's database; the store goes beside its tables, which stay as they
    were, statements and rows."""
    db = tmp_path / "theirs.db"
    _their_db(db)
    before = _theirs(db)
    add = cronlab(
        "schedule", "add", "n", "0 0 * * *", "--handler", "fail", "--store", f"sqlite:///{db}"
    )
    assert add.returncode == 0, add.stderr
    assert _theirs(db) == before
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT name FROM cronlab_schedules").fetchall() == [("n",)]
    conn.close()


def _theirs(db: Path) -> dict[str, Any]:
    """The application's tables (all but cronlab's and SQLite's own): statements and rows."""
    with sqlite3.connect(db) as conn:
        found = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'cronlab_%'"
            " AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
        out = {n: (sql, conn.execute(f"SELECT * FROM {n}").fetchall()) for n, sql in found}
    conn.close()
    return out


def test_a_read_only_command_never_migrates_a_cronlab_store(tmp_path: Path) -> None:
    """A reader applied the migrations an older cronlab's store lacked (under that cronlab's
    running cluster): now it says so, and the file is as it was."""
    db = tmp_path / "s.db"
    url = f"sqlite:///{db}"
    add = cronlab("schedule", "add", "n", "0 0 * * *", "--handler", "fail", "--store", url)
    assert add.returncode == 0, add.stderr
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM cronlab_schema WHERE version = 11")
    conn.close()
    before = db.read_bytes()
    for command in READERS:
        done = cronlab(*command, "--store", url)
        one_line_error(done, "lacks migration 011, older than", "nothing was written")
    assert db.read_bytes() == before and files(tmp_path) == ["s.db", "s.db.writer"]


@pytest.mark.parametrize("command", [["status"], ADD])
def test_a_store_that_is_not_a_regular_file_is_refused(command: list[str]) -> None:
    """``schedule add --store sqlite:////dev/null`` created ``/dev/null.writer``."""
    assert not Path("/dev/null.writer").exists(), "left by an earlier run: remove it"
    one_line_error(cronlab(*command, "--store", "sqlite:////dev/null"), "not a regular file")
    assert not Path("/dev/null.writer").exists() and not Path("/dev/null-journal").exists()


def _on_a_small_disk(tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    """``script`` (sh, ``$C`` runs cronlab, ``$D`` is the disk) on a 256 kB tmpfs of its own,
    in a user and mount namespace (no root needed); skipped where the kernel refuses one."""
    disk = tmp_path / "disk"
    disk.mkdir()
    body = f'mount -t tmpfs -o size=256k tmpfs "$D" || exit 77\n{script}'
    env = {**os.environ, "C": f"{sys.executable} -m cronlab", "D": str(disk)}
    done = subprocess.run(
        ["unshare", "-Urm", "sh", "-c", body], capture_output=True, text=True, env=env, timeout=120
    )
    if done.returncode == 77 or "unshare failed" in done.stderr:
        pytest.skip(f"no mount namespace here: {done.stderr.strip()[:200]}")
    return done


def test_a_full_disk_is_reported_as_a_full_disk(tmp_path: Path) -> None:
    """Issue 28: ``database or disk is full`` was reported as "the store is damaged"."""
    done = _on_a_small_disk(
        tmp_path,
        'url="sqlite:///$D/s.db"\n'
        '$C invoices seed --store "$url" --count 100 --at +60 >/dev/null || exit 3\n'
        "while :; do\n"
        '  $C invoices seed --store "$url" --count 2000 --at +60 >/dev/null 2>"$D/../err"\n'
        '  rc=$?; [ "$rc" = 0 ] || break\n'
        "done\n"
        'cat "$D/../err" >&2; exit "$rc"',
    )
    one_line_error(done, "disk", "full")
    assert "damaged" not in done.stderr


def test_a_read_only_disk_is_reported_as_read_only(tmp_path: Path) -> None:
    """Issue 28: a write to a store on a read-only disk was a traceback (its ``.writer`` lock
    file) or "the store is damaged"."""
    done = _on_a_small_disk(
        tmp_path,
        'url="sqlite:///$D/s.db"\n'
        '$C schedule add a "0 0 * * *" --handler fail --store "$url" >/dev/null || exit 3\n'
        'mount -o remount,ro "$D" || exit 77\n'
        '$C schedule add b "0 0 * * *" --handler fail --store "$url"',
    )
    one_line_error(done, "read-only")
    assert "damaged" not in done.stderr


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("", "1-500 characters"),  # replaced by a random key: a retry added a duplicate
        ("k" * 501, "1-500 characters"),
        ("k" * 600, "1-500 characters"),  # stored
        ("k" * 100_000, "1-500 characters"),  # stored
    ],
    ids=["empty", "501", "600", "100000"],
)
def test_enqueue_key_has_the_one_rule_of_idempotency_keys(
    key: str, words: str, tmp_path: Path
) -> None:
    db = tmp_path / "s.db"
    done = cronlab("enqueue", "fail", "--in", "1h", "--key", key, "--store", f"sqlite:///{db}")
    one_line_error(done, "idempotency key", words)
    assert len(done.stderr) < 300 and not db.exists()


def test_enqueue_key_of_500_characters_is_stored_as_given(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    url = f"sqlite:///{db}"
    done = cronlab("enqueue", "fail", "--in", "1h", "--key", "é" * 500, "--store", url)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT idempotency_key FROM cronlab_tasks").fetchall() == [
            ("é" * 500,)
        ]
    conn.close()


HOST_ZONES = [
    ("localtime", "depends on the host"),  # /etc/localtime: each replica's own zone
    ("posixrules", "depends on the host"),
    ("Factory", "no zone set"),
    ("right/UTC", "time zone"),  # leap seconds, on the hosts that have it (unknown elsewhere)
    ("posix/Europe/Berlin", "time zone"),
]


@pytest.mark.parametrize(("tz", "words"), HOST_ZONES)
def test_a_zone_that_depends_on_the_host_is_refused(tz: str, words: str, tmp_path: Path) -> None:
    """``--tz localtime`` was accepted: the same stored schedule fired at 09:00 UTC on one
    replica and 09:00+09:00 on another."""
    db = tmp_path / "s.db"
    one_line_error(cronlab(*ADD, "--tz", tz, "--store", f"sqlite:///{db}"), f"{tz!r}", words)
    assert not db.exists()
    one_line_error(cronlab("schedule", "next", "0 9 * * *", "--tz", tz), f"{tz!r}", words)


SERVICE = """
import cronlab

app = cronlab.App()  # no name: the default


@app.cron("0 {hour} * * *", name="{name}")
@app.task(name="{name}")
def job(ctx: cronlab.Context) -> None: ...
"""


def test_two_services_with_default_app_names_keep_each_others_schedules(tmp_path: Path) -> None:
    """Syncing service B removed service A's schedule: both Apps were named "app"."""
    (tmp_path / "billing.py").write_text(SERVICE.format(hour=1, name="invoices"))
    (tmp_path / "reports.py").write_text(SERVICE.format(hour=2, name="digest"))
    url = f"sqlite:///{tmp_path / 's.db'}"
    for spec in ("billing:app", "reports:app", "billing:app"):
        done = cronlab("schedule", "sync", "--app", spec, "--store", url, "--json", cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-500:]
        assert json.loads(done.stdout)["removed"] == [], (spec, done.stdout)
    listed = json.loads(cronlab("schedule", "list", "--store", url, "--json").stdout)
    assert sorted(s["name"] for s in listed["schedules"]) == ["digest", "invoices"]


def _their_leader(db: Path, pid: int, place: str | None) -> None:
    """The store as pod B's cluster left it: its replica 0 holds the lease, registered as
    ``pid`` (a number in pod B's PID namespace) with ``place`` (where that number means it)."""
    store = SqliteStore(db)
    owner = f"scheduler-0@pod-b:{pid}:beef0001"
    assert store.lease_cas(owner, int(time.time() * 1000), 60_000) is not None
    info = ProcessInfo(role="scheduler", index=0, pid=pid, owner=owner, started_ms=0)
    store.register_process(dataclasses.replace(info, place=place) if place else info)
    store.close()


def _place(pid: int, template: str) -> str:
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    start = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    return template.format(boot=boot, ns=os.stat("/proc/self/ns/pid").st_ino, start=start)


@pytest.mark.parametrize(
    "place",
    [
        None,  # registered with no proof of where (an older cronlab)
        "00000000-0000-0000-0000-000000000000:{ns}:{start}",  # another host (or boot)
        "{boot}:1:{start}",  # this boot, another PID namespace (pod B's)
        "{boot}:{ns}:1",  # this namespace, but not the process that started then (pid reused)
    ],
    ids=["no proof", "another host", "another pid namespace", "pid reused"],
)
def test_crash_leader_signals_no_process_it_cannot_prove_is_the_leader(
    place: str | None, tmp_path: Path
) -> None:
    """Two pods on one store: `chaos crash-leader` in pod A SIGKILLed pod A's own process
    whose pid number was pod B's leader's."""
    db = tmp_path / "s.db"
    with subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "cronlab-standby"]
    ) as standby:
        try:
            _their_leader(db, standby.pid, place and _place(standby.pid, place))
            for command in (
                ["crash-leader"],
                ["crash-replica", "0"],
                ["pause-leader", "--for", "1"],
            ):
                done = cronlab("chaos", *command, "--store", f"sqlite:///{db}")
                assert standby.poll() is None, "the process was signalled"
                one_line_error(done, "scheduler-0@pod-b", "not signalled")
        finally:
            standby.kill()


def test_crash_leader_signals_the_leader_it_proves_is_here(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "cronlab-leader"]
    ) as leader:
        try:
            _their_leader(db, leader.pid, _place(leader.pid, "{boot}:{ns}:{start}"))
            done = cronlab("chaos", "crash-leader", "--store", f"sqlite:///{db}")
            assert done.returncode == 0, done.stderr
            assert leader.wait(timeout=10) == -9
        finally:
            leader.kill()
