"""Port values as the operator's tools show them, the same in the CLI's ``--json`` and the
console's API: a run, a task, and a task id as typed."""

from __future__ import annotations

import dataclasses
from typing import Any

from cronlab.core.policy import from_ms
from cronlab.exceptions import ConfigError
from cronlab.ports import MAX_TASK_ID, RunRecord, TaskInfo

MAX_DIGITS = len(str(MAX_TASK_ID))


def run_json(r: RunRecord) -> dict[str, Any]:
    """A history row as ``--json`` prints it: the stored values, and what follows from them."""
    data = dataclasses.asdict(r)
    data["occurrence"] = from_ms(r.occurrence_ms).isoformat()
    start, end = r.start_ms, r.end_ms
    data["lateness_ms"] = None if start is None else start - r.occurrence_ms
    data["duration_ms"] = None if start is None or end is None else end - start
    return data


def task_json(info: TaskInfo) -> dict[str, Any]:
    """A task as plain JSON data: the stored values, its occurrence also in ISO 8601."""
    data = dataclasses.asdict(info)
    data["occurrence"] = from_ms(info.occurrence_ms).isoformat()
    return data


def parse_task_id(text: str) -> int:
    """A task id as typed (the CLI's argument, the console's path): ASCII digits making an
    integer 1..``MAX_TASK_ID`` (what both stores number tasks with); ConfigError otherwise."""
    digits = text.strip()
    # (the length before int(), which refuses a string of more than 4,300 digits)
    well_formed = digits.isascii() and digits.isdigit() and len(digits) <= MAX_DIGITS
    if not well_formed or not 1 <= int(digits) <= MAX_TASK_ID:
        raise ConfigError(f"a task id is an integer 1..{MAX_TASK_ID}, got {digits[:40]!r}")
    return int(digits)
