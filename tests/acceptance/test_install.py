"""The README's install line on a fresh virtualenv (issue 31, item 5): ``pip install .`` from
the clone — the base install, no extras — gives a ``cronlab`` whose every ``--help`` works, and
a command that needs an extra names the one that installs it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import source

pytestmark = [pytest.mark.acceptance, pytest.mark.integration]
COMMANDS = (
    "chaos", "check", "cluster", "console", "enqueue", "invoices", "lab", "report", "run",
    "runs", "schedule", "scheduler", "simulate", "status", "task", "verify", "worker",
)  # fmt: skip


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's base install (``source.base_install``): ``pip install .`` in a copy of the
    clone, into a fresh virtualenv, as the README says; its ``cronlab``."""
    return source.base_install(tmp_path_factory) / "venv" / "bin" / "cronlab"


def test_every_help_works_on_the_base_install(base: Path) -> None:
    listing = subprocess.run([str(base), "--help"], capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0, listing.stderr
    for name in COMMANDS:
        assert f"\n  {name} " in listing.stdout
        done = subprocess.run(
            [str(base), name, "--help"], capture_output=True, text=True, timeout=60
        )
        assert (done.returncode, done.stderr) == (0, ""), name
        assert done.stdout.startswith(f"Usage: cronlab {name}")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["lab", "--no-open"], "cronlab lab needs starlette: pip install 'cronlab[lab]'"),
        (["simulate"], "cronlab simulate needs numpy: pip install 'cronlab[lab]'"),
        (
            ["console", "--store", "sqlite:///x.db"],
            "cronlab console needs starlette: pip install 'cronlab[console]'",
        ),
    ],
)
def test_a_command_that_needs_an_extra_names_it(
    base: Path, tmp_path: Path, argv: list[str], said: str
) -> None:
    done = subprocess.run(
        [str(base), *argv], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert (done.returncode, done.stderr) == (2, f"cronlab: error: {said}\n")
