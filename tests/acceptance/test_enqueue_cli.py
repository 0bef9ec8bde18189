"""``cronlab enqueue HANDLER --in|--at`` as a subprocess: a durable one-off timer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from shell import cronlab

from cronlab.stores.sqlite import SqliteStore

pytestmark = pytest.mark.acceptance
DAY_MS = 86_400_000


def test_in_three_days_is_a_pending_task_due_then(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cron.db'}"
    before = time.time_ns() // 1_000_000
    out = cronlab(
        "enqueue",
        "invoice",
        "--payload",
        '{"customer": "c"}',
        "--in",
        "3d",
        "--store",
        url,
        "--json",
    )
    after = time.time_ns() // 1_000_000
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert before + 3 * DAY_MS <= data["due_ms"] <= after + 3 * DAY_MS and data["added"]
    store = SqliteStore(tmp_path / "cron.db", create=False)
    rows = store.query(
        store.own("SELECT idempotency_key, task, payload, trigger_ms, status FROM tasks")
    )
    assert rows == [(data["key"], "invoice", '{"customer": "c"}', data["due_ms"], "PENDING")]
    store.close()


def test_at_an_instant_and_a_key_make_a_retry_add_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cron.db'}"
    args = ("enqueue", "fail", "--at", "2026-11-01T09:00:00+01:00", "--key", "k1", "--store", url)
    first = json.loads(cronlab(*args, "--json").stdout)
    second = cronlab(*args)
    assert first == {
        "key": "k1",
        "task": "fail",
        "due": "2026-11-01T08:00:00+00:00",
        "due_ms": 1_793_520_000_000,
        "added": True,
    }
    assert second.returncode == 0 and second.stdout.startswith("already there: k1")


@pytest.mark.parametrize("when", [(), ("--in", "0s")])
def test_with_no_delay_or_a_zero_one_the_task_is_due_now(
    tmp_path: Path, when: tuple[str, ...]
) -> None:
    """Issue 31: ``enqueue`` had no "now" form (no --in/--at was refused, ``--in 0s`` too)."""
    before = time.time_ns() // 1_000_000
    out = cronlab(
        "enqueue", "invoice", *when, "--store", f"sqlite:///{tmp_path / 'c.db'}", "--json"
    )
    after = time.time_ns() // 1_000_000
    assert out.returncode == 0, out.stderr
    assert before <= json.loads(out.stdout)["due_ms"] <= after


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ("invoice", "--in", "3d", "--at", "2026-11-01T09:00Z"),
            ("--in DELAY or --at TIME, not both",),
        ),
        (("invoice", "--in", "-1s"), ("bad delay", "'-1s'")),
        (("invoice", "--in", "3 days"), ("bad delay", "'3 days'")),
        (("invoice", "--at", "2026-11-01T09:00"), ("no UTC offset",)),
        (("invoice", "--in", "1h", "--payload", "{nope"), ("--payload", "not JSON")),
        (("bill", "--in", "1h"), ("unknown task 'bill'",)),
    ],
)
def test_mistakes_are_one_line_and_write_nothing(
    tmp_path: Path, args: tuple[str, ...], words: tuple[str, ...]
) -> None:
    out = cronlab("enqueue", *args, "--store", f"sqlite:///{tmp_path / 'cron.db'}")
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("cronlab: error: ")
    for word in words:
        assert word in out.stderr
    assert not (tmp_path / "cron.db").exists()


# --many: a run per line of a JSON Lines file, on an app of the user's own (issue 14).

JOBS = """
import cronlab

app = cronlab.App("sqlite:///cron.db", name="jobs")
bare = cronlab.App(name="bare")  # no URL: CRONLAB_STORE, read when imported


@app.task(name="bill")
def bill(ctx: cronlab.Context, customer: int, plan: str = "basic") -> None: ...


