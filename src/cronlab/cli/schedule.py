"""``cronlab schedule``: preview fire times, and the operator's commands on stored schedules.

``add|list|show|pause|resume|remove|trigger|backfill NAME --store URL``, and ``sync --app``
for the schedules an app's code declares. Every mistake (bad cron, a backwards backfill,
unknown zone, unknown task, duplicate or unknown name) is one line and exit 2, with nothing
written: the schedule is validated in full before the store is touched.
"""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime
from typing import Any

import click

from cronlab import app as apps
from cronlab.cli.knobs import echo_fields, echo_list, optional, tz_option
from cronlab.cli.options import APP_STORE, store_url_for
from cronlab.clock import SystemClock
from cronlab.core import cron, delays
from cronlab.core.policy import Schedule, from_ms, to_ms
from cronlab.exceptions import ConfigError
from cronlab.ports import ScheduleInfo, ScheduleStore

CLOCK = SystemClock()
STORE = click.option(
    "--store", "store_url", required=True, metavar="URL", help="sqlite:///PATH of the store."
)
APP = click.option(
    "--app", "app_spec", default=None, metavar="MODULE:APP", help="Also accept its handlers."
)
JSON = click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
NAME = click.argument("name")


@click.group("schedule")
def schedule_group() -> None:
    """Recurring schedules: cron expressions in a time zone."""


@schedule_group.command("next")
@click.argument("expr", metavar="CRON")
@tz_option("IANA time zone of the schedule.")
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


# -- stored schedules ------------------------------------------------------------------------


def open_schedules(url: str, *, create: bool, read_only: bool = False) -> ScheduleStore:
    """The schedule store behind ``--store``; ``create=False`` refuses a missing one;
    ``read_only``: never changed (``options.read_store``)."""
    from cronlab import distributed  # the backends load only for the store-backed commands

    store = distributed.store_for(url, create=create, read_only=read_only)
    return apps.schedule_store(store)


def known_tasks(app_spec: str | None) -> list[str]:
    """The task names of ``--app`` (default: the lab's invoice workload, as ``cluster`` runs)."""
    from cronlab.lab import invoices

    return apps.load(app_spec or invoices.SPEC).registry.names()


@schedule_group.command("add")
@NAME
@click.argument("cron", metavar="CRON")
@click.option(
    "--task",
    "--handler",
    "task",
    required=True,
    help="The task's name (--handler: its old name).",
)
@tz_option("IANA time zone (not one whose meaning is the host's: localtime, posixrules).")
@click.option(
    "--payload", default="{}", metavar="JSON", help="The task's arguments: a JSON object."
)
@click.option("--catchup", type=click.Choice(["all", "latest", "none"]), default="latest")
@click.option("--catchup-window", default="1h", show_default=True, metavar="DELAY")
@click.option("--overlap", type=click.Choice(["allow", "skip"]), default="skip")
@click.option("--paused", is_flag=True, help="Add it paused.")
@optional(
    "--alert-after", "DELAY", "Alert when a run has not started so long after its occurrence."
)
@click.option(
    "--alert-on-failures",
    type=click.IntRange(1, 1_000),
    default=None,
    metavar="N",
    help="Alert after N failed runs in a row.",
)
@STORE
@APP
def add_cmd(
    payload: str,
    catchup_window: str,
    alert_after: str | None,
    store_url: str,
    app_spec: str | None,
    **fields: Any,
) -> None:
    """Add schedule NAME firing on CRON (a name already taken is an error)."""
    # every other option is one of Schedule's fields, by name (checked by Schedule)
    schedule = Schedule(
        payload=parse_payload(payload),
        catchup_window_ms=delays.parse_delay(catchup_window),
        alert_after_ms=None if alert_after is None else delays.parse_delay(alert_after),
        **fields,
    )
    check_task(schedule.task, app_spec)
    store = open_schedules(store_url, create=True)
    store.put_schedule(schedule, CLOCK.now_ms(), replace=False, clock=CLOCK.now_ms)
    click.echo(_line_of(store.get_schedule(schedule.name)))


def check_task(name: str, app_spec: str | None) -> None:
    """ConfigError naming task ``name`` when neither the built-ins nor ``--app`` define it."""
    known = known_tasks(app_spec)
    if name not in known:
        hint = "" if app_spec else "; give --app MODULE:APP for your own tasks"
        raise ConfigError(f"unknown task {name!r} (known: {', '.join(known)}){hint}")


MAX_PAYLOAD = 64 * 1024


def parse_payload(text: str) -> dict[str, Any]:
    """``--payload``: a JSON object of at most ``MAX_PAYLOAD`` bytes, strict JSON (no NaN or
    Infinity, which other languages cannot read); ConfigError naming the problem otherwise."""
    shown = text if len(text) <= 60 else text[:60] + "…"
    if len(text.encode()) > MAX_PAYLOAD:
        raise ConfigError(f"--payload is {len(text.encode()):,} bytes (at most {MAX_PAYLOAD:,})")
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise ConfigError(f"--payload {shown!r} is not JSON (or nests too deep)") from None
    if not isinstance(value, dict):
        raise ConfigError(f"--payload {shown!r} must be a JSON object")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


@schedule_group.command("list")
@STORE
@JSON
def list_cmd(store_url: str, as_json: bool) -> None:
    """Every schedule: next fire time in its zone, last fire and the last run's outcome."""
    infos = open_schedules(store_url, create=False, read_only=True).list_schedules()
    echo_list(infos, "schedules", as_json, info_json, _line_of)


