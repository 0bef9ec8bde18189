"""CLI commands of the schedule area (filled in by its issue)."""

from __future__ import annotations

import click


def register(group: click.Group) -> None:
    """Add this area's commands to the ``cronlab`` group."""
