"""The suite's long searches, run beside the rest of it.

``cronlab verify`` over hundreds of seeds and the mutation gate are CPU work that needs no
fixture, while most of the suite waits on processes, servers and a browser. A test marked
``@pytest.mark.beside(NAME)`` asks for the command ``COMMANDS[NAME]``: when such a test is
selected, ``tests/conftest.py`` starts the selected commands as collection ends, one after
another at the lowest CPU priority (``nice 19``: they take the cores the rest of the suite
leaves idle, and its timings stay its own), and moves the test to the end of the run, where it
waits for its command's result (``result``) and asserts on it as on a command run in place.
Nothing is skipped or cached: each run of the suite runs each selected command once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG = os.environ.get("CRONLAB_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
TIMEOUT_S = 1800.0

_CRONLAB = [sys.executable, "-m", "cronlab"]
_MUTANTS = [sys.executable, str(ROOT / "scripts" / "mutants.py"), "--quick", "--json"]

# In the order they run: the longest first.
COMMANDS: dict[str, list[str]] = {
    "verify-postgresql-500": [
        *_CRONLAB, "verify", "--seeds", "500", "--jobs", "2", "--json", "--store", PG,
    ],
    "verify-sqlite-2000": [*_CRONLAB, "verify", "--seeds", "2000", "--jobs", "2", "--json"],
    "mutants-postgresql": [*_MUTANTS, "--jobs", "1", "--store", PG],
    "mutants-sqlite": [*_MUTANTS, "--jobs", "1"],
}  # fmt: skip


@dataclass
class _Runs:
    """The selected commands' results, filled by one background thread."""

    done: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)
    ready: dict[str, threading.Event] = field(default_factory=dict)
    running: subprocess.Popen[str] | None = None
    stopped: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


_RUNS = _Runs()


def start(names: list[str]) -> None:
    """Run ``names``' commands, in ``COMMANDS``' order, one at a time, in a daemon thread."""
    chosen = [n for n in COMMANDS if n in names]
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
                ["nice", "-n", "19", *COMMANDS[name]], cwd=ROOT, text=True,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
            _RUNS.running = proc
        try:
            out, err = proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            err += f"\n(killed after {TIMEOUT_S:.0f} s)"
        _RUNS.done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        _RUNS.ready[name].set()


def result(name: str) -> subprocess.CompletedProcess[str]:
    """``name``'s command as it ended; started here if the plugin did not start it (a test
    run by other means)."""
    if name not in _RUNS.ready:
        start([name])
    if not _RUNS.ready[name].wait(TIMEOUT_S * len(COMMANDS)):
        raise AssertionError(f"{name}: no result within {TIMEOUT_S * len(COMMANDS):.0f} s")
    return _RUNS.done[name]


def stop() -> None:
    """End the command running, start no other (the session is over)."""
    with _RUNS.lock:
        _RUNS.stopped = True
        if _RUNS.running is not None and _RUNS.running.poll() is None:
            _RUNS.running.kill()