@schedule_group.command("show")
@NAME
@STORE
@JSON
def show_cmd(name: str, store_url: str, as_json: bool) -> None:
    """One schedule, every field."""
    data = info_json(open_schedules(store_url, create=False, read_only=True).get_schedule(name))
    echo_fields(data, as_json)


@schedule_group.command("pause")
@NAME
@STORE
@click.option("--note", default=None, help="Why (kept with the schedule until it is resumed).")
def pause_cmd(name: str, store_url: str, note: str | None) -> None:
    """Stop firing NAME (its coming occurrence is dropped; one already due is skipped)."""
    store = open_schedules(store_url, create=False)
    changed = store.pause_schedule(name, CLOCK.now_ms(), note=note, clock=CLOCK.now_ms)
    click.echo(f"paused {name}" if changed else f"{name} was already paused")


@schedule_group.command("resume")
@NAME
@STORE
def resume_cmd(name: str, store_url: str) -> None:
    """Fire NAME again from its next fire time (the paused time is not caught up)."""
    store = open_schedules(store_url, create=False)
    changed = store.resume_schedule(name, CLOCK.now_ms(), clock=CLOCK.now_ms)
    click.echo(_line_of(store.get_schedule(name)) if changed else f"{name} was not paused")


@schedule_group.command("remove")
@NAME
@STORE
def remove_cmd(name: str, store_url: str) -> None:
    """Delete NAME and its coming occurrence (past runs stay in the task history)."""
    store = open_schedules(store_url, create=False)
    store.remove_schedule(name, CLOCK.now_ms(), clock=CLOCK.now_ms)
    click.echo(f"removed {name}")


@schedule_group.command("trigger")
@NAME
@STORE
def trigger_cmd(name: str, store_url: str) -> None:
    """Run NAME's handler once now, outside its timetable (even while paused)."""
    key = open_schedules(store_url, create=False).trigger_schedule(name, CLOCK.now_ms())
    click.echo(f"triggered {name}: task {key}")


@schedule_group.command("backfill")
@NAME
@click.option(
    "--from", "start", required=True, metavar="ISO8601", help="First instant (with offset)."
)
@click.option("--to", "end", required=True, metavar="ISO8601", help="End instant, excluded.")
@STORE
def backfill_cmd(name: str, start: str, end: str, store_url: str) -> None:
    """Run NAME's occurrences in [--from, --to) that never ran (its overlap policy applies; at
    most 1,000 occurrences, none in the future)."""
    from_ms, to_ms = delays.parse_at(start), delays.parse_at(end)
    store = open_schedules(store_url, create=False)
    done = store.backfill_schedule(name, from_ms, to_ms, CLOCK.now_ms())
    click.echo(f"backfilled {name}: {done.added} added, {done.existing} already there")
    if done.added > 1 and store.get_schedule(name).schedule.overlap == "skip":
        click.echo(
            f"{name} skips overlaps: the {done.added} fall due together, so each one due while "
            "an earlier one runs is skipped (only the first is sure to run; overlap=allow runs "
            "them all)"
        )


def info_json(info: ScheduleInfo) -> dict[str, Any]:
    """A schedule as plain JSON data (times ISO 8601 in the schedule's zone, and in ms)."""
    s = info.schedule
    return {
        "name": s.name,
        "cron": s.cron,
        "tz": s.tz,
        "task": s.task,
        "payload": dict(s.payload),
        "catchup": s.catchup,
        "catchup_window_ms": s.catchup_window_ms,
        "overlap": s.overlap,
        "paused": s.paused,
        "paused_note": info.paused_note,
        "alert_after_ms": s.alert_after_ms,
        "alert_on_failures": s.alert_on_failures,
        "missed": info.missed,
        "skipped": info.skipped,
        "next_fire": _local(info.next_fire_ms, s.tz),
        "next_fire_ms": info.next_fire_ms,
        "last_fire": _local(info.last_fire_ms, s.tz),
        "last_fire_ms": info.last_fire_ms,
        "last_outcome": info.last_outcome,
        "last_skip_reason": info.last_reason,
    }


def _local(ms: int | None, tz: str) -> str | None:
    return None if ms is None else from_ms(ms).astimezone(cron.zone(tz)).isoformat()


def _line_of(info: ScheduleInfo) -> str:
    d = info_json(info)
    state = "paused" if d["paused"] else f"next {d['next_fire']}"
    last = d["last_outcome"] or "never run"
    return f"{d['name']}  {d['cron']!r} {d['tz']} → {d['task']}  {state}  last: {last}"


@schedule_group.command("sync")
@APP_STORE
@click.option(
    "--app",
    "app_spec",
    required=True,
    envvar="CRONLAB_APP",
    metavar="MODULE:APP",
    help="The app whose code declares them (or CRONLAB_APP).",
)
@JSON
def sync_cmd(store_url: str | None, app_spec: str, as_json: bool) -> None:
    """Write the schedules --app declares to the store, in one transaction; print what was
    added, changed and removed (only that app's; one added by hand is never removed)."""
    app = apps.load(app_spec)
    report = app.sync(open_schedules(store_url_for(store_url, app), create=True))
    if as_json:
        data = {"added": report.added, "changed": report.changed, "removed": report.removed}
        click.echo(json.dumps({k: list(v) for k, v in data.items()}))
        return
    for verb in ("added", "changed", "removed"):
        for name in getattr(report, verb):
            click.echo(f"{verb}: {name}")
    if not (report.added or report.changed or report.removed):
        click.echo(f"in sync: {len(app.schedules)} schedule(s)")
