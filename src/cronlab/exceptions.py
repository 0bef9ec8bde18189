"""Every error cronlab raises on purpose.

CronlabError                 base: the CLI prints its message on one line and exits 2
├── ConfigError              a bad scenario, flag, URL or schedule (a user mistake)
│   └── TaskArgumentError    a task's arguments do not fit its signature, or are not JSON
├── NotFoundError            a named thing (task, schedule, process, handler) is absent
├── ConflictError            a name or key already taken; a task in a state an action refuses
├── BackendUnavailable       a store, lease or queue server cannot be reached
│   └── BackendBusy          it answered, but a lock was not free in time (waiting may help)
└── FencedError              a write carried a stale fencing epoch and was refused
TaskTimeout                  a run went on past its timeout (a run's failure, not cronlab's)
"""

from __future__ import annotations


class CronlabError(Exception):
    """Base class: the message names the offending value and fits on one line."""


class ConfigError(CronlabError, ValueError):
    """A scenario, flag, URL, cron expression or time zone is invalid."""


class ParamError(ConfigError):
    """A bad request field (a query parameter, a JSON body's member): ``field`` names it, the
    message says why (the lab's and the console's APIs answer 422 with both)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class TaskArgumentError(ConfigError, TypeError):
    """Arguments that do not fit the task's signature, or are not JSON; nothing was written."""


class NotFoundError(CronlabError, LookupError):
    """A task, schedule, process, handler or leader that was asked for does not exist."""


class ConflictError(CronlabError):
    """A unique name or idempotency key is already taken, or a task is in a state the action
    asked does not take (a cancel of a task that ran: ``TaskControl``)."""


class BackendUnavailable(CronlabError):
    """A store, lease or queue backend cannot be reached."""


class SessionLost(BackendUnavailable):
    """A backend answered, then ended the session or refused the transaction (a handler that
    outlasted the server's limits, an administrator's ``pg_terminate_backend``, a deadlock):
    the transaction was rolled back, and the next one, on a fresh session, may well succeed."""


class BackendBusy(BackendUnavailable):
    """A backend answered but a lock was not free in time: a writer busy, paused or stuck
    inside its transaction. Waiting may help (a process starting up waits it out)."""


class FencedError(CronlabError):
    """A write carried a fencing epoch that no longer holds the lease; nothing was written."""

    def __init__(self, epoch: int, current: int | None) -> None:
        super().__init__(f"fenced: epoch {epoch} no longer holds the lease (current {current})")
        self.epoch = epoch
        self.current = current


class TaskTimeout(Exception):
    """A run went on past its handler's timeout: it failed, and its effect was undone."""
