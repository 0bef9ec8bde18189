"""``cronlab simulate`` run as a user runs it: a subprocess."""

from __future__ import annotations

import json

import pytest
from shell import cronlab

pytestmark = pytest.mark.acceptance

TOTALS = {
    "due",
    "dispatched",
    "executed",
    "duplicates",
    "missed",
    "backlog_peak",
    "drain_time_s",
    "takeover_delays_s",
    "fenced_writes",
    "redelivered",
    "stuck",
    "late",
}


def test_default_run_prints_the_four_numbers_ticker_and_sentence() -> None:
    out = cronlab("simulate")
    assert out.returncode == 0, out.stderr
    for label in ("Duplicate executions", "Missed triggers", "Queue backlog peak", "Drain time"):
        assert label in out.stdout
    assert (
        "min 00 · dispatched 1,000,000 · executed 60,000 · dup ×0 · missed 0 · backlog 940,000"
    ) in out.stdout
    assert "16.7 min" in out.stdout
    assert "PENDING rows survive in the store" in out.stdout


def test_json_totals_hold_exactly_the_metric_names() -> None:
    out = cronlab("simulate", "--election", "off", "--json")
    data = json.loads(out.stdout)
    assert set(data["totals"]) == TOTALS
    assert data["totals"]["duplicates"] == 2_000_000
    assert data["totals"]["drain_time_s"] == 3000
    tl = data["timeline"]
    assert tl["encoding"] == "runs"
    assert {"dispatched", "executed", "backlog", "duplicates", "missed", "leader"} <= set(tl)
    assert sum(e * n for e, n in zip(tl["executed"], tl["n"], strict=True)) == 3_000_000


def test_crash_in_memory_misses_the_million() -> None:
    out = cronlab("simulate", "--crash", "leader@0", "--in-memory", "--json")
    totals = json.loads(out.stdout)["totals"]
    assert totals["missed"] == 1_000_000
    assert totals["takeover_delays_s"] == [10]


def test_compare_shows_both_and_the_difference() -> None:
    out = cronlab("simulate", "--compare", "election=off")
    assert out.returncode == 0, out.stderr
    assert "+2,000,000" in out.stdout
    data = json.loads(cronlab("simulate", "--compare", "election=off", "--json").stdout)
    assert data["diff"]["duplicates"] == 2_000_000
    assert data["a"]["totals"]["duplicates"] == 0


def test_presets_steady_and_spread() -> None:
    steady = json.loads(
        cronlab(
            "simulate", "--preset", "steady", "--tasks", "100", "--minutes", "5", "--json"
        ).stdout
    )
    assert steady["totals"]["due"] == 500
    spread = json.loads(
        cronlab(
            "simulate", "--preset", "spread", "--tasks", "10", "--minutes", "4", "--json"
        ).stdout
    )
    assert spread["scenario"]["buckets"] == [[0, 3], [1, 3], [2, 2], [3, 2]]


def test_bucket_overrides_preset() -> None:
    data = json.loads(cronlab("simulate", "--bucket", "2=30", "--bucket", "5=12", "--json").stdout)
    assert data["totals"]["due"] == 42


@pytest.mark.parametrize(
    ("args", "word"),
    [
        (["--preset", "noon"], "preset"),
        (["--tasks", "-5"], "tasks"),
        (["--crash", "replica:3@10"], "replica 3"),
        (["--crash", "leader"], "malformed crash"),
        (["--bucket", "zero=5"], "malformed bucket"),
        (["--restart-after", "soon"], "restart-after"),
        (["--compare", "color=red"], "compare key"),
        (["--compare", "election"], "malformed --compare"),
        (["--election", "raft"], "election"),
        # issue 13: each of these ran out of memory or printed a traceback
        (["--preset", "steady", "--minutes", "100000000"], "not in the range 1<=x<=1440"),
        (["--replicas", "100000000", "--election", "off"], "not in the range 1<=x<=32"),
        (["--tasks", "1000000000000"], "the lab charts at most 50,000"),
        (["--bucket", "100000000=5"], "bucket minute"),
        (["--crash", "leader@99999999999999999999999"], "crash time"),
        (["--restart-after", "99999999999999999999999"], "restart-after"),
    ],
)
def test_bad_flags_get_one_line_and_exit_2(args: list[str], word: str) -> None:
    out = cronlab("simulate", *args)
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert word in lines[0]
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (
            ["--pause", "leader@0:30", "--fencing", "off"],
            {"duplicates": 10_000, "fenced_writes": 0},
        ),
        (["--pause", "leader@0:30"], {"duplicates": 0, "fenced_writes": 10_000}),
        (
            ["--worker-crash", "0@10", "--effects", "external"],
            {"duplicates": 200, "redelivered": 200},
        ),
        (["--worker-crash", "0@10"], {"duplicates": 0, "redelivered": 200}),
        (["--lose", "5000@0", "--reconcile", "off"], {"stuck": 5_000}),
        (["--lose", "5000@0"], {"stuck": 0}),
    ],
)
def test_the_production_faults_give_their_documented_numbers(
    flags: list[str], expected: dict[str, int]
) -> None:
    out = cronlab("simulate", *flags, "--json")
    assert out.returncode == 0, out.stderr
    totals = json.loads(out.stdout)["totals"]
    assert {k: totals[k] for k in expected} == expected


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--pause", "leader@0"], "expected leader@T:D"),
        (["--pause", "replica:9@0:5"], "pause target replica 9 does not exist"),
        (["--worker-crash", "7@0"], "worker crash target pod 7 does not exist"),
        (["--lose", "many@3"], "must be a whole number"),
        (["--reconcile", "soon"], "reconcile must be a whole number"),
        (["--pause", "leader@0:999999999"], "pause length"),
    ],
)
def test_a_bad_fault_is_one_line_and_exit_2(flags: list[str], words: str) -> None:
    out = cronlab("simulate", *flags)
    assert out.returncode == 2 and words in out.stderr and "Traceback" not in out.stderr
    assert out.stdout == ""
