"""One list of how a run ends (issue 29, item 5): the worker's counts, the executor's and
``RunCounts`` name the same five, in the same order."""

from __future__ import annotations

from cronlab.ports import RUN_ENDINGS, RunCounts


def test_run_counts_keys_are_the_run_endings() -> None:
    assert tuple(RunCounts.__annotations__) == RUN_ENDINGS
