"""``cronlab check``: lost, duplicated, unexpected, late and stuck tasks, from a store."""

from __future__ import annotations

import json

import click

from cronlab.cli.knobs import Finite
from cronlab.cli.options import CLOCK, JSON, STORE, read_store
from cronlab.lab.verdict import KINDS, check


@click.command("check")
@STORE
@click.option("--final", is_flag=True, help="The run is over: anything due and not DONE is lost.")
@click.option(
    "--capacity",
    type=Finite(min=0.001, max=1e9),
    default=None,
    help="Tasks/s of the fleet: late is then measured against a calm run at that pace.",
)
@click.option(
    "--late-after",
    "late_s",
    type=Finite(min=0, max=86_400),
    default=60.0,
    show_default=True,
    help="Seconds behind the calm run that make a task late.",
)
@JSON
def check_cmd(
    store_url: str, final: bool, capacity: float | None, late_s: float, as_json: bool
) -> None:
    """The checker's verdict on what the store holds: exit 1 when anything is wrong."""
    verdict = check(
        read_store(store_url),
        CLOCK.now_ms(),
        final=final,
        capacity=capacity,
        late_s=late_s,
    )
    if as_json:
        click.echo(json.dumps(verdict.as_dict()))
    else:
        for kind in KINDS:
            n = verdict.counts[kind]
            shown = ", ".join(verdict.samples.get(kind, []))
            click.echo(f"{kind:10} {n:>9,}" + (f"   e.g. {shown}" if shown else ""))
        click.echo("verdict: ok" if verdict.ok else "verdict: NOT ok")
    if not verdict.ok:
        raise click.exceptions.Exit(1)
