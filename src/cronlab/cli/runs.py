"""``cronlab runs``: the run history — a row per run (its occurrence, dispatch, start and end
times, attempt, worker, outcome and error), and a row per occurrence that did not run."""

from __future__ import annotations

import click

from cronlab.cli.knobs import echo_list, optional
from cronlab.cli.options import CLOCK, JSON, STORE, read_store
from cronlab.core import delays
from cronlab.core.policy import from_ms
from cronlab.exceptions import ConfigError
from cronlab.ports import MAX_RUNS, RunQuery, RunRecord
from cronlab.views import run_json


@click.command("runs")
@STORE
@click.option("--schedule", default=None, metavar="NAME", help="Only this schedule's runs.")
@click.option("--task", default=None, metavar="NAME", help="Only this task's runs.")
@click.option("--failed", is_flag=True, help="Only failed runs (outcome error or failed).")
@optional(
    "--since",
    "ISO|DELAY",
    "Occurrences at or after this time: ISO 8601 with an offset, or a delay back (1h).",
)
@click.option("--limit", type=click.IntRange(1, MAX_RUNS), default=100, show_default=True)
@JSON
def runs_cmd(
    store_url: str,
    schedule: str | None,
    task: str | None,
    failed: bool,
    since: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """The run history, newest occurrence first."""
    now = CLOCK.now_ms()
    query = RunQuery(
        schedule=schedule, task=task, failed=failed, since_ms=since_ms(since, now), limit=limit
    )
    rows = read_store(store_url).runs(query, now)
    echo_list(rows, "runs", as_json, run_json, line)


def since_ms(text: str | None, now_ms: int) -> int | None:
    """``--since``: an ISO 8601 instant with an offset, or a delay back from now."""
    if text is None:
        return None
    if text.strip()[:1].isdigit() and not any(c in text for c in "-:T"):
        return now_ms - delays.parse_delay(text)
    try:
        return delays.parse_at(text)
    except ConfigError:
        raise ConfigError(
            f"bad --since {text!r}: give ISO 8601 with an offset (2026-12-01T00:00Z) or a "
            "delay back from now (90m, 1h, 7d)"
        ) from None


def line(r: RunRecord) -> str:
    """One row for a terminal."""
    when = from_ms(r.occurrence_ms).isoformat(timespec="seconds")
    what = r.schedule or r.task
    parts = [when, what, r.outcome, f"attempt {r.attempt}"]
    if r.start_ms is not None and r.end_ms is not None:
        late, took = r.start_ms - r.occurrence_ms, r.end_ms - r.start_ms
        parts += [f"late {late:,} ms", f"took {took:,} ms", r.worker or ""]
    if r.error:
        parts.append(r.error if len(r.error) <= 120 else r.error[:119] + "…")
    return "  ".join(p for p in parts if p)
