"""``cronlab schedule add|list|show|pause|resume|remove|trigger`` on a store, as a subprocess."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from shell import cronlab

pytestmark = pytest.mark.acceptance


def ok(*args: str, cwd: Path | None = None) -> str:
    out = cronlab(*args, cwd=cwd)
    assert out.returncode == 0, out.stderr
    return out.stdout


def one_line_error(out: subprocess.CompletedProcess[str], *words: str) -> None:
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("cronlab: error: ") and out.stderr.count("\n") == 1
    assert "Traceback" not in out.stderr
    for word in words:
        assert word in out.stderr


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'cron.db'}"


def listing(url: str) -> Any:
    return json.loads(ok("schedule", "list", "--store", url, "--json"))["schedules"]


def add(url: str, name: str, *flags: str) -> str:
    return ok(
        "schedule", "add", name, "0 9 * * MON-FRI", "--handler", "invoice", *flags, "--store", url
    )


def test_add_then_list_shows_the_next_fire_in_the_schedules_zone(url: str) -> None:
    line = add(url, "standup", "--tz", "America/New_York", "--payload", '{"team": "a"}')
    assert line.startswith("standup  '0 9 * * MON-FRI' America/New_York → invoice  next ")
    (s,) = listing(url)
    assert s["next_fire"].endswith(("T09:00:00-05:00", "T09:00:00-04:00"))
    assert s["payload"] == {"team": "a"} and s["last_outcome"] is None
    assert s["catchup"] == "latest" and s["overlap"] == "skip" and not s["paused"]
    shown = json.loads(ok("schedule", "show", "standup", "--store", url, "--json"))
    assert shown == s
    assert "last: never run" in ok("schedule", "list", "--store", url)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("x", "0 9 * *", "--handler", "invoice"), ("bad cron expression", "'0 9 * *'")),
        (("x", "0 9 * * *", "--handler", "invoice", "--tz", "Mars/Base"), ("'Mars/Base'",)),
        (("x", "0 9 * * *", "--handler", "bill"), ("unknown task 'bill'",)),
        (("x", "0 9 * * *", "--handler", "invoice", "--payload", "[1]"), ("--payload",)),
        (("x y", "0 9 * * *", "--handler", "invoice"), ("bad schedule name", "'x y'")),
    ],
)
def test_a_bad_schedule_is_one_line_and_writes_nothing(
    tmp_path: Path, url: str, args: tuple[str, ...], words: tuple[str, ...]
) -> None:
    one_line_error(cronlab("schedule", "add", *args, "--store", url), *words)
    assert not (tmp_path / "cron.db").exists()


def test_a_duplicate_name_is_one_line_and_changes_nothing(url: str) -> None:
    add(url, "standup")
    before = listing(url)
    out = cronlab("schedule", "add", "standup", "* * * * *", "--handler", "fail", "--store", url)
    one_line_error(out, "'standup'", "already exists")
    assert listing(url) == before


def test_add_accepts_the_handlers_of_an_app(tmp_path: Path, url: str) -> None:
    (tmp_path / "jobs.py").write_text(
        "import cronlab\n"
        f"app = cronlab.App({url!r})\n"
        "@app.task(name='bill')\n"
        "def bill(ctx):\n"
        "    pass\n"
    )
    args = ("schedule", "add", "monthly", "0 0 1 * *", "--handler", "bill", "--store", url)
    one_line_error(cronlab(*args, cwd=tmp_path), "unknown task 'bill'", "--app")
    ok(*args, "--app", "jobs:app", "--tz", "Europe/Berlin", cwd=tmp_path)
    (s,) = listing(url)
    assert s["task"] == "bill" and s["next_fire"].endswith("T00:00:00+01:00")
    one_line_error(cronlab(*args, "--app", "nosuch:app", cwd=tmp_path), "'nosuch'")


def test_pause_resume_trigger_remove(url: str) -> None:
    add(url, "standup")
    assert ok("schedule", "pause", "standup", "--store", url) == "paused standup\n"
    (s,) = listing(url)
    assert s["paused"] and s["next_fire"] is None
    assert "paused" in ok("schedule", "list", "--store", url)
    assert ok("schedule", "trigger", "standup", "--store", url).startswith(
        "triggered standup: task trigger:standup:"
    )
    assert "next " in ok("schedule", "resume", "standup", "--store", url)
    assert listing(url)[0]["next_fire"] is not None
    status = json.loads(ok("status", "--store", url, "--json"))
    assert status["tasks"]["PENDING"] == 2  # the next occurrence and the triggered run
    assert ok("schedule", "remove", "standup", "--store", url) == "removed standup\n"
    assert listing(url) == []
    one_line_error(cronlab("schedule", "remove", "standup", "--store", url), "'standup'")
    one_line_error(cronlab("schedule", "show", "standup", "--store", url), "'standup'")


def test_reading_a_missing_store_is_one_line_and_creates_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'none.db'}"
    one_line_error(cronlab("schedule", "list", "--store", url), "none.db")
    assert not (tmp_path / "none.db").exists()


@pytest.mark.parametrize("command", ["cluster", "scheduler", "worker"])
@pytest.mark.parametrize(
    ("spec", "words"),
    [("nosuch:app", ("cannot import 'nosuch'",)), ("jobs:nope", ("not a cronlab.App",))],
)
def test_a_bad_app_is_one_line_before_anything_starts(
    tmp_path: Path, command: str, spec: str, words: tuple[str, ...]
) -> None:
    (tmp_path / "jobs.py").write_text("nope = 1\n")
    url = f"sqlite:///{tmp_path / 'cron.db'}"
    out = cronlab(command, "--store", url, "--app", spec, cwd=tmp_path)
    one_line_error(out, f"--app {spec!r}", *words)
    assert not (tmp_path / "cron.db").exists()
