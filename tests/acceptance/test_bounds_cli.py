"""Numbers and values with no limit (issue 28, items 12-14): ``cluster --scan-batch
100000000000000000000`` was accepted and every child died of an OverflowError for ever;
``schedule backfill --from 0001-01-01T00:00Z`` and a Redis URL's ``socket_timeout=abc`` or
``db=abc`` printed tracebacks; ``--retry-base`` above 60 s was silently capped. Each is one
line naming the value, exit 2, before anything is written or any child starts."""

from __future__ import annotations

import os

import click
import pytest
from shell import cronlab
from test_cli_fuzz import command_at, commands

pytestmark = pytest.mark.acceptance
HUGE = "100000000000000000000"


def test_every_numeric_option_of_every_command_has_both_bounds() -> None:
    """A number with no upper bound reaches a store (an INTEGER column), a timer or a list
    size; each command states its limits where click checks them."""
    open_ended = []
    for path in commands():
        for param in command_at(path).params:
            kind = param.type
            if isinstance(kind, click.types._NumberParamTypeBase):
                bounded = isinstance(kind, click.IntRange | click.FloatRange)
                if not bounded or kind.min is None or kind.max is None:  # type: ignore[union-attr]
                    open_ended.append(f"{' '.join(path)} {param.name}")
    assert open_ended == []


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["cluster", "--scan-batch", HUGE], "--scan-batch"),  # the children's OverflowError
        (["cluster", "--worker-batch", HUGE], "--worker-batch"),
        (["scheduler", "--batch", HUGE], "--batch"),  # an OverflowError traceback
        (["worker", "--batch", HUGE], "--batch"),
        (["worker", "--max-attempts", HUGE], "--max-attempts"),
        (["worker", "--retry-base", "61"], "--retry-base"),  # silently capped at 60 s
        (["worker", "--retry-base", "3600"], "--retry-base"),
        (["worker", "--queue", "redis://127.0.0.1:6379?socket_timeout=abc"], "socket_timeout"),
        (["worker", "--queue", "redis://127.0.0.1:6379?db=abc"], "db"),
        (["worker", "--queue", "redis://127.0.0.1:6379?socket_timeout=nan"], "socket_timeout"),
        (["worker", "--queue", "redis://127.0.0.1:6379?socket_connect_timeout=inf"], "timeout"),
        (["cluster", "--queue", "redis://127.0.0.1:6379?health_check_interval=x"], "health"),
        (["chaos", "crash-replica", HUGE], "INDEX"),
        (["chaos", "kill-worker", HUGE], "INDEX"),
    ],
)
def test_an_unbounded_number_is_one_line_exit_2_and_writes_nothing(
    args: list[str], words: str, tmp_path: object
) -> None:
    db = f"{tmp_path}/s.db"
    done = cronlab(*args, "--store", f"sqlite:///{db}", timeout=30)
    assert done.returncode == 2, done.stderr[-500:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], done.stderr[-500:]
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert not os.path.exists(db)


@pytest.mark.parametrize(
    "start", ["0001-01-01T00:00Z", "0001-01-01T00:00+01:00", "0001-01-02T00:00-23:59"]
)
def test_a_backfill_from_the_first_year_is_one_line(start: str, tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    add = cronlab("schedule", "add", "nightly", "0 0 * * *", "--handler", "fail", "--store", url)
    assert add.returncode == 0, add.stderr
    done = cronlab(
        "schedule", "backfill", "nightly", "--from", start, "--to", "0002-01-01T00:00Z",
        "--store", url,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-500:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--from" in lines[0], done.stderr
    runs = cronlab("runs", "--store", url, "--json")
    assert runs.returncode == 0 and '"runs": []' in runs.stdout


def test_the_retry_base_help_says_its_limit() -> None:
    assert "60" in " ".join(cronlab("worker", "--help").stdout.split())
