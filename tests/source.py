"""A copy of what ``pip`` builds cronlab from, for the tests that build it: a build writes
``build/`` and ``*.egg-info`` into its source tree, so two builds of the clone at once (two
xdist workers, each with a module of such tests) would race in it."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_BUILT_FROM = ("pyproject.toml", "README.md")


def copy(into: Path) -> Path:
    """The package's sources, ``pyproject.toml`` and README copied into ``into``; its path."""
    into.mkdir(parents=True, exist_ok=True)
    for name in _BUILT_FROM:
        shutil.copy2(ROOT / name, into / name)
    leftovers = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    shutil.copytree(ROOT / "src", into / "src", ignore=leftovers)
    return into


def once(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """A folder ``make`` fills once per test run, whatever the number of xdist workers: a module
    fixture runs once on each worker that runs one of its tests, and a venv with cronlab built
    in it costs tens of seconds of CPU. The first worker to ask builds it under a lock; the
    others wait for it and share it (read only). ``make`` raising leaves no folder marked done:
    each asking worker fails on its own attempt."""
    base = factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder, done = shared / name, shared / f"{name}.done"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            done.touch()
    return folder


def base_install(factory: pytest.TempPathFactory) -> Path:
    """Once per test run (``once``): the README's install line, ``pip install .`` in a copy of
    the clone (``clone/``), into a fresh virtualenv (``venv/``), and the wheel ``pip wheel``
    builds from that copy (``dist/``). For tests that only read it."""

    def make(home: Path) -> None:
        clone, venv = copy(home / "clone"), home / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        pip, dist = str(venv / "bin" / "pip"), str(home / "dist")
        for argv in (
            [pip, "install", "-q", "."],
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, "."],
        ):
            done = subprocess.run(argv, cwd=clone, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, done.stderr[-2000:]

    return once(factory, "base-install", make)
