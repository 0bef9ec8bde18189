"""``cronlab lab``: the lab. Until the page lands it prints the model's worked scenarios."""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console

from cronlab.cli.simulate import _print_one
from cronlab.core import params
from cronlab.core.model import simulate

WORKED: tuple[tuple[str, dict[str, Any]], ...] = (
    ("leader election on", {}),
    ("leader election off", {"election": "off"}),
    ("leader crashes at 00:00:00, durable rows", {"crashes": ["leader@0"]}),
    ("leader crashes at 00:00:00, in-memory timers", {"crashes": ["leader@0"], "durable": False}),
)


def register(group: click.Group) -> None:
    group.add_command(lab_cmd)


@click.command("lab")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
def lab_cmd(host: str, port: int) -> None:
    """Cron at Scale: Leader Election & Worker Dispatch."""
    out = Console()
    for title, knobs in WORKED:
        out.rule(title)
        _print_one(out, simulate(params.build_scenario(**knobs)))
