"""The engine's processes: ``cluster`` (R schedulers + W workers), ``scheduler`` and ``worker``.

Their names and flags are a contract. They offer no anti-pattern: the lab's own commands
(``cronlab lab cluster|scheduler|worker``, ``cli/lab.py``) run the same code with its
scheduler and its flags plugged in (``run_cluster``, ``run_scheduler``, ``run_worker``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, TypeVar

import click

from cronlab import distributed, stores
from cronlab.app import schedule_store
from cronlab.cli.knobs import Finite, knob
from cronlab.cli.options import (
    APP,
    APP_STORE,
    BATCH,
    BATCH_HELP,
    CLOCK,
    DAY_S,
    ELECTION,
    INDEX,
    LEASE_TTL,
    METRICS_HOST,
    METRICS_PORT,
    QUEUE,
    RESTART_AFTER,
    SCAN_INTERVAL,
    STORE,
    VISIBILITY,
    Stop,
    app_for,
    operations,
    with_operations,
)
from cronlab.exceptions import BackendBusy, BackendUnavailable, ConfigError
from cronlab.ports import LeaseElector, Retry, SyncReport, Waiter
from cronlab.runtime import cluster, duties, embedded, reports, startup
from cronlab.runtime.duties import Operations
from cronlab.runtime.scheduler import Scheduler, SchedulerConfig
from cronlab.runtime.worker import IDLE_MS, WOKEN_IDLE_MS, Worker, WorkerConfig
from cronlab.stores import LOCK_WAIT_S
from cronlab.stores.sql import SqlStore
from cronlab.urls import redact

T = TypeVar("T")
MAX_RATE = 1e8  # tasks/s per worker
MAX_ATTEMPTS = 101  # a task's retries are 0..100 (tasks.py)
MAX_RETRY_BASE_S = Retry().cap_ms / 1000  # retries back off from the base, doubling, to this
CONCURRENCY = knob(
    "--concurrency", click.IntRange(min=1, max=10_000), 100, "Async tasks a worker runs at once."
)
WAKEUPS_ENV = "CRONLAB_WAKEUPS"  # "off": schedulers and workers poll, as before wake-ups


def wakeups_on() -> bool:
    """Wake-ups unless CRONLAB_WAKEUPS=off (a benchmark's before, or a host without them)."""
    return os.environ.get(WAKEUPS_ENV, "on").strip().lower() != "off"


@click.command("cluster")
@STORE
@knob("--replicas", click.IntRange(min=1, max=32), 3)
@knob("--workers", click.IntRange(min=1, max=256), 5, "Worker processes (on this machine).")
@ELECTION
@QUEUE
@APP
@LEASE_TTL
@click.option(
    "--worker-rate",
    type=Finite(min=0.001, max=MAX_RATE),
    default=None,
    help="Tasks/s per worker (default uncapped).",
)
@click.option(
    "--no-idempotency", is_flag=True, help="The lab's invoice workload: drop its unique key."
)
@RESTART_AFTER
@SCAN_INTERVAL
@VISIBILITY
@knob("--scan-batch", BATCH, 10_000, "Tasks a leader claims per transaction.")
@knob("--worker-batch", BATCH, 10_000, BATCH_HELP)
@CONCURRENCY
@with_operations
def cluster_cmd(**options: Any) -> None:
    """Run R scheduler and W worker processes in the foreground until SIGINT/SIGTERM."""
    run_cluster(options, {"scheduler": scheduler_cmd, "worker": worker_cmd})


def run_cluster(
    options: dict[str, Any],
    children: dict[str, click.Command],
    *,
    prefix: tuple[str, ...] = (),
    scheduler_args: tuple[str, ...] = (),
    worker_args: tuple[str, ...] = (),
) -> None:
    """``cronlab cluster`` with ``options`` (its flags, by name): ``children`` are the
    commands its children run (``prefix`` before their names, each role's ``…_args`` after
    theirs: the lab's)."""
    queue_url, app_spec = options.pop("queue_url"), options.pop("app_spec")
    no_idempotency = options.pop("no_idempotency")
    restart_after = _restart_after(options.pop("restart_after"))
    # every other option is one of ClusterConfig's fields, by name
    cfg = cluster.ClusterConfig(
        restart_after_s=restart_after,
        prefix=prefix,
        scheduler_args=scheduler_args,
        worker_args=worker_args,
        **options,
    )
    if queue_url:
        os.environ["CRONLAB_QUEUE"] = queue_url  # the children read --queue from it
    if app_spec:
        os.environ["CRONLAB_APP"] = app_spec  # the children read --app from it
    _children_take(cfg, children)
    procs = cluster.Cluster(cfg, CLOCK)

    def checked() -> SqlStore:  # while the children import (they wait at the start gate)
        store = _checked_store(cfg, app_spec, queue_url, not no_idempotency)
        modes = " ".join(scheduler_args)
        click.echo(
            f"cronlab cluster: {cfg.replicas} schedulers ({redact(cfg.election)}"
            f"{', ' + modes if modes else ''}), {cfg.workers} workers on "
            f"{redact(cfg.store_url)} — Ctrl-C stops",
            err=True,
        )
        return store

    procs.serve(checked)  # a mistake stays one line: the children exit without a word


def _children_take(cfg: cluster.ClusterConfig, children: dict[str, click.Command]) -> None:
    """Each child's command line, parsed by the child's own command before any child starts:
    a value the cluster took but its children would refuse is the cluster's one line, not a
    crash loop of children."""
    for role, command in children.items():
        argv = cluster.command(cfg, role, 0)[4 + len(cfg.prefix) :]  # (python -m cronlab ROLE …)
        with _environment(cluster.secret_env(cfg)):
            try:
                command.make_context(role, argv)
            except click.ClickException as exc:
                why = exc.format_message()
                raise ConfigError(f"the cluster's {role}s would refuse it: {why}") from None


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in ``os.environ`` for the block (what a child would find there)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _checked_store(
    cfg: cluster.ClusterConfig, app_spec: str | None, queue_url: str | None, idempotent: bool
) -> SqlStore:
    """What the cluster checks before its children may start: the app loads, the backends
    answer, the store is ours (migrated), the app's schedules are synced."""
    app = app_for(app_spec)  # a bad --app is one line here, not a crash loop of children
    _check_idempotency(app, idempotent)
    distributed.reach(cfg.election, queue_url)  # before the store: a cluster that cannot start
    store = patiently(lambda: distributed.store_for(cfg.store_url, create=True), "cluster")
    patiently(lambda: app.start(store), "cluster")
    echo_sync(patiently(lambda: app.sync(schedule_store(store)), "cluster"))
    patiently(lambda: _idempotency(app, store, idempotent), "cluster")
    return store


def _restart_after(text: str) -> float | None:
    if text.strip().lower() == "never":
        return None
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"--restart-after must be seconds or never, got {text!r}") from None
    if not 0 <= value <= DAY_S:  # (nan fails this too)
        raise ConfigError(f"--restart-after must be 0..{DAY_S:,.0f} s or never, got {text!r}")
    return value


