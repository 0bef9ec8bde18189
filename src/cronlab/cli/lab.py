"""``cronlab lab``: serve *Cron at Scale: Leader Election & Worker Dispatch* in the browser; and
``cronlab lab cluster|scheduler|worker``, the engine's processes with the anti-patterns the lab
teaches (``--election off``, ``--timers in-memory``, ``--fencing off``) plugged in — the
engine's own commands offer none of them."""

from __future__ import annotations

from functools import partial
from typing import Any, cast

import click

from cronlab import distributed
from cronlab.cli import processes
from cronlab.cli.knobs import knob
from cronlab.cli.options import CLOCK, check_election_or_off, operations
from cronlab.cli.serving import serve, server_options
from cronlab.ports import LeaseElector
from cronlab.stores.sql import SqlStore

LAB_NOTE = (
    "\n\nThe lab's: the engine's command with the anti-patterns it teaches (docs/engine.md, "
    '"The lab\'s anti-patterns").'
)
ELECTION = click.Option(
    ["--election"],
    envvar="CRONLAB_ELECTION",
    default="lease",
    show_default=True,
    callback=check_election_or_off,
    help="lease, off (the anti-pattern: every replica dispatches its own copy) or "
    "etcd://host:2379 (or CRONLAB_ELECTION).",
)
TIMERS = knob(
    "--timers",
    click.Choice(["durable", "in-memory"]),
    "durable",
    "in-memory: the anti-pattern, takeover gaps are missed.",
)
FENCING = click.option(
    "--fencing",
    type=click.Choice(["on", "off"]),
    default="on",
    show_default=True,
    help="off: the zombie anti-pattern: a leader's write checks no lease and workers run "
    "stale deliveries too.",
)


def _params(decorators: list[Any]) -> list[click.Parameter]:
    """The click parameters a list of option decorators declares."""

    def holder() -> None: ...

    for decorate in reversed(decorators):
        decorate(holder)
    return list(getattr(holder, "__click_params__", []))[::-1]


def _lab_command(engine: click.Command, extra: list[Any], callback: Any) -> click.Command:
    """``engine``'s command, its ``--election`` taking ``off``, with ``extra`` options."""
    params = [ELECTION if p.name == "election" else p for p in engine.params]
    return click.Command(
        engine.name,
        params=[*params, *_params(extra)],
        callback=callback,
        help=(engine.help or "") + LAB_NOTE,
    )


def _with_ops(options: dict[str, Any]) -> dict[str, Any]:
    """The run-history, alert and metrics flags as one checked ``ops``, as the engine's
    ``with_operations`` hands them to its command."""
    names = ("keep", "alert_webhook", "metrics_port", "metrics_host")
    ops = operations(*(options.pop(n) for n in names))
    return {**options, "ops": ops}


def _elect(election: str, store: SqlStore) -> LeaseElector:
    """No election (the anti-pattern), or the engine's."""
    if election == "off":
        from cronlab.lab.election_off import NoElection

        return NoElection(CLOCK)
    return distributed.open_elector(election, store, CLOCK)


def _scheduler(timers: str, fencing: str, **options: Any) -> None:
    from cronlab.lab.scheduler import Election, LabScheduler, Modes, Timers

    election: Election = "off" if options["election"] == "off" else "lease"
    # (a lab scheduler honours ``cronlab chaos pause-leader --mid-dispatch``)
    modes = Modes(
        election=election, timers=cast(Timers, timers), fencing=fencing == "on", chaos=True
    )
    make = partial(LabScheduler, modes=modes)
    processes.run_scheduler(_with_ops(options), make=make, elect=_elect)


def _worker(fencing: str, **options: Any) -> None:
    from cronlab.lab.worker import LabWorker

    processes.run_worker(options, checked=fencing == "on", make=LabWorker)


scheduler_cmd = _lab_command(processes.scheduler_cmd, [TIMERS, FENCING], _scheduler)
worker_cmd = _lab_command(processes.worker_cmd, [FENCING], _worker)


def _cluster(timers: str, fencing: str, **options: Any) -> None:
    modes = ("--timers", timers) if timers != "durable" else ()
    fenced = ("--fencing", fencing) if fencing != "on" else ()
    processes.run_cluster(
        _with_ops(options),
        {"scheduler": scheduler_cmd, "worker": worker_cmd},
        prefix=("lab",),
        scheduler_args=(*modes, *fenced),
        worker_args=fenced,
    )


cluster_cmd = _lab_command(processes.cluster_cmd, [TIMERS, FENCING], _cluster)


@click.group("lab", invoke_without_command=True)
@server_options(
    8000,
    "CRONLAB_LAB_TOKEN",
    "Required off loopback: unlocks live mode and chaos (header X-Cronlab-Token); or "
    "CRONLAB_LAB_TOKEN (keeps it out of ps).",
)
@click.pass_context
def lab_cmd(ctx: click.Context, host: str, port: int, token: str | None, no_open: bool) -> None:
    """Cron at Scale: Leader Election & Worker Dispatch, at http://HOST:PORT/ (and the
    engine's processes with the lab's anti-patterns: cluster, scheduler, worker)."""
    if ctx.invoked_subcommand is not None:
        return
    from cronlab.lab.web.app import LabConfig, create_app  # (the lab extra: --help needs none)

    config = LabConfig(host=host, port=port, token=token)
    serve("lab", lambda: create_app(config), host, port, no_open)


for command in (cluster_cmd, scheduler_cmd, worker_cmd):
    lab_cmd.add_command(command)
