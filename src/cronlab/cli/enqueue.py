"""``cronlab enqueue HANDLER --in 3d|--at ISO8601``: a durable one-off timer.

The timer is a PENDING task row: it outlives every process, and whichever scheduler leads when
it falls due dispatches it. ``--key`` makes a retried ``enqueue`` add nothing twice.
"""

from __future__ import annotations

import json
import uuid

import click

from cronlab.cli import schedule as schedule_cli
from cronlab.core import delays
from cronlab.core.policy import from_ms
from cronlab.exceptions import ConfigError
from cronlab.ports import NewTask
from cronlab.runtime.clock import SystemClock

CLOCK = SystemClock()


@click.command("enqueue")
@click.argument("handler")
@click.option("--payload", default="{}", metavar="JSON", help="A JSON object for the handler.")
@click.option("--in", "delay", metavar="DELAY", help="Due after this delay: 3d, 2h, 15m, 90s.")
@click.option("--at", metavar="ISO8601", help="Due at this instant (with a UTC offset).")
@click.option("--key", default=None, help="Idempotency key (default: a fresh one).")
@click.option("--store", "store_url", required=True, metavar="URL", help="sqlite:///PATH")
@click.option("--app", "app_spec", default=None, metavar="MODULE:APP", help="Its handlers too.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def enqueue_cmd(
    handler: str,
    payload: str,
    delay: str | None,
    at: str | None,
    key: str | None,
    store_url: str,
    app_spec: str | None,
    as_json: bool,
) -> None:
    """Add a one-off task for HANDLER, due --in DELAY or --at TIME (a past time: at once)."""
    due = delays.due_ms(now_ms=CLOCK.now_ms(), delay=delay, at=at)
    task = NewTask(
        idempotency_key=key or f"timer:{uuid.uuid4()}",
        handler=handler,
        trigger_ms=due,
        payload=json.dumps(schedule_cli.parse_payload(payload)),
    )
    schedule_cli.check_handler(handler, app_spec)
    store = schedule_cli.open_store(store_url)
    added = store.add_tasks([task]) > 0
    if not added:  # a retried enqueue: what is stored stands, and is what we show
        stored = store.task_by_key(task.idempotency_key)
        if (stored.handler, json.loads(stored.payload)) != (handler, json.loads(task.payload)):
            raise ConfigError(
                f"key {task.idempotency_key!r} is taken by a task for {stored.handler} with "
                f"another payload (due {from_ms(stored.trigger_ms).isoformat()}): nothing changed"
            )
        due = stored.trigger_ms
    data = {"key": task.idempotency_key, "handler": handler, "due": from_ms(due).isoformat()}
    if as_json:
        click.echo(json.dumps({**data, "due_ms": due, "added": added}))
    else:
        verb = "enqueued" if added else "already there:"
        click.echo(f"{verb} {data['key']} → {handler} due {data['due']}")
