"""``cronlab run``, ``cronlab schedule sync`` and ``cronlab enqueue --many`` as a user runs them,
on an app of the user's own (issue 14)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import shell
from shell import cronlab

pytestmark = pytest.mark.acceptance

JOBS = """
import cronlab

app = cronlab.App("sqlite:///cron.db", name="jobs")


@app.on_start
def tables(store):
    store.write(lambda tx: tx.execute("CREATE TABLE IF NOT EXISTS seen (what TEXT)"))


@app.cron("* * * * * *", catchup="none")
@app.task(name="tick")
def tick(ctx: cronlab.Context) -> None:
    ctx.tx.execute("INSERT INTO seen VALUES ('tick')")


@app.task(name="bill")
def bill(ctx: cronlab.Context, customer: int, plan: str = "basic") -> None:
    ctx.tx.execute("INSERT INTO seen VALUES (?)", (f"bill {customer} {plan}",))
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "jobs.py").write_text(JOBS)
    return tmp_path


def seen(workdir: Path) -> list[str]:
    with sqlite3.connect(workdir / "cron.db") as c:
        return [r[0] for r in c.execute("SELECT what FROM seen ORDER BY rowid")]


def run_until(
    workdir: Path, args: Sequence[str], done: Callable[[list[str]], bool]
) -> tuple[int, str]:
    """``cronlab ARGS`` in ``workdir`` until its ``tick`` task has run and ``done(seen)``
    holds (30 s at most), then SIGTERM: its exit code and stderr."""

    def ticked() -> bool:
        if not (workdir / "cron.db").exists():
            return False
        try:
            got = seen(workdir)
        except sqlite3.OperationalError:
            return False
        return "tick" in got and done(got)

    return shell.run_until(args, workdir, ticked)


def test_run_executes_a_deferred_task_and_a_cron_task_and_stops_on_sigterm(
    workdir: Path,
) -> None:
    out = cronlab(
        "enqueue",
        "bill",
        "--payload",
        '{"customer": 7}',
        "--in",
        "1s",
        "--store",
        "sqlite:///cron.db",
        "--app",
        "jobs:app",
        cwd=workdir,
    )
    assert out.returncode == 0, out.stderr
    code, err = run_until(workdir, ("run", "--app", "jobs:app"), lambda got: "bill 7 basic" in got)
    assert code == 0, err
    assert "schedule added: tick" in err and "Traceback" not in err
    assert "bill 7 basic" in seen(workdir) and "tick" in seen(workdir)


ENGINES = {
    "run": ("run",),
    "cluster": ("cluster", "--store", "sqlite:///cron.db", "--replicas", "1", "--workers", "1"),
}


@pytest.mark.parametrize("engine", ENGINES)
def test_an_engine_on_a_users_app_has_no_invoices_table(workdir: Path, engine: str) -> None:
    """The lab's workload is an app of its own (cronlab/lab/invoices.py): an engine started
    with --app creates the engine's tables and what the app's on_start makes, nothing of it."""
    code, err = run_until(workdir, (*ENGINES[engine], "--app", "jobs:app"), lambda got: True)
    assert code == 0, err
    assert "tick" in seen(workdir)  # the engine ran the app's cron task
    with sqlite3.connect(workdir / "cron.db") as c:
        names = {r[0] for r in c.execute("SELECT name FROM sqlite_master")}
    assert {"cronlab_tasks", "cronlab_schedules", "seen"} <= names
    assert [n for n in names if "invoice" in n] == []


def test_run_needs_an_app(workdir: Path) -> None:
    out = cronlab("run", cwd=workdir)
    assert out.returncode == 2 and "needs --app" in out.stderr and "Traceback" not in out.stderr


def test_schedule_sync_says_what_it_added_changed_and_removed(workdir: Path) -> None:
    sync = ("schedule", "sync", "--app", "jobs:app", "--store", "sqlite:///cron.db", "--json")
    first = cronlab(*sync, cwd=workdir)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {"added": ["tick"], "changed": [], "removed": []}
    assert json.loads(cronlab(*sync, cwd=workdir).stdout)["added"] == []
    (workdir / "jobs.py").write_text(JOBS.replace('"* * * * * *", catchup="none"', '"*/5 * * * *"'))
    assert json.loads(cronlab(*sync, cwd=workdir).stdout)["changed"] == ["tick"]
    (workdir / "jobs.py").write_text(JOBS.replace('@app.cron("* * * * * *", catchup="none")', ""))
    plain = cronlab(*sync[:-1], cwd=workdir)
    assert plain.stdout.strip() == "removed: tick"


def test_schedule_sync_defaults_to_the_apps_own_store(workdir: Path) -> None:
    """Issue 31: ``schedule sync --app`` needed --store while ``run`` and ``enqueue`` took the
    app's own; now all three do (--store, else the app's URL, else CRONLAB_STORE)."""
    done = cronlab("schedule", "sync", "--app", "jobs:app", "--json", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"added": ["tick"], "changed": [], "removed": []}
    assert (workdir / "cron.db").exists()


def test_enqueue_checks_the_payload_against_the_task_before_writing(workdir: Path) -> None:
    """Issue 31: a payload with an unexpected name was written, then failed every attempt at
    run time; with --app it is refused now, in one line, and nothing is written."""
    bad = ("enqueue", "bill", "--payload", '{"customer": 1, "plna": "pro"}', "--app", "jobs:app")
    done = cronlab(*bad, cwd=workdir)
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    assert "plna" in done.stderr and "Traceback" not in done.stderr
    assert not (workdir / "cron.db").exists()
    good = cronlab(*bad[:3], '{"customer": 1, "plan": "pro"}', *bad[4:], "--json", cwd=workdir)
    assert good.returncode == 0 and json.loads(good.stdout)["added"], good.stderr


def test_enqueue_many_defers_a_run_per_line_and_checks_every_line_first(workdir: Path) -> None:
    lines = workdir / "customers.jsonl"
    lines.write_text("".join(json.dumps({"customer": c}) + "\n" for c in range(2_500)))
    args = (
        "enqueue",
        "bill",
        "--many",
        str(lines),
        "--store",
        "sqlite:///cron.db",
        "--app",
        "jobs:app",
        "--json",
    )
    out = cronlab(*args, cwd=workdir)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"task": "bill", "added": 2500, "existing": 0}
    bad = workdir / "bad.jsonl"
    bad.write_text('{"customer": 1}\n{"customer": 2, "colour": "red"}\n')
    out = cronlab(*args[:3], str(bad), *args[4:], cwd=workdir)
    assert (
        out.returncode == 2
        and "line 2" in out.stderr
        and "unexpected argument 'colour'" in out.stderr
    )
    with sqlite3.connect(workdir / "cron.db") as c:
        assert c.execute("SELECT count(*) FROM cronlab_tasks").fetchone() == (
            2500,
        )  # nothing of bad
