"""cronlab: distributed cron that neither duplicates nor loses a trigger, and a lab showing why.

The public API: ``App`` (``@app.task``, ``@app.cron``, ``app.run()``), ``Context`` (what a
task is given), ``Task`` (``.defer``, ``.defer_many``), what they return, and the errors.
"""

from __future__ import annotations

from typing import Any

from cronlab.app import App
from cronlab.core.policy import Catchup, Overlap
from cronlab.exceptions import (
    BackendUnavailable,
    ConfigError,
    ConflictError,
    CronlabError,
    FencedError,
    NotFoundError,
    TaskArgumentError,
    TaskTimeout,
)
from cronlab.handlers import Context
from cronlab.ports import RunCounts, SyncReport
from cronlab.tasks import DeferResult, Task, TaskRef

# The lab's model was exported here; it is the lab's own now (the engine imports nothing of it).
_MOVED = ("Fault", "Result", "Scenario", "Totals", "simulate")

__all__ = [
    "App",
    "BackendUnavailable",
    "Catchup",
    "ConfigError",
    "ConflictError",
    "Context",
    "CronlabError",
    "DeferResult",
    "FencedError",
    "NotFoundError",
    "Overlap",
    "RunCounts",
    "SyncReport",
    "Task",
    "TaskArgumentError",
    "TaskRef",
    "TaskTimeout",
]


def __getattr__(name: str) -> Any:
    where = " (the lab's model: cronlab.lab.model)" if name in _MOVED else ""
    raise AttributeError(f"module 'cronlab' has no attribute {name!r}{where}")
