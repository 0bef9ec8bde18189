"""``cronlab enqueue TASK --in 3d|--at ISO8601``: a durable one-off timer.

The timer is a PENDING task row: it outlives every process, and whichever scheduler leads when
it falls due dispatches it. ``--key`` makes a retried ``enqueue`` add nothing twice.

``--many FILE.jsonl`` is ``Task.defer_many`` over a file: each line is the task's arguments
(a JSON object) or ``[arguments, "key"]`` (an array: the object and the run's idempotency
key). The input is read once — a pipe or a FIFO cannot be read twice — into a spool, every
line checked as it comes, and at most ``MAX_LINES`` lines; only then is anything written.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import IO, Any, BinaryIO

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cronlab import app as apps
from cronlab import distributed
from cronlab.cli import schedule as schedule_cli
from cronlab.cli.options import APP_STORE, store_url_for
from cronlab.clock import SystemClock
from cronlab.core import delays
from cronlab.core.policy import from_ms
from cronlab.exceptions import ConfigError
from cronlab.ports import NewTask
from cronlab.tasks import DeferResult, Item, Task, check_key

CLOCK = SystemClock()
MAX_LINES = 1_000_000  # lines of --many: 100 transactions of defer_many
MAX_BYTES = 256 * 1024 * 1024  # bytes of --many (and about as much spooled)
SPOOL_MEMORY = 16 * 1024 * 1024  # bytes of checked lines kept in memory, then a temporary file


@click.command("enqueue")
@click.argument("task", metavar="TASK")
@click.option(
    "--payload", default="{}", metavar="JSON", help="The task's arguments: a JSON object."
)
@click.option(
    "--in", "delay", metavar="DELAY", help="Due after this delay: 3d, 2h, 15m, 90s (default: now)."
)
@click.option("--at", metavar="ISO8601", help="Due at this instant (with a UTC offset).")
@click.option(
    "--key", default=None, help="Idempotency key, 1-500 characters (default: a fresh one)."
)
@APP_STORE
@click.option("--app", "app_spec", default=None, metavar="MODULE:APP", help="Its tasks too.")
@click.option(
    "--many",
    type=click.Path(dir_okay=False, allow_dash=True),
    default=None,
    help="A run per line of this JSON Lines file (- for stdin). A line is the task's "
    'arguments, {"customer": 7}, or an array of them and an idempotency key, '
    '[{"customer": 7}, "bill:7"] (a key already there: counted, not added again). '
    "Every line of a file is checked before anything is written. Needs --app; due at "
    "once unless --in/--at.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def enqueue_cmd(
    task: str,
    payload: str,
    delay: str | None,
    at: str | None,
    key: str | None,
    store_url: str | None,
    app_spec: str | None,
    many: str | None,
    as_json: bool,
) -> None:
    """Add a one-off run of TASK (a task name), due now, --in DELAY or --at TIME (a past time: at
    once); with --many, a run per line of a file."""
    if many is not None:
        _enqueue_many(task, many, delay, at, store_url, app_spec, as_json, key)
        return
    if key is not None:
        check_key(key)  # (an empty one is refused: a fresh key would make a retry a duplicate)
    due = delays.due_ms(now_ms=CLOCK.now_ms(), delay=delay, at=at)
    arguments = schedule_cli.parse_payload(payload)
    new = NewTask(
        idempotency_key=f"timer:{uuid.uuid4()}" if key is None else key,
        task=task,
        trigger_ms=due,
        payload=json.dumps(arguments),
    )
    schedule_cli.check_task(task, app_spec)
    app = apps.load(app_spec) if app_spec else None
    if app is not None and task in app.tasks:  # its arguments now, not at every attempt
        app.tasks[task].signature.check(arguments)
    store = distributed.store_for(store_url_for(store_url, app), create=True)
    added, stored = store.add_task(new)
    if not added:  # a retried enqueue: what is stored stands, and is what we show
        if (stored.task, json.loads(stored.payload)) != (task, json.loads(new.payload)):
            raise ConfigError(
                f"key {new.idempotency_key!r} is taken by a task for {stored.task} with "
                f"another payload (due {from_ms(stored.trigger_ms).isoformat()}): nothing changed"
            )
        due = stored.trigger_ms
    data = {"key": new.idempotency_key, "task": task, "due": from_ms(due).isoformat()}
    if as_json:
        click.echo(json.dumps({**data, "due_ms": due, "added": added}))
    else:
        verb = "enqueued" if added else "already there:"
        click.echo(f"{verb} {data['key']} → {task} due {data['due']}")


def _enqueue_many(
    name: str,
    path: str,
    delay: str | None,
    at: str | None,
    store_url: str | None,
    app_spec: str | None,
    as_json: bool,
    key: str | None,
) -> None:
    """``Task.defer_many`` over a JSON Lines file, with a progress bar. The input (a file, a
    pipe, a FIFO, stdin) is read once and every line checked before anything is written."""
    if app_spec is None or key is not None:
        raise ConfigError(
            "--many needs --app MODULE:APP (the task's arguments are checked) and no --key "
            '(a line may carry its own: [arguments, "key"])'
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
    url = store_url_for(store_url, app)
    with _read_once(path, task) as spool:  # nothing is written before its last line is checked
        if url != app.store_url:
            app.use_store(url)
        app.defer_store()  # opened before the bar: a store that fails says so on one line
        result = _defer(task, spool, instant, as_json)
    if as_json:
        click.echo(json.dumps({"task": name, "added": result.added, "existing": result.existing}))
    else:
        click.echo(
            f"deferred {result.added:,} run(s) of {name} ({result.existing:,} already there)"
        )


def _defer(
    task: Task[Any, Any], spool: IO[str], instant: datetime | None, as_json: bool
) -> DeferResult:
    """``task.defer_many`` over the spooled lines, a progress bar on stderr."""
    written = 0
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=as_json,
    ) as bar:
        job = bar.add_task(f"defer {task.name}", total=None)

        def advance(n: int) -> None:
            nonlocal written
            written += n
            bar.advance(job, n)

        try:
            return task.defer_many(_spooled(spool), at=instant, progress=advance)
        except ConfigError as exc:
            raise ConfigError(f"{exc} ({written:,} written before it, in whole batches)") from None


@contextlib.contextmanager
def _read_once(path: str, task: Task[Any, Any]) -> Iterator[IO[str]]:
    """The input's lines, each checked as ``defer_many`` checks it, in a spool (memory, then a
    temporary file) as ``[arguments, key]``; ConfigError naming the line, or the input."""
    with tempfile.SpooledTemporaryFile(SPOOL_MEMORY, mode="w+", encoding="utf-8") as spool:
        stream = _open(path)
        try:
            for n, line in _lines(path, stream):
                spool.write(json.dumps(_item(n, line, task)) + "\n")
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()
        spool.seek(0)
        yield spool


def _spooled(spool: IO[str]) -> Iterator[Item]:
    for line in spool:
        arguments, key = json.loads(line)
        yield arguments if key is None else (arguments, key)


def _item(n: int, line: str, task: Task[Any, Any]) -> tuple[dict[str, Any], str | None]:
    """A line's arguments and key, checked; ConfigError naming the line."""
    try:
        arguments, key = _parse(line)
        task.new(arguments, 0, key or "check")  # the signature, JSON and its size
        if key is not None:
            check_key(key)
    except ConfigError as exc:
        raise ConfigError(f"--many line {n}: {exc}") from None
    return arguments, key


