"""``cronlab invoices seed``: the lab's workload, due at one instant (a midnight run)."""

from __future__ import annotations

import json
from datetime import datetime

import click
from rich.console import Console
from rich.progress import Progress

from cronlab import distributed
from cronlab.cli.options import CLOCK, JSON, STORE
from cronlab.core import delays
from cronlab.core.policy import from_ms
from cronlab.exceptions import ConfigError
from cronlab.lab import invoices as invoices_app

MAX_COUNT = 10_000_000  # about 2 GB of SQLite and minutes of seeding: the lab's largest run × 10
MAX_WORK_MS = 3_600_000


@click.group("invoices")
def invoices() -> None:
    """The invoice workload."""


@invoices.command("seed")
@STORE
@click.option(
    "--count",
    type=click.IntRange(0, MAX_COUNT),
    required=True,
    help=f"Invoices to add (at most {MAX_COUNT:,}).",
)
@click.option(
    "--at", "at_text", required=True, metavar="+SECONDS|ISO8601", help="When they fall due."
)
@click.option(
    "--work-ms",
    type=click.IntRange(0, MAX_WORK_MS),
    default=0,
    help="Simulated work per invoice, milliseconds (at most an hour).",
)
@JSON
def seed_cmd(store_url: str, count: int, at_text: str, work_ms: int, as_json: bool) -> None:
    """Add COUNT invoice tasks due at one instant (duplicate keys are ignored)."""
    trigger_ms = parse_at(at_text, CLOCK.now_ms())
    store = distributed.store_for(store_url, create=True)
    invoices_app.app.start(store)
    err = Console(stderr=True)
    with Progress(console=err, transient=True, disable=not err.is_terminal) as bar:
        job = bar.add_task("seeding invoices", total=count)
        added = store.tasks.add_many(
            invoices_app.tasks(count, trigger_ms, work_ms), lambda n: bar.advance(job, n)
        )
    at_iso = from_ms(trigger_ms).isoformat()
    if as_json:
        click.echo(
            json.dumps({"added": added, "count": count, "at": at_iso, "trigger_ms": trigger_ms})
        )
    else:
        click.echo(f"added {added:,} of {count:,} invoice tasks due at {at_iso}")


def parse_at(text: str, now_ms: int) -> int:
    """``+SECONDS`` from now, or an ISO 8601 instant (with an offset, or Z) → epoch ms, from
    1970 to the last instant of year 9999."""
    at = _parse_at(text, now_ms)
    if not 0 <= at <= delays.MAX_DUE_MS:
        raise ConfigError(f"--at {text[:40]!r}: out of range (1970 to 9999-12-31)")
    return at


def _parse_at(text: str, now_ms: int) -> int:
    if text.startswith("+"):
        try:
            return now_ms + int(float(text[1:]) * 1000)
        except (ValueError, OverflowError):
            raise ConfigError(f"--at {text!r}: expected +SECONDS or ISO 8601") from None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"--at {text!r}: expected +SECONDS or ISO 8601") from None
    if moment.tzinfo is None:
        raise ConfigError(f"--at {text!r}: give a UTC offset (e.g. Z or +02:00)")
    return int(moment.timestamp() * 1000)
