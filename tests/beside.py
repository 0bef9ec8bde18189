"""The suite's long searches, run beside the rest of it.

``cronlab verify`` over hundreds of seeds and the mutation gate are CPU work that needs no
fixture, while most of the suite waits on processes, servers and a browser. A test marked
``@pytest.mark.beside(NAME)`` asks for the command ``COMMANDS[NAME]``: when such a test is
selected, ``tests/conftest.py`` starts the selected commands as collection ends, in lines
(``LINES``) of one after another, most at the lowest CPU priority (``nice 19``: they take the
cores the rest of the suite leaves idle, and its timings stay its own; ``NICE`` names the one
that is not), and moves the test to the end of the run, where it waits for its command's result
(``result``) and asserts on it as on a command run in place.
Nothing is skipped or cached: each run of the suite runs each selected command once.

Under ``pytest -n N`` (xdist) every worker collects every test, so only the first worker
(``gw0``) runs the commands; it writes each result to a folder the run's workers share
(named by xdist's run id), where a beside test on any worker reads it, and it waits for the
commands to end before it leaves the session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG = os.environ.get("CRONLAB_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
# Every command ends within this of the first one's start, or is killed and its test fails
# saying so: the suite's whole run stays inside CI's 90 minutes whatever a command does (a CI
# run once waited past them on these commands, starved of CPU). On a slow 2-core machine the
# four took 1,507 s together.
BUDGET_S = 2400.0
KILLED = f"(killed: the commands' {BUDGET_S:.0f} s were up)"

_CRONLAB = [sys.executable, "-m", "cronlab"]
_MUTANTS = [sys.executable, str(ROOT / "scripts" / "mutants.py"), "--quick", "--json"]

# The longest first (the order their tests wait in).
COMMANDS: dict[str, list[str]] = {
    "verify-postgresql-500": [
        *_CRONLAB, "verify", "--seeds", "500", "--jobs", "2", "--json", "--store", PG,
    ],
    "verify-sqlite-500": [*_CRONLAB, "verify", "--seeds", "500", "--jobs", "2", "--json"],
    "mutants-postgresql": [*_MUTANTS, "--jobs", "1", "--store", PG],
    "mutants-sqlite": [*_MUTANTS, "--jobs", "1"],
}  # fmt: skip
# Three lines of commands run at once, each one after another: the two searches, and the
# mutation gate's quick runs (one process). All start as the suite does. The SQLite search,
# CPU work at nice 19, takes what the rest leaves idle; run after the PostgreSQL search, it
# ran alone at the end: 159 s of a 1,507 s run on a slow 2-core machine, where the run's
# processes used 1.2 cores on average (user + sys 1,766 s; the servers' own not counted).
LINES = (
    ("verify-postgresql-500",),
    ("verify-sqlite-500",),
    ("mutants-postgresql", "mutants-sqlite"),
)
# Each command runs at the lowest CPU priority (nice 19), but the PostgreSQL search: it waits on
# the server's round trips, and a niced client is served last at every one of them — 60 seeds
# took 282 s niced beside two CPU-bound processes, 97 s at normal priority (40 s alone).
NICE = {"verify-postgresql-500": 0}


@dataclass
class _Runs:
    """The selected commands' results, filled by the background threads."""

    done: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)
    ready: dict[str, threading.Event] = field(default_factory=dict)
    running: list[subprocess.Popen[str]] = field(default_factory=list)
    stopped: bool = False
    deadline: float | None = None  # time.monotonic() by which every command has ended
    lock: threading.Lock = field(default_factory=threading.Lock)


_RUNS = _Runs()


def _shared() -> Path | None:
    """The folder the workers of one xdist run share (None: not under xdist)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    return None if run is None else Path(tempfile.gettempdir()) / f"cronlab-beside-{run}"


def _runs_here() -> bool:
    """True where the commands run: the only process, or xdist's first worker."""
    return os.environ.get("PYTEST_XDIST_WORKER", "gw0") == "gw0"


def start(names: list[str]) -> None:
    """Run ``names``' commands, each ``LINES`` line one at a time in a daemon thread of its
    own (under xdist, on the first worker only)."""
    if not _runs_here():
        return
    if _RUNS.deadline is None:
        _RUNS.deadline = time.monotonic() + BUDGET_S
    for line in LINES:
        chosen = [n for n in line if n in names and n not in _RUNS.ready]
        for n in chosen:
            _RUNS.ready[n] = threading.Event()
        if chosen:
            threading.Thread(target=_run_all, args=(chosen,), daemon=True, name="beside").start()


def _run_all(names: list[str]) -> None:
    for name in names:
        with _RUNS.lock:
            if _RUNS.stopped:
                return
            proc = subprocess.Popen(
                ["nice", "-n", str(NICE.get(name, 19)), *COMMANDS[name]], cwd=ROOT, text=True,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
            _RUNS.running.append(proc)
        try:
            out, err = proc.communicate(timeout=_left())
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            err += f"\n{KILLED}"
        _RUNS.done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        if (shared := _shared()) is not None:
            shared.mkdir(exist_ok=True)
            answer = {"returncode": proc.returncode, "stdout": out, "stderr": err}
            (shared / f"{name}.tmp").write_text(json.dumps(answer))
            (shared / f"{name}.tmp").rename(shared / f"{name}.json")  # whole, or not there
        _RUNS.ready[name].set()


def result(name: str) -> subprocess.CompletedProcess[str]:
    """``name``'s command as it ended; started here if the plugin did not start it (a test
    run by other means)."""
    shared = _shared()
    if shared is not None and not _runs_here():
        return _ended(name, _read(shared / f"{name}.json", name))
    if name not in _RUNS.ready:
        start([name])
    if not _RUNS.ready[name].wait(_left() + GRACE_S):
        raise AssertionError(f"{name}: no result within the commands' {BUDGET_S:.0f} s")
    return _ended(name, _RUNS.done[name])


def _ended(name: str, done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    """``done``, unless it was killed at the deadline: then the test fails saying so."""
    if done.stderr.endswith(KILLED):
        raise AssertionError(f"{name}: {KILLED}; its output so far:\n{done.stdout[-2000:]}")
    return done


GRACE_S = 30.0  # for a command killed at the deadline to be reaped and its result written


def _left() -> float:
    """Seconds until every command has to have ended (0 once it is past)."""
    deadline = _RUNS.deadline if _RUNS.deadline is not None else time.monotonic() + BUDGET_S
    return max(0.0, deadline - time.monotonic())


def _read(path: Path, name: str) -> subprocess.CompletedProcess[str]:
    """A result the first worker wrote, waited for (its deadline is the first worker's, which
    started the commands as its collection ended, before this worker's tests began)."""
    deadline = time.monotonic() + BUDGET_S + GRACE_S
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{name}: no result from the first worker in {path}")
        time.sleep(0.5)
    answer = json.loads(path.read_text())
    return subprocess.CompletedProcess(
        COMMANDS[name], answer["returncode"], answer["stdout"], answer["stderr"]
    )


def finish(interrupted: bool) -> None:
    """The session is over. Under xdist the first worker waits for its commands (a beside
    test on another worker may still need them) unless the run was interrupted."""
    if _shared() is not None and _runs_here() and not interrupted:
        for ready in list(_RUNS.ready.values()):
            ready.wait(_left() + GRACE_S)
    stop()


def stop() -> None:
    """End the command running, start no other (the session is over)."""
    with _RUNS.lock:
        _RUNS.stopped = True
        for proc in _RUNS.running:
            if proc.poll() is None:
                proc.kill()
