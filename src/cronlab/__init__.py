"""cronlab: distributed cron that neither duplicates nor loses a trigger, and a lab showing why.

The public API: ``App`` (``@app.task``, ``@app.cron``, ``app.run()``), ``Context`` (what a
task is given), ``Task`` (``.defer``, ``.defer_many``), what they return, and the errors.
"""

from __future__ import annotations

from cronlab.app import App
from cronlab.core.model import Fault, Result, Scenario, Totals, simulate
from cronlab.core.policy import Catchup, Overlap
from cronlab.exceptions import (
    BackendUnavailable,
    ConfigError,
    ConflictError,
    CronlabError,
    FencedError,
    NotFoundError,
)
from cronlab.handlers import Context, TaskTimeout
from cronlab.ports import SyncReport
from cronlab.tasks import DeferResult, Task, TaskArgumentError, TaskRef

__all__ = [
    "App",
    "BackendUnavailable",
    "Catchup",
    "ConfigError",
    "ConflictError",
    "Context",
    "CronlabError",
    "DeferResult",
    "Fault",
    "FencedError",
    "NotFoundError",
    "Overlap",
    "Result",
    "Scenario",
    "SyncReport",
    "Task",
    "TaskArgumentError",
    "TaskRef",
    "TaskTimeout",
    "Totals",
    "simulate",
]
