"""``runtime.proc.die_with_parent``: a cluster's child ties its life to the cluster's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cronlab.runtime import proc

CHILD = """
import os, sys
from cronlab.runtime import proc
proc.die_with_parent()
print("ran on", proc.PARENT_ENV in os.environ)
"""


def _child(parent: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != proc.PARENT_ENV}
    if parent is not None:
        env[proc.PARENT_ENV] = parent
    return subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=60
    )


def test_a_child_of_a_live_cluster_runs_on_and_does_not_pass_the_pid_down() -> None:
    done = _child(str(os.getpid()))  # this process is its parent: the cluster, alive
    assert (done.returncode, done.stdout) == (0, "ran on False\n"), done.stderr


@pytest.mark.parametrize("parent", ["1", "not-a-pid", ""])
def test_a_child_whose_cluster_is_gone_exits_at_once_and_quietly(parent: str) -> None:
    """Its cluster died between its fork and this call (the child was reparented): it was
    started for nobody, and stops before it touches anything."""
    done = _child(parent)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_a_process_started_by_no_cluster_is_left_alone() -> None:
    done = _child(None)
    assert (done.returncode, done.stdout) == (0, "ran on False\n"), done.stderr
