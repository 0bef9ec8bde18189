"""Observing a cluster: ``status`` (the leader, the processes, the counts) and ``report``
(measured totals under the model's names). Their ``--json`` keys are a contract with the lab.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from cronlab import distributed
from cronlab.cli.options import CLOCK, JSON, OBSERVE_ELECTION, STORE, read_store
from cronlab.core.policy import from_ms
from cronlab.lab import report
from cronlab.ports import Event, Lease, LeaseElector, ProcessInfo
from cronlab.runtime import cluster, proc
from cronlab.stores.sql import SqlStore


@click.command("status")
@STORE
@OBSERVE_ELECTION
@JSON
def status_cmd(store_url: str, election: str, as_json: bool) -> None:
    """The leader, every process, task counts and queue depth."""
    data = status(read_store(store_url), distributed.observer(election, CLOCK))
    if as_json:
        click.echo(json.dumps(data))
    else:
        _print_status(data)


def status(store: SqlStore, elector: LeaseElector | None = None) -> dict[str, Any]:
    """The ``status --json`` object (keys are a contract with the lab).

    Every registered process is listed, two clusters' on one store included. The leader is the
    lease's holder, named by its owner string even when the registry does not list it; it
    comes from ``elector`` when the election lives outside the store (etcd)."""
    now = CLOCK.now_ms()
    procs = store.processes()
    lease = distributed.current_lease(store, CLOCK, elector)
    return {
        "now_ms": now,
        "leader": _leader(lease, procs) if lease else None,
        "epoch": lease.epoch if lease else store.lease_read().epoch,
        "processes": [_process(p) for p in procs],
        "tasks": store.counts(),
        "queue_depth": store.queue_depth(),
        "backends_down": backends_down(store.events()),
    }


def _leader(lease: Lease, procs: list[ProcessInfo]) -> dict[str, Any]:
    """The holder's replica and pid: from the registry, or else from its owner string."""
    holder = next((p for p in procs if p.owner == lease.holder), None)
    named = cluster.parse_identity(lease.holder)
    return {
        "holder": lease.holder,
        "replica": holder.index if holder else (named.index if named else None),
        "pid": holder.pid if holder else (named.pid if named else None),
        "registered": holder is not None,
        "epoch": lease.epoch,
        "expires_ms": lease.expires_ms,
        "expires_at": from_ms(lease.expires_ms).isoformat(),
    }


def _process(p: ProcessInfo) -> dict[str, Any]:
    """A registry row; ``alive`` is None for a process on another host (no /proc to ask)."""
    named = cluster.parse_identity(p.owner)
    host = named.host if named else None
    here = host in (None, socket.gethostname())
    alive = p.exited_ms is None and (proc.alive(p.pid) if here else None)
    return {
        "role": p.role,
        "index": p.index,
        "pid": p.pid,
        "owner": p.owner,
        "host": host,
        "alive": alive,
        "started_ms": p.started_ms,
    }


def backends_down(events: list[Event]) -> list[dict[str, Any]]:
    """The processes that said a backend went unreachable and have not said it came back."""
    latest: dict[str, Event] = {}
    for e in events:
        if e.kind in ("backend_unreachable", "backend_down") and e.holder is not None:
            latest[e.holder] = e
    return [
        {"holder": e.holder, "since_ms": e.at_ms, "error": str(e.detail.get("error", ""))}
        for e in latest.values()
        if e.kind == "backend_unreachable"
    ]


def _print_status(data: dict[str, Any]) -> None:
    out = Console()
    out.print(_leader_line(data["leader"]), highlight=False, markup=False)
    table = Table("role", "index", "pid", "host", "alive")
    for p in data["processes"]:
        alive = {True: "yes", False: "no", None: "?"}[p["alive"]]
        table.add_row(p["role"], str(p["index"]), str(p["pid"]), p["host"] or "?", alive)
    out.print(table)
    counts = " · ".join(f"{k} {v:,}" for k, v in data["tasks"].items())
    out.print(f"tasks: {counts} · queue depth {data['queue_depth']:,}", highlight=False)
    for down in data["backends_down"]:
        since = from_ms(down["since_ms"]).isoformat()
        out.print(f"backend down for {down['holder']} since {since}: {down['error']}", markup=False)


def _leader_line(lead: dict[str, Any] | None) -> str:
    if lead is None:
        return "leader: none"
    who = (
        f"replica {lead['replica']} (pid {lead['pid']})"
        if lead["replica"] is not None
        else lead["holder"]
    )
    unlisted = "" if lead["registered"] else f" — {lead['holder']}, not in the registry"
    return f"leader: {who}, epoch {lead['epoch']}, lease until {lead['expires_at']}{unlisted}"


@click.command("report")
@STORE
@JSON
def report_cmd(store_url: str, as_json: bool) -> None:
    """Measured totals (the model's names), duplicate invoices, dispatch lateness."""
    r = report.measure(read_store(store_url), CLOCK.now_ms())
    if as_json:
        click.echo(json.dumps(r.as_dict()))
        return
    for key, value in r.as_dict().items():
        click.echo(f"{key}: {value}")
