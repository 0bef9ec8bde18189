"""``cronlab schedule``: preview fire times (the store-backed commands come with the engine)."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime

import click

from cronlab.core import cron
from cronlab.core.policy import to_ms
from cronlab.exceptions import ConfigError


def register(group: click.Group) -> None:
    """Add this area's commands to the ``cronlab`` group."""
    group.add_command(schedule_group)


@click.group("schedule")
def schedule_group() -> None:
    """Recurring schedules: cron expressions in a time zone."""


@schedule_group.command("next")
@click.argument("expr", metavar="CRON")
@click.option("--tz", default="UTC", show_default=True, help="IANA time zone of the schedule.")
@click.option(
    "--after",
    metavar="ISO8601",
    help="Start after this time (default now); without an offset it is read in --tz.",
)
@click.option("--count", type=click.IntRange(1, 10_000), default=5, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def next_cmd(expr: str, tz: str, after: str | None, count: int, as_json: bool) -> None:
    """Print the next COUNT fire times of CRON (ISO 8601 with the zone's offset).

    A fire time shaped by a clock change carries a note after '#'.

    Daylight saving follows Vixie cron / cronie: a fixed time skipped by spring-forward fires
    once at the jump, one repeated by fall-back fires once; a schedule with * or a step in
    the minute or hour field fires by real elapsed time.
    """
    parsed = cron.parse(expr, tz)
    start = _after(after, parsed)
    times = list(itertools.islice(cron.fires_after(parsed, start), count))
    if as_json:
        click.echo(json.dumps(_json(parsed, start, times)))
    else:
        click.echo("\n".join(_line(parsed, t) for t in times))


def _line(parsed: cron.Cron, fire: datetime) -> str:
    note = cron.dst_note(parsed, fire)
    return fire.isoformat() if note is None else f"{fire.isoformat()}  # {note}"


def _after(text: str | None, parsed: cron.Cron) -> datetime:
    if text is None:
        return datetime.now(UTC)
    try:
        start = datetime.fromisoformat(text.strip())
    except ValueError:
        message = f"bad --after {text!r}: expected ISO 8601, e.g. 2026-03-29T00:00"
        raise ConfigError(message) from None
    return start if start.tzinfo is not None else start.replace(tzinfo=parsed.tz)


def _json(parsed: cron.Cron, start: datetime, times: list[datetime]) -> dict[str, object]:
    return {
        "cron": parsed.expr,
        "tz": parsed.tz.key,
        "kind": "fixed" if parsed.fixed else "wildcard",
        "after": start.isoformat(),
        "fires": [t.isoformat() for t in times],
        "fires_ms": [to_ms(t) for t in times],
        "notes": [cron.dst_note(parsed, t) for t in times],
    }
