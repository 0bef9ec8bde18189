"""cronlab: distributed cron that neither duplicates nor loses a trigger, and a lab showing why.

The public API: ``App`` (``@app.task``, ``@app.cron``, ``app.run()``), ``Context`` (what a
task is given), ``Task`` (``.defer``, ``.defer_many``), what they return, and the errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from cronlab.core.model import Fault, Result, Scenario, Totals, simulate

_MODEL = ("Fault", "Result", "Scenario", "Totals", "simulate")  # the lab's model, on first use

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
    "RunCounts",
    "Scenario",
    "SyncReport",
    "Task",
    "TaskArgumentError",
    "TaskRef",
    "TaskTimeout",
    "Totals",
    "simulate",
]


def __getattr__(name: str) -> Any:
    if name in _MODEL:
        from cronlab.core import model

        return getattr(model, name)
    raise AttributeError(f"module 'cronlab' has no attribute {name!r}")
