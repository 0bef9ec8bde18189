"""``cronlab enqueue HANDLER --in 3d|--at ISO8601``: a durable one-off timer.

The timer is a PENDING task row: it outlives every process, and whichever scheduler leads when
it falls due dispatches it. ``--key`` makes a retried ``enqueue`` add nothing twice.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cronlab import app as apps
from cronlab.cli import schedule as schedule_cli
from cronlab.core import delays
from cronlab.core.policy import from_ms
from cronlab.exceptions import ConfigError
from cronlab.ports import NewTask
from cronlab.runtime.clock import SystemClock
from cronlab.tasks import Task

CLOCK = SystemClock()


@click.command("enqueue")
@click.argument("handler")
@click.option("--payload", default="{}", metavar="JSON", help="A JSON object for the handler.")
@click.option("--in", "delay", metavar="DELAY", help="Due after this delay: 3d, 2h, 15m, 90s.")
@click.option("--at", metavar="ISO8601", help="Due at this instant (with a UTC offset).")
@click.option("--key", default=None, help="Idempotency key (default: a fresh one).")
@click.option("--store", "store_url", required=True, metavar="URL", help="sqlite:///PATH")
@click.option("--app", "app_spec", default=None, metavar="MODULE:APP", help="Its handlers too.")
@click.option(
    "--many",
    type=click.Path(dir_okay=False, allow_dash=True),
    default=None,
    help="A run per line of this JSON Lines file (- for stdin): each line the task's "
    "arguments. Needs --app; due at once unless --in/--at.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def enqueue_cmd(
    handler: str,
    payload: str,
    delay: str | None,
    at: str | None,
    key: str | None,
    store_url: str,
    app_spec: str | None,
    many: str | None,
    as_json: bool,
) -> None:
    """Add a one-off task for HANDLER, due --in DELAY or --at TIME (a past time: at once);
    with --many, a run per line of a file."""
    if many is not None:
        _enqueue_many(handler, many, delay, at, store_url, app_spec, as_json, key)
        return
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


def _enqueue_many(
    name: str,
    path: str,
    delay: str | None,
    at: str | None,
    store_url: str,
    app_spec: str | None,
    as_json: bool,
    key: str | None,
) -> None:
    """``Task.defer_many`` over a JSON Lines file, with a progress bar. A file is read twice:
    every line is checked before anything is written; stdin is checked as it is written, in
    whole batches (an error then says how many went in before it)."""
    if app_spec is None or key is not None:
        raise ConfigError(
            "--many needs --app MODULE:APP (the task's arguments are checked) and no --key"
        )
    app = apps.load(app_spec)
    task = app.tasks.get(name)
    if task is None:
        known = ", ".join(sorted(app.tasks)) or "none"
        raise ConfigError(f"--many: {app_spec} has no task {name!r} (tasks: {known})")
    when = (
        None
        if delay is None and at is None
        else delays.due_ms(now_ms=CLOCK.now_ms(), delay=delay, at=at)
    )
    instant = None if when is None else from_ms(when)
    if path != "-":
        for _ in _arguments(path, task):  # the check: nothing is written before the last line
            pass
    app.use_store(store_url)
    written = 0
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=as_json,
    ) as bar:
        job = bar.add_task(f"defer {name}", total=None)

        def advance(n: int) -> None:
            nonlocal written
            written += n
            bar.advance(job, n)

        try:
            result = task.defer_many(_arguments(path, task), at=instant, progress=advance)
        except ConfigError as exc:
            raise ConfigError(f"{exc} ({written:,} written before it, in whole batches)") from None
    if as_json:
        click.echo(json.dumps({"task": name, "added": result.added, "existing": result.existing}))
    else:
        click.echo(
            f"deferred {result.added:,} run(s) of {name} ({result.existing:,} already there)"
        )


def _arguments(path: str, task: Task[Any, Any]) -> Iterator[dict[str, Any]]:
    """Each line's arguments, checked against the task; ConfigError naming the line."""
    limit = schedule_cli.MAX_PAYLOAD + 1
    try:
        with click.open_file(path, encoding="utf-8") as lines:
            for n, line in enumerate(iter(lambda: lines.readline(limit), ""), 1):
                if len(line) >= limit and not line.endswith("\n"):
                    raise ConfigError(
                        f"--many line {n}: longer than {schedule_cli.MAX_PAYLOAD:,} bytes"
                    )
                if not line.strip():
                    continue
                try:
                    arguments = schedule_cli.parse_payload(line)
                    task.signature.check(arguments)
                except ConfigError as exc:
                    raise ConfigError(f"--many line {n}: {exc}") from None
                yield arguments
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--many: {path} is not UTF-8 text ({exc.reason})") from None
