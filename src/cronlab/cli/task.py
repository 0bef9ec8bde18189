"""``cronlab task show|cancel|retry ID --store URL``: an operator's actions on one task, by the
id ``cronlab runs --json`` lists as ``task_id`` (``ports.TaskControl``; docs/console.md).

Every mistake — an id that is not a positive integer, no such task, a task whose status the
action does not take — is one line and exit 2, with nothing changed.
"""

from __future__ import annotations

import getpass
import socket
from typing import Any

import click

from cronlab import distributed
from cronlab.cli.knobs import echo_fields
from cronlab.cli.options import CLOCK, JSON, STORE, read_store
from cronlab.exceptions import ConfigError
from cronlab.ports import TaskControl
from cronlab.views import parse_task_id, task_json


class TaskId(click.ParamType[int]):
    """``views.parse_task_id`` as click's argument type (its error: click's one line)."""

    name = "ID"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        try:
            return parse_task_id(str(value))
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)


ID = click.argument("task_id", metavar="ID", type=TaskId())


@click.group("task")
def task_group() -> None:
    """One task, by its id (the task_id of `cronlab runs --json`): show, cancel, retry."""


@task_group.command("show")
@ID
@STORE
@JSON
def show_cmd(task_id: int, store_url: str, as_json: bool) -> None:
    """Task ID: its key, task, schedule, occurrence, status, attempts and last error."""
    data = task_json(read_store(store_url).task_info(task_id))
    echo_fields(data, as_json)


@task_group.command("cancel")
@ID
@STORE
def cancel_cmd(task_id: int, store_url: str) -> None:
    """Settle task ID as not run: SKIPPED, reason "cancelled" (`cronlab runs`: skipped).

    Only a task not run yet (PENDING) or waiting in the queue or for its retry (DISPATCHED);
    no message of it runs afterwards. A run going on now is waited for: the task is then DONE
    or FAILED, and refused. DONE, FAILED, SKIPPED or MISSED: an error, nothing changed. A
    schedule's next occurrence cancelled: the schedule goes on with the one after it.
    """
    info = open_tasks(store_url).cancel_task(task_id, CLOCK.now_ms(), by=operator())
    click.echo(f"cancelled task {info.id} ({info.key}): skipped, reason cancelled")


@task_group.command("retry")
@ID
@STORE
def retry_cmd(task_id: int, store_url: str) -> None:
    """Run FAILED task ID once more, now: queued again at its next attempt (its last error
    stays until that run ends). Any other status: an error, nothing changed."""
    info = open_tasks(store_url).retry_task(task_id, CLOCK.now_ms(), by=operator())
    click.echo(f"retrying task {info.id} ({info.key}): attempt {info.attempts + 1} queued")


def open_tasks(url: str) -> TaskControl:
    """The store behind ``--store`` as the task actions' port (a missing one is refused)."""
    store: TaskControl = distributed.store_for(url, create=False)
    return store


def operator() -> str:
    """Who acts, for the event log: ``cli USER@HOST``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name (a container's uid without a passwd entry)
        user = "?"
    return f"cli {user}@{socket.gethostname()}"
