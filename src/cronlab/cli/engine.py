"""CLI commands of the engine area (filled in by its issue)."""

from __future__ import annotations

import click


def register(group: click.Group) -> None:
    """Add this area's commands to the ``cronlab`` group."""