@bare.task(name="bill")
def bare_bill(ctx: cronlab.Context, customer: int) -> None: ...
"""
GOOD = 10_001  # lines before a bad one: more than a batch (10,000) of defer_many


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("CRONLAB_STORE", raising=False)  # the subprocesses inherit os.environ
    (tmp_path / "jobs.py").write_text(JOBS)
    return tmp_path


def jsonl(path: Path, lines: list[object]) -> str:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def tasks_in(db: Path) -> list[tuple[str, str]]:
    if not db.exists():
        return []
    store = SqliteStore(db, create=False)
    try:
        return [
            tuple(r) for r in store.query(store.own("SELECT idempotency_key, payload FROM tasks"))
        ]
    finally:
        store.close()


def test_many_lines_may_carry_their_keys_and_a_second_run_adds_none(workdir: Path) -> None:
    lines = [[{"customer": c}, f"bill:{c}"] for c in range(3)] + [{"customer": 9}]
    path = jsonl(workdir / "bills.jsonl", lines)
    many = ("enqueue", "bill", "--many", path, "--app", "jobs:app")  # --store: the app's own
    first = cronlab(*many, "--json", cwd=workdir)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {"task": "bill", "added": 4, "existing": 0}
    keyed = jsonl(workdir / "keyed.jsonl", lines[:3])
    again = cronlab(*many[:3], keyed, *many[4:], cwd=workdir)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "deferred 0 run(s) of bill (3 already there)"
    rows = dict(tasks_in(workdir / "cron.db"))
    assert len(rows) == 4 and rows["bill:2"] == '{"customer":2}'


def test_the_store_defaults_to_the_apps_own_then_to_cronlab_store(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = jsonl(workdir / "one.jsonl", [{"customer": 1}])
    none = cronlab("enqueue", "bill", "--many", path, "--app", "jobs:bare", cwd=workdir)
    assert none.returncode == 2 and none.stderr.count("\n") == 1, none.stderr
    assert "no store: give --store" in none.stderr
    single = cronlab("enqueue", "fail", "--in", "1h", cwd=workdir)
    assert single.returncode == 2 and "no store: give --store" in single.stderr
    monkeypatch.setenv("CRONLAB_STORE", f"sqlite:///{workdir / 'env.db'}")
    out = cronlab("enqueue", "bill", "--many", path, "--app", "jobs:bare", cwd=workdir)
    assert out.returncode == 0, out.stderr
    out = cronlab("enqueue", "fail", "--in", "1h", "--key", "k", cwd=workdir)
    assert out.returncode == 0, out.stderr
    assert sorted(k for k, _ in tasks_in(workdir / "env.db"))[-1] == "k"
    assert len(tasks_in(workdir / "env.db")) == 2
    out = cronlab("enqueue", "bill", "--many", path, "--app", "jobs:app", cwd=workdir)
    assert out.returncode == 0 and len(tasks_in(workdir / "cron.db")) == 1  # the app's URL first


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ({"customer": 1, "plan": "é" * 20_000}, "at most 65,536"),  # 40 kB, 120 kB escaped
        ({"customer": 1, "colour": "red"}, "unexpected argument 'colour'"),
        ([{"customer": 1}, ""], "idempotency key"),
        ([{"customer": 1}, 7], '[arguments, "key"]'),
        ([{"customer": 1}, "k", "extra"], '[arguments, "key"]'),
        ("NaN", "not JSON"),
    ],
)
def test_a_bad_line_past_the_first_batch_is_one_line_and_nothing_is_written(
    workdir: Path, bad: object, words: str
) -> None:
    lines: list[object] = [{"customer": c} for c in range(GOOD)]
    path = workdir / "bills.jsonl"
    jsonl(path, lines)
    with path.open("a") as f:
        f.write(("NaN" if bad == "NaN" else json.dumps(bad, ensure_ascii=False)) + "\n")
    out = cronlab("enqueue", "bill", "--many", str(path), "--app", "jobs:app", cwd=workdir)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert f"--many line {GOOD + 1}: " in out.stderr and words in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert tasks_in(workdir / "cron.db") == []


def _many_from(
    workdir: Path, source: str, text: str, shell: bool = False
) -> subprocess.CompletedProcess[str]:
    """``enqueue bill --many SOURCE`` with ``text`` on its stdin (``shell``: SOURCE is bash)."""
    many = f"exec {sys.executable} -m cronlab enqueue bill --many {source} --app jobs:app --json"
    return subprocess.run(
        ["bash", "-c", many] if shell else many.split()[1:],
        input=text,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=workdir,
    )


def test_from_stdin_a_bad_line_past_the_first_batch_writes_nothing(workdir: Path) -> None:
    """Issue 28: stdin was checked as it was written, in whole batches: 10,000 runs went in
    before the bad line stopped it. Every input is now read once and checked whole first."""
    lines = [{"customer": c} for c in range(GOOD)] + [{"customer": 1, "plan": "é" * 20_000}]
    out = _many_from(workdir, "-", "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr[-500:]
    assert out.stderr.startswith(f"cronlab: error: --many line {GOOD + 1}: "), out.stderr
    assert tasks_in(workdir / "cron.db") == []


BILLS = "".join(json.dumps([{"customer": c}, f"bill:{c}"]) + "\n" for c in range(5))


@pytest.mark.parametrize(
    ("source", "shell"),
    [("-", False), ("/dev/stdin", False), ("<(cat)", True), ("/dev/fd/0", False)],
)
def test_many_from_a_pipe_writes_every_line(workdir: Path, source: str, shell: bool) -> None:
    """Issue 28: a pipe (``<(…)``, ``/dev/stdin``) was read twice, once to check and once to
    write: "deferred 0 run(s)", exit 0, nothing written."""
    out = _many_from(workdir, source, BILLS, shell)
    assert out.returncode == 0, out.stderr[-500:]
    assert json.loads(out.stdout) == {"task": "bill", "added": 5, "existing": 0}
    assert sorted(k for k, _ in tasks_in(workdir / "cron.db")) == [f"bill:{c}" for c in range(5)]


def test_many_from_a_fifo_writes_every_line_and_does_not_hang(workdir: Path) -> None:
    """Issue 28: a FIFO hung (the second read waited for a writer that had gone)."""
    fifo = workdir / "bills.fifo"
    os.mkfifo(fifo)
    many = [sys.executable, "-m", "cronlab", "enqueue", "bill", "--many", str(fifo)]
    with subprocess.Popen(
        [*many, "--app", "jobs:app", "--json"],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        fifo.write_text(BILLS)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode == 0, err[-500:]
    assert json.loads(out) == {"task": "bill", "added": 5, "existing": 0}
    assert len(tasks_in(workdir / "cron.db")) == 5


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("/nonexistent", "No such file"),  # tracebacks (issue 28, item 13)
        ("/proc/self/mem", "cannot read"),
        ("/dev/zero", "longer than 65,536 bytes"),
        ("/proc/self/environ", "line 1:"),
    ],
)
def test_many_from_a_file_it_cannot_read_is_one_line(
    workdir: Path, source: str, words: str
) -> None:
    out = cronlab("enqueue", "bill", "--many", source, "--app", "jobs:app", cwd=workdir)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr[-500:]
    assert out.stderr.startswith("cronlab: error: --many") and words in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert not (workdir / "cron.db").exists()


def test_many_reads_a_bounded_input(workdir: Path) -> None:
    """Every input is bounded by what it costs: an endless stream of good lines stops at the
    line limit, with nothing written (it was written, batch after batch, for ever)."""
    many = [sys.executable, "-m", "cronlab", "enqueue", "bill", "--many", "-", "--app", "jobs:app"]
    with (
        subprocess.Popen(["yes", json.dumps({"customer": 1})], stdout=subprocess.PIPE) as yes,
        subprocess.Popen(
            many, stdin=yes.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=workdir
        ) as proc,
    ):
        try:
            _, err = proc.communicate(timeout=300)  # a liveness bound (87 s, a loaded slow box)
        finally:
            proc.kill()
            yes.kill()
    assert proc.returncode == 2 and err.count(b"\n") == 1, err[-500:]
    assert b"more than 1,000,000 lines" in err, err
    assert not (workdir / "cron.db").exists()
