"""The engine's commands: cluster, scheduler, worker, invoices seed, status, chaos, report.

The lab drives these; their names and the keys of their ``--json`` output are a contract.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, cast

import click
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from cronlab import distributed
from cronlab.app import load as load_app
from cronlab.app import schedule_store
from cronlab.exceptions import ConfigError
from cronlab.handlers import registry
from cronlab.ports import LeaseElector, NewTask, Retry
from cronlab.runtime import chaos, cluster, report
from cronlab.runtime.clock import SystemClock, to_datetime
from cronlab.runtime.scheduler import Scheduler, SchedulerConfig, Timers
from cronlab.runtime.worker import Worker, WorkerConfig
from cronlab.stores.sqlite import SqliteStore

STORE = click.option(
    "--store", "store_url", required=True, metavar="URL", help="sqlite:///PATH or postgresql://…"
)
ELECTION_HELP = "lease, off (the anti-pattern: every replica dispatches) or etcd://host:2379."
QUEUE = click.option(
    "--queue",
    "queue_url",
    envvar="CRONLAB_QUEUE",
    default=None,
    metavar="URL",
    help="redis://host:6379 (default: the store's own queue).",
)

APP = click.option(
    "--app",
    "app_spec",
    envvar="CRONLAB_APP",
    default=None,
    metavar="MODULE:APP",
    help="Your cronlab.App (imported from the working directory): its handlers run and its "
    "schedules are deployed to --store.",
)


def _election(ctx: click.Context, param: click.Parameter, value: str) -> str:
    return distributed.check_election(value)


JSON = click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
# status/chaos: where the leader lives (the store's lease row, or etcd's leader key).
OBSERVE_ELECTION = click.option(
    "--election",
    envvar="CRONLAB_ELECTION",
    default="lease",
    show_default=True,
    callback=_election,
    help="The cluster's --election: etcd://host:2379[/prefix] to ask etcd for the leader.",
)
CLOCK = SystemClock()


def register(group: click.Group) -> None:
    """Add the engine's commands to the ``cronlab`` group."""
    for command in (
        cluster_cmd,
        scheduler_cmd,
        worker_cmd,
        invoices,
        status_cmd,
        chaos_cmd,
        report_cmd,
    ):
        group.add_command(command)


def open_store(url: str, *, create: bool) -> SqliteStore:
    """The store behind ``--store``; ``create=False`` refuses a missing file (nothing written)."""
    store: SqliteStore = distributed.open_store(url, create=create)
    return store


class _Stop:
    """Set by SIGTERM/SIGINT so a loop ends cleanly (and releases its lease)."""

    def __init__(self) -> None:
        self.flag = False
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, self._set)

    def _set(self, signum: int, frame: object) -> None:
        self.flag = True

    def __call__(self) -> bool:
        return self.flag


# -- processes -------------------------------------------------------------------------------


