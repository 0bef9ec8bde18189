"""The engine's commands run as a user runs them: subprocesses, one-line errors, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.acceptance

MODEL_TOTALS = {
    "due",
    "dispatched",
    "executed",
    "duplicates",
    "missed",
    "backlog_peak",
    "drain_time_s",
    "takeover_delays_s",
}


def cronlab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cronlab", *args], capture_output=True, text=True, timeout=60
    )


def one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cronlab: error: "), done.stderr
    for word in words:
        assert word in lines[0]
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("status",),
        ("report",),
        ("chaos", "crash-leader"),
        ("invoices", "seed", "--count", "1", "--at", "+1"),
    ],
)
def test_unknown_store_scheme_is_one_line_naming_it(args: tuple[str, ...]) -> None:
    one_line_error(cronlab(*args, "--store", "mongodb://localhost/x"), "'mongodb'")


@pytest.mark.parametrize("args", [("status",), ("report",), ("chaos", "kill-worker")])
def test_missing_store_file_is_refused_and_not_created(tmp_path: Path, args: tuple[str, ...]):
    db = tmp_path / "absent.db"
    one_line_error(cronlab(*args, "--store", f"sqlite:///{db}"), str(db))
    assert not db.exists()


def test_a_sqlite_file_that_is_not_a_store_is_refused_untouched(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "other.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE mine (x)")
    conn.close()
    before = db.read_bytes()
    one_line_error(cronlab("report", "--store", f"sqlite:///{db}"), "no cronlab store in")
    assert db.read_bytes() == before


def test_unreadable_store_file_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "garbage.db"
    db.write_bytes(b"this is not a database" * 100)
    one_line_error(cronlab("status", "--store", f"sqlite:///{db}"), str(db))
    assert db.read_bytes() == b"this is not a database" * 100


@pytest.mark.parametrize(
    ("flags", "word"),
    [
        (("--count", "-5", "--at", "+1"), "-5"),
        (("--count", "5", "--at", "tomorrow"), "tomorrow"),
        (("--count", "5", "--at", "2026-01-01T00:00:00"), "UTC offset"),
    ],
)
def test_bad_seed_input_writes_nothing(tmp_path: Path, flags: tuple[str, ...], word: str) -> None:
    db = tmp_path / "seed.db"
    one_line_error(cronlab("invoices", "seed", "--store", f"sqlite:///{db}", *flags), word)
    assert not db.exists()


def test_no_leader_to_crash_writes_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'idle.db'}"
    assert (
        cronlab("invoices", "seed", "--store", url, "--count", "3", "--at", "+60").returncode == 0
    )
    one_line_error(cronlab("chaos", "crash-leader", "--store", url), "no leader")
    one_line_error(cronlab("chaos", "pause-leader", "--for", "1", "--store", url), "no leader")
    one_line_error(cronlab("chaos", "crash-replica", "0", "--store", url), "replica", "0")
    report = json.loads(cronlab("report", "--store", url, "--json").stdout)
    assert report["takeover_delays_s"] == [] and report["due"] == 0
    status = json.loads(cronlab("status", "--store", url, "--json").stdout)
    assert status["leader"] is None and status["processes"] == []


def test_bad_restart_after_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    done = cronlab("cluster", "--store", f"sqlite:///{db}", "--restart-after", "soon")
    one_line_error(done, "soon")
    assert not db.exists()


def test_seed_status_report_json_contract(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    seeded = json.loads(
        cronlab("invoices", "seed", "--store", url, "--count", "250", "--at", "+0", "--json").stdout
    )
    assert seeded["added"] == 250
    again = json.loads(
        cronlab(
            "invoices", "seed", "--store", url, "--count", "300", "--at", seeded["at"], "--json"
        ).stdout
    )
    assert again["added"] == 50  # the first 250 keys already exist
    status = json.loads(cronlab("status", "--store", url, "--json").stdout)
    assert set(status) >= {"leader", "processes", "tasks", "queue_depth", "epoch"}
    assert status["tasks"]["PENDING"] == 300 and status["queue_depth"] == 0
    report = json.loads(cronlab("report", "--store", url, "--json").stdout)
    assert set(report) >= MODEL_TOTALS | {"duplicate_invoices", "dispatch_lateness_ms"}
    assert (report["due"], report["dispatched"], report["executed"]) == (300, 0, 0)
    assert report["dispatch_lateness_ms"] == {"p50": None, "p99": None}
