"""``cronlab chaos``: real signals to the processes the store lists, each recorded as an event."""

from __future__ import annotations

import click

from cronlab import distributed
from cronlab.cli.knobs import Finite
from cronlab.cli.options import CLOCK, INDEX, OBSERVE_ELECTION, STORE
from cronlab.lab import chaos


@click.group("chaos")
def chaos_cmd() -> None:
    """Real signals to the processes the store lists; each recorded as an event."""


def _echo_event(kind: str, pid: int | None, holder: str | None) -> None:
    click.echo(f"{kind}: pid {pid} ({holder})")


@chaos_cmd.command("crash-leader")
@STORE
@OBSERVE_ELECTION
def crash_leader_cmd(store_url: str, election: str) -> None:
    """SIGKILL the process holding the lease."""
    elector = distributed.observer(election, CLOCK)
    e = chaos.crash_leader(distributed.store_for(store_url, create=False), CLOCK, elector)
    _echo_event("SIGKILL leader", e.pid, e.holder)


@chaos_cmd.command("pause-leader")
@STORE
@OBSERVE_ELECTION
@click.option("--for", "seconds", type=Finite(min=0, max=3600), required=True, help="Seconds.")
@click.option(
    "--mid-dispatch",
    is_flag=True,
    help="Catch it between reading a batch and writing it (a cronlab lab cluster's "
    "schedulers): the zombie leader.",
)
def pause_leader_cmd(store_url: str, election: str, seconds: float, mid_dispatch: bool) -> None:
    """SIGSTOP the leader, then SIGCONT it after --for seconds (blocks meanwhile)."""
    elector = distributed.observer(election, CLOCK)
    e = chaos.pause_leader(
        distributed.store_for(store_url, create=False),
        CLOCK,
        seconds,
        elector,
        mid_dispatch=mid_dispatch,
    )
    _echo_event(f"SIGSTOP/SIGCONT after {seconds} s, leader", e.pid, e.holder)


@chaos_cmd.command("crash-replica")
@STORE
@OBSERVE_ELECTION
@click.argument("index", type=INDEX)
def crash_replica_cmd(store_url: str, election: str, index: int) -> None:
    """SIGKILL scheduler replica INDEX."""
    elector = distributed.observer(election, CLOCK)
    e = chaos.crash_replica(distributed.store_for(store_url, create=False), CLOCK, index, elector)
    _echo_event(f"SIGKILL replica {index}", e.pid, e.holder)


@chaos_cmd.command("kill-worker")
@STORE
@click.argument("index", type=INDEX, required=False)
@click.option(
    "--mid-batch",
    is_flag=True,
    help="Catch it right after it claims a batch, which it then never acks (workers of a "
    "cronlab lab cluster).",
)
def kill_worker_cmd(store_url: str, index: int | None, mid_batch: bool) -> None:
    """SIGKILL worker INDEX (default: the lowest live one)."""
    store = distributed.store_for(store_url, create=False)
    e = chaos.kill_worker(store, CLOCK, index, mid_batch=mid_batch)
    _echo_event("SIGKILL worker", e.pid, e.holder)
