"""cronlab: distributed cron that neither duplicates nor loses a trigger, and a lab showing why."""

from __future__ import annotations

from cronlab.app import App
from cronlab.core.model import Fault, Result, Scenario, Totals, simulate
from cronlab.exceptions import (
    BackendUnavailable,
    ConfigError,
    ConflictError,
    CronlabError,
    FencedError,
    NotFoundError,
)

__all__ = [
    "App",
    "BackendUnavailable",
    "ConfigError",
    "ConflictError",
    "CronlabError",
    "Fault",
    "FencedError",
    "NotFoundError",
    "Result",
    "Scenario",
    "Totals",
    "simulate",
]
