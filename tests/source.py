"""A copy of what ``pip`` builds cronlab from, for the tests that build it: a build writes
``build/`` and ``*.egg-info`` into its source tree, so two builds of the clone at once (two
xdist workers, each with a module of such tests) would race in it."""

from __future__ import annotations

import shutil
from pathlib import Path

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