@click.command("scheduler")
@STORE
@click.option("--replica", type=INDEX, default=0, show_default=True)
@ELECTION
@QUEUE
@APP
@LEASE_TTL
@SCAN_INTERVAL
@knob("--batch", BATCH, 10_000, "Tasks claimed per transaction.")
@with_operations
def scheduler_cmd(**options: Any) -> None:
    """One scheduler replica (the cluster starts these)."""
    run_scheduler(options)


Make = Callable[..., Scheduler]  # (SchedulerConfig, **its parts) → a replica


def run_scheduler(
    options: dict[str, Any],
    *,
    make: Make = Scheduler,
    elect: Callable[[str, SqlStore], LeaseElector] | None = None,
) -> None:
    """``cronlab scheduler`` with ``options`` (its flags, by name); ``make`` builds the
    replica and ``elect`` its elector (the lab's: its scheduler, no election)."""
    store_url, replica, election = options["store_url"], options["replica"], options["election"]
    queue_url, app_spec = options["queue_url"], options["app_spec"]
    lease_ttl_s, ops = options["lease_ttl_s"], options["ops"]
    _at_the_gate(store_url)
    app = app_for(app_spec)  # a bad --app: one line, nothing written
    who = f"scheduler {replica}"
    wait_s = min(LOCK_WAIT_S, lease_ttl_s / 2)  # a paused writer is given up before a takeover

    def opened() -> SqlStore:
        distributed.reach(election, queue_url)  # an unreachable backend: one line, too
        return distributed.store_for(store_url, create=True, election=election, lock_wait_s=wait_s)

    sql_store = patiently(opened, who)
    echo_sync(patiently(lambda: app.sync(schedule_store(sql_store)), who), quiet=True)
    elect = elect or (lambda e, s: distributed.open_elector(e, s, CLOCK))
    elector = patiently(lambda: elect(election, sql_store), who)
    queue = patiently(lambda: distributed.open_queue(queue_url, sql_store, CLOCK), who)
    store = sql_store
    cfg = SchedulerConfig(
        replica=replica,
        ttl_ms=int(lease_ttl_s * 1000),
        scan_ms=int(options["scan_interval_s"] * 1000),
        batch=options["batch"],
    )
    owner = cluster.identity("scheduler", replica)
    metrics = duties.metrics(ops, store_url, CLOCK)
    cluster.tune_gc()
    with _waiting(lambda: sql_store.waiter("due")) as waiter:
        make(
            cfg,
            store=store,
            queue=queue,
            elector=elector,
            clock=CLOCK,
            owner=owner,
            pid=os.getpid(),
            duties=duties.leader_duties(sql_store, CLOCK, owner, ops),
            metrics=metrics,
            heartbeat=duties.heartbeat(sql_store, CLOCK, "scheduler", replica, owner),
            waiter=waiter,
        ).run(Stop())


