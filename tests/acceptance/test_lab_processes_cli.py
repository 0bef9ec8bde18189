"""The engine's processes offer no anti-pattern (issue 29, item 2): ``cronlab cluster``,
``scheduler`` and ``worker`` refuse ``--election off``, ``--timers`` and ``--fencing`` in one
line, before anything is written; the lab's own commands, ``cronlab lab cluster|scheduler|
worker``, take them (their runs: tests/integration/test_engine_cluster.py and
test_zombie_leader.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from shell import cronlab

pytestmark = pytest.mark.acceptance


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["cluster", "--election", "off"], "cronlab lab cluster --election off"),
        (["scheduler", "--election", "off"], "cronlab lab cluster --election off"),
        (["cluster", "--timers", "in-memory"], "No such option '--timers'"),
        (["scheduler", "--fencing", "off"], "No such option '--fencing'"),
        (["worker", "--fencing", "off"], "No such option '--fencing'"),
    ],
)
def test_the_engines_processes_refuse_the_anti_patterns(
    tmp_path: Path, argv: list[str], words: str
) -> None:
    store = f"sqlite:///{tmp_path / 'cron.db'}"
    done = cronlab(*argv, "--store", store)
    assert done.returncode == 2, done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_labs_processes_take_them() -> None:
    for command in ("cluster", "scheduler"):
        shown = " ".join(cronlab("lab", command, "--help").stdout.split())
        assert "off (the anti-pattern" in shown and "--timers" in shown and "--fencing" in shown
    shown = " ".join(cronlab("lab", "worker", "--help").stdout.split())
    assert "--fencing" in shown and "--timers" not in shown
    for command in ("cluster", "scheduler", "worker"):
        shown = " ".join(cronlab(command, "--help").stdout.split())
        assert "--timers" not in shown and "--fencing" not in shown and "anti-pattern" not in shown


def test_a_lab_command_still_checks_its_values_in_one_line(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'cron.db'}"
    done = cronlab("lab", "scheduler", "--store", store, "--election", "zk://h:2181")
    assert done.returncode == 2 and "zk://h:2181" in done.stderr
    done = cronlab("lab", "cluster", "--store", store, "--timers", "disk")
    assert done.returncode == 2 and "--timers" in done.stderr
    assert list(tmp_path.iterdir()) == []