def _parse(line: str) -> tuple[dict[str, Any], str | None]:
    """A line: the arguments (a JSON object), or ``[arguments, "key"]``."""
    try:
        value = _DECODER.decode(line)
    except (ValueError, RecursionError):
        raise ConfigError("not JSON (or nests too deep)") from None
    match value:
        case dict():
            return value, None
        case [dict() as arguments, str() as key]:
            return arguments, key
    raise ConfigError('expected a JSON object of arguments, or [arguments, "key"]')


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# One decoder for every line (``json.loads`` with ``parse_constant`` builds one per call).
_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def _open(path: str) -> BinaryIO:
    """The input as bytes (``-``: stdin); ConfigError for one that cannot be opened."""
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as exc:
        raise _unreadable(path, exc) from None


def _unreadable(path: str, exc: OSError) -> ConfigError:
    return ConfigError(f"--many {path!r}: cannot read it ({exc.strerror or exc})")


def _lines(path: str, stream: BinaryIO) -> Iterator[tuple[int, str]]:
    """The input's non-blank lines, numbered from 1; ConfigError for a line too long or not
    UTF-8, or an input past ``MAX_LINES`` or ``MAX_BYTES``."""
    limit, total = schedule_cli.MAX_PAYLOAD + 1, 0
    for n, raw in enumerate(iter(lambda: _readline(path, stream, limit), b""), 1):
        if len(raw) >= limit and not raw.endswith(b"\n"):
            raise ConfigError(f"--many line {n}: longer than {schedule_cli.MAX_PAYLOAD:,} bytes")
        total += len(raw)
        if n > MAX_LINES or total > MAX_BYTES:
            raise ConfigError(
                f"--many {path!r}: more than {MAX_LINES:,} lines or {MAX_BYTES >> 20:,} MB "
                "(split it)"
            )
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"--many line {n}: not UTF-8 text ({exc.reason})") from None
        if line.strip():
            yield n, line


def _readline(path: str, stream: BinaryIO, limit: int) -> bytes:
    try:
        return stream.readline(limit)
    except OSError as exc:  # (/proc/self/mem, a disk error)
        raise _unreadable(path, exc) from None