@click.command("worker")
@STORE
@click.option("--index", type=INDEX, default=0, show_default=True)
@click.option("--rate", type=Finite(min=0.001, max=MAX_RATE), default=None, help="Tasks/s cap.")
@knob("--batch", BATCH, 10_000, BATCH_HELP)
@VISIBILITY
@knob("--max-attempts", click.IntRange(min=1, max=MAX_ATTEMPTS), 5)
@knob(
    "--retry-base",
    Finite(min=0, max=MAX_RETRY_BASE_S),
    0.5,
    f"Seconds before a failed task's first retry, doubling each time to at most "
    f"{MAX_RETRY_BASE_S:g} s.",
)
@QUEUE
@APP
@CONCURRENCY
@METRICS_PORT
@METRICS_HOST
def worker_cmd(**options: Any) -> None:
    """One worker (the cluster starts these)."""
    run_worker(options)


def run_worker(
    options: dict[str, Any], *, checked: bool = True, make: Callable[..., Worker] = Worker
) -> None:
    """``cronlab worker`` with ``options`` (its flags, by name); ``make`` builds the worker.
    The lab's: ``checked=False`` (``--fencing off``: workers run stale deliveries too), and
    its worker, which dies mid-batch on request."""
    store_url, index, queue_url = options["store_url"], options["index"], options["queue_url"]
    _at_the_gate(store_url)
    ops = operations("30d", None, options["metrics_port"], options["metrics_host"])
    app = app_for(options["app_spec"])
    who = f"worker {index}"

    def opened() -> SqlStore:
        distributed.reach("lease", queue_url)
        return distributed.store_for(store_url, create=True)

    sql_store = patiently(opened, who)
    patiently(lambda: app.start(sql_store), who)
    queue = patiently(lambda: distributed.open_queue(queue_url, sql_store, CLOCK), who)
    store = sql_store
    retry_base_ms = int(options["retry_base"] * 1000)
    retry = Retry(max_attempts=options["max_attempts"], base_ms=retry_base_ms)
    cfg = WorkerConfig(
        index=index,
        batch=options["batch"],
        visibility_ms=int(options["visibility_s"] * 1000),
        rate=options["rate"],
        retry=retry,
        concurrency=options["concurrency"],
        checked=checked,
    )
    name = cluster.identity("worker", index)
    metrics = duties.metrics(ops, store_url, CLOCK)
    beat = duties.heartbeat(sql_store, CLOCK, "worker", index, name)
    cluster.tune_gc()
    with _waiting(queue.waiter) as waiter:
        idle = IDLE_MS if waiter is None else WOKEN_IDLE_MS  # woken: poll as a fallback only
        make(
            dataclasses.replace(cfg, idle_ms=idle),
            store=store,
            queue=queue,
            registry=app.registry,
            clock=CLOCK,
            name=name,
            metrics=metrics,
            heartbeat=beat,
            waiter=waiter,
        ).run(Stop())