@click.command("cluster")
@STORE
@click.option("--replicas", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--workers", type=click.IntRange(min=1), default=5, show_default=True)
@click.option(
    "--election", default="lease", show_default=True, callback=_election, help=ELECTION_HELP
)
@QUEUE
@APP
@click.option(
    "--timers",
    type=click.Choice(["durable", "in-memory"]),
    default="durable",
    show_default=True,
    help="in-memory: the anti-pattern, takeover gaps are missed.",
)
@click.option(
    "--lease-ttl", type=click.FloatRange(min=0.1), default=10.0, show_default=True, help="Seconds."
)
@click.option(
    "--worker-rate",
    type=click.FloatRange(min=0.001),
    default=None,
    help="Tasks/s per worker (default uncapped).",
)
@click.option("--no-idempotency", is_flag=True, help="Drop the invoices' unique key.")
@click.option("--restart-after", default="300", show_default=True, metavar="S|never")
@click.option(
    "--scan-interval",
    type=click.FloatRange(min=0.01),
    default=1.0,
    show_default=True,
    help="Seconds between leader scans.",
)
@click.option(
    "--visibility",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="Queue visibility timeout, seconds.",
)
@click.option(
    "--scan-batch",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Tasks a leader claims per transaction.",
)
@click.option(
    "--worker-batch",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Most messages a worker claims per transaction (sizes adapt to the handlers' speed).",
)
def cluster_cmd(
    store_url: str,
    replicas: int,
    workers: int,
    election: str,
    queue_url: str | None,
    app_spec: str | None,
    timers: str,
    lease_ttl: float,
    worker_rate: float | None,
    no_idempotency: bool,
    restart_after: str,
    scan_interval: float,
    visibility: float,
    scan_batch: int,
    worker_batch: int,
) -> None:
    """Run R scheduler and W worker processes in the foreground until SIGINT/SIGTERM."""
    cfg = cluster.ClusterConfig(
        store_url=store_url,
        replicas=replicas,
        workers=workers,
        election=election,
        timers=timers,
        lease_ttl_s=lease_ttl,
        worker_rate=worker_rate,
        restart_after_s=_restart_after(restart_after),
        scan_interval_s=scan_interval,
        visibility_s=visibility,
        scan_batch=scan_batch,
        worker_batch=worker_batch,
    )
    if queue_url:
        os.environ["CRONLAB_QUEUE"] = queue_url  # the children read --queue from it
    if app_spec:
        load_app(app_spec)  # a bad --app is one line here, not a crash loop of children
        os.environ["CRONLAB_APP"] = app_spec  # the children read --app from it
    store = open_store(store_url, create=True)
    store.set_idempotency(not no_idempotency)
    click.echo(
        f"cronlab cluster: {replicas} schedulers ({election}, {timers} timers), "
        f"{workers} workers on {store_url} — Ctrl-C stops",
        err=True,
    )
    cluster.Cluster(cfg, store, CLOCK).run()


def _restart_after(text: str) -> float | None:
    if text.strip().lower() == "never":
        return None
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"--restart-after must be seconds or never, got {text!r}") from None
    if value < 0:
        raise ConfigError(f"--restart-after must be >= 0 s, got {text!r}")
    return value


@click.command("scheduler")
@STORE
@click.option("--replica", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--election", default="lease", callback=_election, help=ELECTION_HELP)
@QUEUE
@APP
@click.option("--timers", type=click.Choice(["durable", "in-memory"]), default="durable")
@click.option("--lease-ttl", type=click.FloatRange(min=0.1), default=10.0, help="Seconds.")
@click.option("--scan-interval", type=click.FloatRange(min=0.01), default=1.0, help="Seconds.")
@click.option("--batch", type=click.IntRange(min=1), default=10_000, show_default=True)
def scheduler_cmd(
    store_url: str,
    replica: int,
    election: str,
    queue_url: str | None,
    app_spec: str | None,
    timers: str,
    lease_ttl: float,
    scan_interval: float,
    batch: int,
) -> None:
    """One scheduler replica (the cluster starts these)."""
    app = load_app(app_spec) if app_spec else None  # a bad --app: one line, nothing written
    store = distributed.open_store(store_url, create=True, election=election)
    if app is not None:
        app.deploy(schedule_store(store))
    elector, mode = distributed.open_elector(election, store, CLOCK)
    queue, store = distributed.open_queue(queue_url, store, CLOCK)
    cfg = SchedulerConfig(
        replica=replica,
        election=mode,
        timers=cast(Timers, timers),
        ttl_ms=int(lease_ttl * 1000),
        scan_ms=int(scan_interval * 1000),
        batch=batch,
    )
    pid = os.getpid()
    cluster.tune_gc()
    Scheduler(
        cfg,
        store=store,
        queue=queue,
        elector=elector,
        clock=CLOCK,
        owner=cluster.owner_name("scheduler", replica, pid),
        pid=pid,
    ).run(_Stop())


@click.command("worker")
@STORE
@click.option("--index", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--rate", type=click.FloatRange(min=0.001), default=None, help="Tasks/s cap.")
@click.option(
    "--batch",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Largest batch (sizes adapt to the handlers' speed).",
)
@click.option("--visibility", type=click.FloatRange(min=0.1), default=30.0, help="Seconds.")
@click.option("--max-attempts", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--retry-base", type=click.FloatRange(min=0), default=0.5, help="Seconds.")
@QUEUE
@APP
def worker_cmd(
    store_url: str,
    index: int,
    rate: float | None,
    batch: int,
    visibility: float,
    max_attempts: int,
    retry_base: float,
    queue_url: str | None,
    app_spec: str | None,
) -> None:
    """One worker (the cluster starts these)."""
    handlers = registry if app_spec is None else load_app(app_spec).registry
    queue, store = distributed.open_queue(queue_url, open_store(store_url, create=True), CLOCK)
    retry = Retry(max_attempts=max_attempts, base_ms=int(retry_base * 1000))
    cfg = WorkerConfig(
        index=index, batch=batch, visibility_ms=int(visibility * 1000), rate=rate, retry=retry
    )
    name = cluster.owner_name("worker", index, os.getpid())
    cluster.tune_gc()
    Worker(cfg, store=store, queue=queue, registry=handlers, clock=CLOCK, name=name).run(_Stop())


# -- data ------------------------------------------------------------------------------------


@click.group("invoices")
def invoices() -> None:
    """The invoice workload."""


@invoices.command("seed")
@STORE
@click.option("--count", type=click.IntRange(min=0), required=True, help="Invoices to add.")
@click.option(
    "--at", "at_text", required=True, metavar="+SECONDS|ISO8601", help="When they fall due."
)
@click.option(
    "--work-ms",
    type=click.IntRange(min=0),
    default=0,
    help="Simulated work per invoice, milliseconds.",
)
@JSON
def seed_cmd(store_url: str, count: int, at_text: str, work_ms: int, as_json: bool) -> None:
    """Add COUNT invoice tasks due at one instant (duplicate keys are ignored)."""
    trigger_ms = parse_at(at_text, CLOCK.now_ms())
    store = open_store(store_url, create=True)
    with Progress(console=Console(stderr=True), transient=True) as bar:
        job = bar.add_task("seeding invoices", total=count)
        added = store.add_tasks(
            invoice_tasks(count, trigger_ms, work_ms), progress=lambda n: bar.advance(job, n)
        )
    at_iso = to_datetime(trigger_ms).isoformat()
    if as_json:
        click.echo(
            json.dumps({"added": added, "count": count, "at": at_iso, "trigger_ms": trigger_ms})
        )
    else:
        click.echo(f"added {added:,} of {count:,} invoice tasks due at {at_iso}")


def parse_at(text: str, now_ms: int) -> int:
    """``+SECONDS`` from now, or an ISO 8601 instant (with an offset, or Z) → epoch ms."""
    if text.startswith("+"):
        try:
            return now_ms + int(float(text[1:]) * 1000)
        except (ValueError, OverflowError):
            raise ConfigError(f"--at {text!r}: expected +SECONDS or ISO 8601") from None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"--at {text!r}: expected +SECONDS or ISO 8601") from None
    if moment.tzinfo is None:
        raise ConfigError(f"--at {text!r}: give a UTC offset (e.g. Z or +02:00)")
    return int(moment.timestamp() * 1000)


def invoice_tasks(count: int, trigger_ms: int, work_ms: int = 0) -> Iterator[NewTask]:
    """One invoice per customer for the period named by the trigger instant."""
    period = to_datetime(trigger_ms).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    work = f', "work_ms": {work_ms}' if work_ms else ""
    for i in range(1, count + 1):
        customer = f"cust-{i:07d}"
        yield NewTask(
            idempotency_key=f"invoice/{period}/{customer}",
            handler="invoice",
            trigger_ms=trigger_ms,
            payload=f'{{"customer": "{customer}", "period": "{period}"{work}}}',
        )


# -- observation -----------------------------------------------------------------------------


@click.command("status")
@STORE
@OBSERVE_ELECTION
@JSON
def status_cmd(store_url: str, election: str, as_json: bool) -> None:
    """The leader, every process, task counts and queue depth."""
    data = status(open_store(store_url, create=False), distributed.observer(election, CLOCK))
    if as_json:
        click.echo(json.dumps(data))
    else:
        _print_status(data)


def status(store: SqliteStore, elector: LeaseElector | None = None) -> dict[str, Any]:
    """The ``status --json`` object (keys are a contract with the lab).

    The leader comes from ``elector`` when the election lives outside the store (etcd)."""
    now = CLOCK.now_ms()
    procs = store.processes()
    lease = chaos.current_lease(store, CLOCK, elector)
    holder = next((p for p in procs if lease and p.owner == lease.holder), None)
    leader = None
    if lease is not None:
        leader = {
            "holder": lease.holder,
            "replica": holder.index if holder else None,
            "pid": holder.pid if holder else None,
            "epoch": lease.epoch,
            "expires_ms": lease.expires_ms,
            "expires_at": to_datetime(lease.expires_ms).isoformat(),
        }
    return {
        "now_ms": now,
        "leader": leader,
        "epoch": lease.epoch if lease else store.lease_read().epoch,
        "processes": [
            {
                "role": p.role,
                "index": p.index,
                "pid": p.pid,
                "owner": p.owner,
                "alive": p.exited_ms is None and chaos.alive(p.pid),
                "started_ms": p.started_ms,
            }
            for p in procs
        ],
        "tasks": store.counts(),
        "queue_depth": store.queue_depth(),
    }


def _print_status(data: dict[str, Any]) -> None:
    out = Console()
    lead = data["leader"]
    out.print(
        f"leader: replica {lead['replica']} (pid {lead['pid']}), epoch {lead['epoch']}, "
        f"lease until {lead['expires_at']}"
        if lead
        else "leader: none",
        highlight=False,
    )
    table = Table("role", "index", "pid", "alive")
    for p in data["processes"]:
        table.add_row(p["role"], str(p["index"]), str(p["pid"]), "yes" if p["alive"] else "no")
    out.print(table)
    counts = " · ".join(f"{k} {v:,}" for k, v in data["tasks"].items())
    out.print(f"tasks: {counts} · queue depth {data['queue_depth']:,}", highlight=False)


@click.command("report")
@STORE
@JSON
def report_cmd(store_url: str, as_json: bool) -> None:
    """Measured totals (the model's names), duplicate invoices, dispatch lateness."""
    r = report.measure(open_store(store_url, create=False), CLOCK.now_ms())
    if as_json:
        click.echo(json.dumps(r.as_dict()))
        return
    for key, value in r.as_dict().items():
        click.echo(f"{key}: {value}")


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
    e = chaos.crash_leader(open_store(store_url, create=False), CLOCK, elector)
    _echo_event("SIGKILL leader", e.pid, e.holder)


@chaos_cmd.command("pause-leader")
@STORE
@OBSERVE_ELECTION
@click.option("--for", "seconds", type=click.FloatRange(min=0), required=True, help="Seconds.")
def pause_leader_cmd(store_url: str, election: str, seconds: float) -> None:
    """SIGSTOP the leader, then SIGCONT it after --for seconds (blocks meanwhile)."""
    elector = distributed.observer(election, CLOCK)
    e = chaos.pause_leader(open_store(store_url, create=False), CLOCK, seconds, elector)
    _echo_event(f"SIGSTOP/SIGCONT after {seconds} s, leader", e.pid, e.holder)


@chaos_cmd.command("crash-replica")
@STORE
@OBSERVE_ELECTION
@click.argument("index", type=click.IntRange(min=0))
def crash_replica_cmd(store_url: str, election: str, index: int) -> None:
    """SIGKILL scheduler replica INDEX."""
    elector = distributed.observer(election, CLOCK)
    e = chaos.crash_replica(open_store(store_url, create=False), CLOCK, index, elector)
    _echo_event(f"SIGKILL replica {index}", e.pid, e.holder)


@chaos_cmd.command("kill-worker")
@STORE
@click.argument("index", type=click.IntRange(min=0), required=False)
def kill_worker_cmd(store_url: str, index: int | None) -> None:
    """SIGKILL worker INDEX (default: the lowest live one)."""
    e = chaos.kill_worker(open_store(store_url, create=False), CLOCK, index)
    _echo_event("SIGKILL worker", e.pid, e.holder)
