"""Input a hostile user typed (issue 13's probes): one line naming the problem, exit 2, and
nothing written — each case printed a traceback, wrote a row before failing, ran out of memory
or was accepted as nonsense before."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from shell import cronlab

pytestmark = pytest.mark.acceptance
ADD = ["schedule", "add", "nightly", "0 0 * * *", "--handler", "fail"]
DEEP = '{"a":' * 5_000 + "1" + "}" * 5_000


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["enqueue", "fail", "--in", "10000000d"], "at most 36600d"),  # a row, then OverflowError
        (["enqueue", "fail", "--in", "99999999999999999999s"], "at most 36600d"),
        (["enqueue", "fail", "--in", "1s", "--payload", '{"a": NaN}'], "is not JSON"),
        (["enqueue", "fail", "--in", "1s", "--payload", DEEP], "nests too deep"),
        ([*ADD, "--catchup-window", "99999999999999999999d"], "at most 36600d"),
        (["cluster", "--lease-ttl", "nan"], "not a finite number"),  # crashed the children
        (["cluster", "--visibility", "nan"], "not a finite number"),
        (["cluster", "--scan-interval", "nan"], "not a finite number"),
        (["cluster", "--worker-rate", "nan"], "not a finite number"),
        (["cluster", "--lease-ttl", "inf"], "--lease-ttl"),
        (["cluster", "--restart-after", "nan"], "--restart-after"),  # accepted
        (["cluster", "--workers", "100000000000000000000"], "--workers"),  # 24 GB, then OOM
        (["worker", "--rate", "nan"], "not a finite number"),
        (["scheduler", "--lease-ttl", "nan"], "not a finite number"),
        # found by test_cli_fuzz.py: each wrote the store, printed a traceback or ran for hours
        (["invoices", "seed", "--count", "10000000000", "--at", "+5"], "--count"),  # hours
        (["invoices", "seed", "--count", "5", "--at", "+1e20"], "out of range"),  # OverflowError
        (["invoices", "seed", "--count", "5", "--work-ms", "1" + "0" * 20, "--at", "+5"], "--work"),
        (["enqueue", "fail", "--in", "1s", "--key", "k\udcff"], "not UTF-8"),  # UnicodeEncodeError
        (["schedule", "show", "\udcff"], "not UTF-8"),  # bytes that are not UTF-8: a traceback
        (["scheduler", "--queue", "lease"], "expected store or redis"),  # the store written
        (["scheduler", "--election", "etcd://127.0.0.1:1"], "unreachable"),
        (["worker", "--queue", "redis://127.0.0.1:1/0"], "unreachable"),
        (["cluster", "--queue", "redis://127.0.0.1:1"], "unreachable"),
        (["chaos", "pause-leader", "--for", "nan"], "not a finite number"),
        (["worker", "--queue", "redis://:x@127.0.0.1:99999/0"], "port"),  # ValueError traceback
        (["cluster", "--queue", "redis://127.0.0.1:http/0"], "port"),
        (["cluster", "--queue", "redis://[::1/0"], "malformed Redis URL"),
        (["cluster", "--election", "etcd://127.0.0.1:99999"], "port"),
        (["cluster", "--election", "etcd://[::1"], "malformed etcd URL"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    args: list[str], words: str, tmp_path: Path
) -> None:
    db = tmp_path / "s.db"
    done = cronlab(*args, "--store", f"sqlite:///{db}")
    assert done.returncode == 2, done.stderr[-500:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], done.stderr[-500:]
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert not db.exists()


@pytest.mark.parametrize(
    "args",
    [
        ["cluster", "--election", "redis://:hunter2@127.0.0.1:6379"],  # not an election URL
        ["cluster", "--election", "etcd://u:hunter2@h:99999"],  # a port out of range
        ["cluster", "--election", "etcd://u:hunter2@[::1"],
        ["worker", "--queue", "redis://:hunter2@127.0.0.1:99999/0"],
        ["worker", "--queue", "redis://:hunter2@[::1/0"],
        ["status", "--store", "postgresql://u:hunter2@[::1/x"],  # psycopg echoed the URI
        ["status", "--store", "postgresql://u:hunter2%zz@127.0.0.1/x"],  # and a bad %-token
        ["status", "--store", "postgresql://u@[::1/x?password=hunter2"],
    ],
)
def test_a_password_in_a_malformed_url_is_never_printed(args: list[str], tmp_path: Path) -> None:
    """Issue 13: errors about an election, queue or store URL echoed its password."""
    db = tmp_path / "s.db"
    store = [] if "--store" in args else ["--store", f"sqlite:///{db}"]
    done = cronlab(*args, *store)
    assert done.returncode == 2, done.stderr[-500:]
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr[-500:]
    assert done.stderr.startswith("cronlab: error: ") and done.stdout == ""
    assert "hunter2" not in done.stderr + done.stdout, done.stderr
    assert not db.exists()


def test_a_seed_run_by_a_script_leaves_nothing_on_stderr(tmp_path: Path) -> None:
    """Its progress bar left a blank line on stderr (before an error, too: two lines)."""
    done = cronlab(
        "invoices",
        "seed",
        "--store",
        f"sqlite:///{tmp_path / 's.db'}",
        "--count",
        "3",
        "--at",
        "+60",
    )
    assert (done.returncode, done.stderr) == (0, "")


def test_no_idempotency_with_an_app_is_refused_before_the_store_is_written(
    tmp_path: Path,
) -> None:
    """Found by test_cli_fuzz.py: the cluster created the store, then refused."""
    (tmp_path / "jobs.py").write_text("import cronlab\napp = cronlab.App()\n")
    db = tmp_path / "s.db"
    args = ("--store", f"sqlite:///{db}", "--app", "jobs:app", "--no-idempotency")
    done = cronlab("cluster", *args, cwd=tmp_path)
    assert done.returncode == 2 and "--no-idempotency applies" in done.stderr
    assert done.stderr.count("\n") == 1 and not db.exists()


def test_run_of_an_app_with_no_store_is_one_line(tmp_path: Path) -> None:
    """Found by test_cli_fuzz.py: the banner ("… on its store — Ctrl-C stops"), then the error."""
    (tmp_path / "jobs.py").write_text("import cronlab\napp = cronlab.App()\n")
    done = cronlab("run", "--app", "jobs:app", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "has no store" in done.stderr


def test_a_retried_enqueue_shows_what_is_stored_and_another_payload_is_refused(
    tmp_path: Path,
) -> None:
    """Issue 13: ``enqueue --key k1`` again said ``added: false`` with the new due time, not
    the stored one, and silently kept the old payload when given another."""
    url = f"sqlite:///{tmp_path / 's.db'}"

    def enqueue_k1(delay: str, payload: str, *extra: str) -> subprocess.CompletedProcess[str]:
        args = ("--store", url, "--in", delay, "--key", "k1", "--payload", payload, *extra)
        return cronlab("enqueue", "fail", *args)

    first = json.loads(enqueue_k1("1h", '{"a": 1}', "--json").stdout)
    again = json.loads(enqueue_k1("2h", '{"a": 1}', "--json").stdout)
    assert (first["added"], again["added"]) == (True, False)
    assert again["due_ms"] == first["due_ms"]
    other = enqueue_k1("1h", '{"a": 2}')
    assert other.returncode == 2 and "another payload" in other.stderr
    assert other.stderr.count("\n") == 1 and other.stdout == ""


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("import cronlab\nx = 1 / 0\n", "ZeroDivisionError: division by zero (%s/jobs.py:2)"),
        ("def f(:\n", "SyntaxError: invalid syntax (%s/jobs.py:1)"),
    ],
)
def test_an_app_that_raises_or_does_not_parse_is_one_line_with_its_place(
    source: str, words: str, tmp_path: Path
) -> None:
    """Issue 13: a full traceback of cronlab's stack; now the user's error, file and line."""
    (tmp_path / "jobs.py").write_text(source)
    db = tmp_path / "s.db"
    done = cronlab(
        "enqueue",
        "fail",
        "--in",
        "1h",
        "--store",
        f"sqlite:///{db}",
        "--app",
        "jobs:app",
        cwd=tmp_path,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and words % tmp_path in done.stderr
    assert not db.exists()


def test_status_and_report_on_a_damaged_store_say_so_in_one_line(tmp_path: Path) -> None:
    """Issue 13: a store whose queue table was dropped made ``status`` print a traceback."""
    db = tmp_path / "s.db"
    url = f"sqlite:///{db}"
    assert (
        cronlab("invoices", "seed", "--store", url, "--count", "5", "--at", "+60").returncode == 0
    )
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE cronlab_queue")
        conn.execute("DROP TABLE cronlab_executions")
    for command in ("status", "report"):
        done = cronlab(command, "--store", url)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-300:]
        assert done.stderr.count("\n") == 1 and "no such table" in done.stderr


def test_a_store_of_a_newer_cronlab_and_a_store_corrupted_half_way_are_one_line(
    tmp_path: Path,
) -> None:
    """Issue 13: a store at schema version 999 was used silently; a file corrupted half way
    gave a traceback."""
    newer, corrupt = tmp_path / "newer.db", tmp_path / "corrupt.db"
    for db in (newer, corrupt):
        seed = ("invoices", "seed", "--store", f"sqlite:///{db}", "--count", "500", "--at", "+60")
        assert cronlab(*seed).returncode == 0
    with sqlite3.connect(newer) as conn:
        conn.execute("INSERT INTO cronlab_schema VALUES (999, '999_future.sql')")
    conn.close()
    with sqlite3.connect(corrupt) as conn:  # the tasks table's root page: every command reads it
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'cronlab_tasks'"
        ).fetchone()
    conn.close()
    data = bytearray(corrupt.read_bytes())
    at = (root - 1) * page_size
    data[at : at + page_size] = b"\xa5" * page_size
    corrupt.write_bytes(bytes(data))
    seed = ["invoices", "seed", "--count", "1", "--at", "+60"]
    for db, words, commands in (
        (newer, "schema version 999, newer than", (["status"], ["report"], seed)),
        (corrupt, "damaged", (["status"], ["report"])),
    ):
        before = db.read_bytes()
        for command in commands:
            done = cronlab(*command, "--store", f"sqlite:///{db}")
            assert done.returncode == 2 and done.stdout == "", done.stderr[-300:]
            lines = done.stderr.splitlines()
            assert len(lines) == 1 and words in lines[0], (command, done.stderr)
        assert db.read_bytes() == before


def test_a_writer_on_another_programs_sqlite_file_builds_beside_its_tables(
    tmp_path: Path,
) -> None:
    """Issue 13: ``invoices seed`` half-migrated a file that was not a cronlab store. Issue
    31: such a file is an application's; a writer builds the store beside its tables (names
    prefixed ``cronlab_``, in one transaction) and leaves them as they were."""
    db = tmp_path / "theirs.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("CREATE TABLE tasks (id INTEGER PRIMARY KEY, title TEXT)")  # the app's own
        conn.execute("INSERT INTO customers VALUES (1, 'Ada')")
        conn.execute("INSERT INTO tasks VALUES (1, 'write the report')")
    conn.close()
    seeded = cronlab(
        "invoices", "seed", "--count", "5", "--at", "+60", "--store", f"sqlite:///{db}"
    )
    assert seeded.returncode == 0, seeded.stderr[-500:]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT * FROM customers").fetchall() == [(1, "Ada")]
        assert conn.execute("SELECT * FROM tasks").fetchall() == [(1, "write the report")]
        assert conn.execute("SELECT count(*) FROM cronlab_tasks").fetchone() == (5,)
    conn.close()


@pytest.mark.parametrize(
    ("command", "variable"), [("lab", "CRONLAB_LAB_TOKEN"), ("console", "CRONLAB_CONSOLE_TOKEN")]
)
def test_help_names_the_variable_that_keeps_a_token_out_of_ps(command: str, variable: str) -> None:
    """Issue 13: ``--token`` shows in ``ps``; the help says how to pass it instead."""
    done = cronlab(command, "--help")
    assert done.returncode == 0 and variable in " ".join(done.stdout.split()), done.stdout
