"""The public API type-checks in a user's code (issue 14): ``mypy --strict`` run as a user runs
it — the venv's mypy in a directory of the user's own, on ``cronlab`` as installed (its
``py.typed``), with a config file of its own (not this repository's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.acceptance
MYPY = Path(sys.executable).with_name("mypy")

GOOD = """
from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import cronlab

app = cronlab.App("sqlite:///cron.db")


@app.task
def bill(ctx: cronlab.Context, plan: str, customer: int) -> None:
    changed: int = ctx.tx.execute("INSERT INTO bills VALUES (?, ?)", (plan, customer))
    rows: list[object] = ctx.tx.rows("SELECT 1")
    dialect: str = ctx.tx.dialect
    when: datetime = ctx.scheduled_for
    about: tuple[int, str, int, int, int] = (
        ctx.task_id, ctx.idempotency_key, ctx.scheduled_ms, ctx.attempt, ctx.now_ms
    )
    added: bool = ctx.defer(notify, {"user_id": customer}, delay=timedelta(minutes=5))
    ctx.defer("notify", {"user_id": customer}, at=datetime(2030, 1, 1, tzinfo=UTC))
    print(changed, rows, dialect, when, about, added)


@app.task(name="notify", retries=5, timeout=timedelta(seconds=30))
async def notify(ctx: cronlab.Context, user_id: int) -> None:
    await asyncio.sleep(0)


@app.cron("0 0 1 * *", tz="Europe/Berlin", catchup="all", overlap="skip")
@app.cron("0 12 * * *", name="noon", catchup="none", catchup_window=timedelta(minutes=5))
@app.task
def monthly(ctx: cronlab.Context) -> None: ...


def main(ctx: cronlab.Context) -> None:
    bill(ctx, plan="pro", customer=7)  # called here, now
    ref: cronlab.TaskRef = bill.defer(plan="pro", customer=7)
    print(ref.id, ref.key, ref.task, ref.due.isoformat(), ref.added)
    bill.defer(plan="pro", customer=8, delay=timedelta(days=3))
    bill.defer(plan="pro", customer=9, key="bill:9:2026-12")
    bill.defer(plan="pro", customer=10, at=datetime(2030, 1, 1, tzinfo=UTC))
    result: cronlab.DeferResult = bill.defer_many(
        ({"plan": "pro", "customer": c} for c in range(10)),
        at=datetime(2030, 1, 1, tzinfo=UTC),
        progress=lambda n: None,
    )
    bill.defer_many([({"plan": "pro", "customer": 1}, "bill:1"), {"plan": "pro", "customer": 2}])
    counts: cronlab.RunCounts = app.run_until_idle(timeout=timedelta(seconds=5))
    total: int = counts["ok"] + counts["noop"] + counts["error"] + counts["failed"]
    catchup: cronlab.Catchup = "latest"
    overlap: cronlab.Overlap = "allow"
    print(result.added + result.existing, total, catchup, overlap)
    print(monthly.name, notify.is_async, bill.retries, bill.timeout)


async def from_async() -> cronlab.TaskRef:
    return await notify.defer_async(user_id=3, delay=timedelta(seconds=1))


if __name__ == "__main__":
    app.run()
"""

HEAD = """
from datetime import timedelta

import cronlab

app = cronlab.App()


@app.task
def bill(ctx: cronlab.Context, plan: str, customer: int) -> None: ...


def main(ctx: cronlab.Context) -> None:
    pass
"""

TASK = "@app.task\ndef nightly(ctx: cronlab.Context) -> None: ..."
MISTAKES = {  # a user's mistake (a line of main, or a declaration) -> what mypy says
    "at_a_string": ('    bill.defer(plan="pro", customer=1, at="2030-01-01T00:00Z")', "at"),
    "delay_an_int": ('    bill.defer(plan="pro", customer=1, delay=3600)', "delay"),
    "call_wrong_type": ('    bill(ctx, plan="pro", customer="7")', "customer"),
    "call_missing": ('    bill(ctx, plan="pro")', "customer"),
    "many_delay_int": ('    bill.defer_many([{"plan": "pro", "customer": 1}], delay=5)', "delay"),
    "ctx_defer_delay": ("    ctx.defer(bill, {}, delay=3)", "delay"),
    "counts_typo": ('    print(app.run_until_idle()["okk"])', "okk"),
    "catchup_typo": ('@app.cron("0 0 * * *", catchup="al")\n' + TASK, "catchup"),
    "overlap_typo": ('@app.cron("0 0 * * *", overlap="sk1p")\n' + TASK, "overlap"),
    "no_ctx": ("@app.task\ndef no_ctx(user: str) -> None: ...", "task"),
}


def mypy(folder: Path, *files: str) -> subprocess.CompletedProcess[str]:
    """The venv's mypy as a user runs it: in their folder, strict, with their own config."""
    (folder / "mypy.ini").write_text(f"[mypy]\ncache_dir = {folder.parent / 'mypy-cache'}\n")
    return subprocess.run(
        [str(MYPY), "--strict", "--config-file", "mypy.ini", "--no-color-output", *files],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=folder,
        env={"PATH": "/usr/bin:/bin", "HOME": str(folder)},  # no MYPYPATH, no repository
    )


@pytest.fixture(scope="module")
def user(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("typing") / "user"
    folder.mkdir()
    return folder


def test_the_public_api_passes_mypy_strict_in_a_users_code(user: Path) -> None:
    (user / "jobs.py").write_text(GOOD)
    done = mypy(user, "jobs.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found in 1 source file" in done.stdout


def test_cronlab_is_found_as_the_installed_package_not_as_untyped(user: Path) -> None:
    (user / "which.py").write_text("import cronlab\nreveal_type(cronlab.App.run_until_idle)\n")
    done = mypy(user, "which.py")
    assert "RunCounts" in done.stdout, done.stdout + done.stderr  # typed, from py.typed
    assert "import-not-found" not in done.stdout and "import-untyped" not in done.stdout


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_a_users_type_mistake_is_reported(user: Path, mistake: str) -> None:
    line, word = MISTAKES[mistake]
    source = HEAD + line + "\n" if line.startswith("    ") else HEAD + "\n\n" + line + "\n"
    (user / f"{mistake}.py").write_text(source)
    done = mypy(user, f"{mistake}.py")
    where = source.count("\n", 0, source.index(line.splitlines()[0], len(HEAD))) + 1
    errors = [e for e in done.stdout.splitlines() if ": error: " in e]
    assert done.returncode == 1 and errors, done.stdout + done.stderr
    assert all(e.startswith(f"{mistake}.py:") for e in errors), errors
    assert any(f":{where}: error: " in e and word in e for e in errors), (where, errors)