def patiently(step: Callable[[], T], who: str) -> T:
    """``step`` with start-up's patience (``runtime/startup.py``): a busy store is waited
    out, with a bound and a line; in a cluster's child, whose cluster has just reached every
    backend, a backend that does not answer is too."""
    child = reports.ENV in os.environ
    transient = BackendUnavailable if child else BackendBusy
    return startup.patiently(step, who, CLOCK, transient=transient)


def _at_the_gate(store_url: str) -> None:
    """A cluster's first child: its store driver imported, it waits until the cluster has
    checked the store (``cluster.pass_gate``)."""
    if cluster.GATE_ENV in os.environ:
        stores.preload(store_url)
        cluster.pass_gate()


@contextmanager
def _waiting(subscribe: Callable[[], Waiter | None]) -> Iterator[Waiter | None]:
    """A wake-up subscription for the loop inside (None with CRONLAB_WAKEUPS=off), closed
    however the loop ends."""
    waiter = subscribe() if wakeups_on() else None
    try:
        yield waiter
    finally:
        if waiter is not None:
            waiter.close()


def echo_sync(report: SyncReport, *, quiet: bool = False) -> None:
    """What a sync of ``--app``'s schedules changed, a line each on stderr (``quiet``: none
    when nothing changed)."""
    lines = [f"schedule added: {n}" for n in report.added]
    lines += [f"schedule changed: {n}" for n in report.changed]
    lines += [
        f"schedule removed: {n} (one already due is recorded SKIPPED)" for n in report.removed
    ]
    for line in lines or ([] if quiet else ["schedules: in sync"]):
        click.echo(f"cronlab: {line}", err=True)


@click.command("run")
@APP_STORE
@APP
@CONCURRENCY
@SCAN_INTERVAL
@with_operations
def run_cmd(
    store_url: str | None,
    app_spec: str | None,
    concurrency: int,
    scan_interval_s: float,
    ops: Operations,
) -> None:
    """Scheduler and worker in this one process (App.run), until SIGINT/SIGTERM."""
    if not app_spec:
        raise ConfigError("cronlab run needs --app MODULE:APP (or CRONLAB_APP)")
    app = app_for(app_spec)
    if store_url is not None:
        app.use_store(store_url)
    echo_sync(app.sync(), quiet=True)  # an app with no store: one line, before the banner
    shown = redact(app.store_url) if app.store_url else "its store"
    click.echo(f"cronlab run: {app_spec} on {shown} — Ctrl-C stops", err=True)
    embedded.run(
        app, concurrency=concurrency, scan_interval=timedelta(seconds=scan_interval_s), ops=ops
    )


def _check_idempotency(app: object, on: bool) -> None:
    """Before anything is written: only the lab's invoice workload has a key to drop."""
    from cronlab.lab import invoices

    if not on and app is not invoices.app:
        raise ConfigError("--no-idempotency applies to the lab's invoice workload, not to --app")


def _idempotency(app: object, store: object, on: bool) -> None:
    """The lab's invoice workload: its unique key on or off. Another app has no such key."""
    from cronlab.lab import invoices

    if app is invoices.app:
        invoices.set_idempotency(store, on)
