"""Options and helpers the engine's commands share (one definition each)."""

from __future__ import annotations

import functools
import os
import signal
import socket
from collections.abc import Callable
from typing import Any, TypeVar

import click

from cronlab import distributed
from cronlab.app import App
from cronlab.app import load as load_app
from cronlab.cli.knobs import Finite, knob, no_typed_secret, untyped_secret
from cronlab.clock import SystemClock
from cronlab.exceptions import ConfigError
from cronlab.runtime.duties import Operations
from cronlab.stores.sql import SqlStore

F = TypeVar("F", bound=Callable[..., Any])
CLOCK = SystemClock()
STORE_HELP = "sqlite:///PATH or postgresql://… (or CRONLAB_STORE: keeps a password out of ps)."
STORE = click.option(
    "--store",
    "store_url",
    required=True,
    envvar="CRONLAB_STORE",
    callback=no_typed_secret,
    metavar="URL",
    help=STORE_HELP,
)
ELECTION_HELP = "lease or etcd://host:2379."
QUEUE = click.option(
    "--queue",
    "queue_url",
    envvar="CRONLAB_QUEUE",
    default=None,
    callback=lambda ctx, param, value: no_typed_secret(ctx, param, distributed.check_queue(value)),
    metavar="URL",
    help="redis://host:6379 (default: the store's own queue; or CRONLAB_QUEUE).",
)
# ``--store`` of a command that takes ``--app``: optional, the app's own store by default
# (``store_url_for``).
APP_STORE = click.option(
    "--store",
    "store_url",
    default=None,
    callback=no_typed_secret,
    metavar="URL",
    help="sqlite:///PATH or postgresql://… (default: the --app's own store, or CRONLAB_STORE).",
)
APP = click.option(
    "--app",
    "app_spec",
    envvar="CRONLAB_APP",
    default=None,
    metavar="MODULE:APP",
    help="Your cronlab.App (imported from the working directory): its handlers run and its "
    "schedules are deployed to --store. Default: the lab's invoice workload.",
)
JSON = click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")


DAY_S = 86_400.0
SECONDS = Finite(min=0.1, max=DAY_S)
MAX_BATCH = 1_000_000  # tasks or messages one transaction takes
BATCH = click.IntRange(min=1, max=MAX_BATCH)
MAX_INDEX = 1_000_000  # a process's --replica or --index (the registry stores it)
INDEX = click.IntRange(min=0, max=MAX_INDEX)
# (named with their unit, as the engine's configurations name them)
LEASE_TTL = knob("--lease-ttl", SECONDS, 10.0, "Seconds.", dest="lease_ttl_s")
SCAN_INTERVAL = knob(
    "--scan-interval",
    Finite(min=0.01, max=DAY_S),
    1.0,
    "Seconds between scans.",
    dest="scan_interval_s",
)
VISIBILITY = knob(
    "--visibility", SECONDS, 30.0, "Queue visibility timeout, seconds.", dest="visibility_s"
)
RESTART_AFTER = knob(
    "--restart-after",
    click.STRING,
    "300",
    "A crashed process restarts after S seconds.",
    metavar="S|never",
)
BATCH_HELP = "Most messages a worker claims per transaction (sizes adapt to the handlers' speed)."
KEEP = knob(
    "--keep",
    click.STRING,
    "30d",
    "Run history older than this is pruned by the leader (at least 1h).",
    metavar="DELAY",
)
ALERT_WEBHOOK = click.option(
    "--alert-webhook",
    envvar="CRONLAB_ALERT_WEBHOOK",
    default=None,
    metavar="URL",
    help="POST alerts here (signed with CRONLAB_ALERT_SECRET); or CRONLAB_ALERT_WEBHOOK.",
)
METRICS_PORT = click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Serve Prometheus metrics at http://HOST:PORT/metrics.",
)
METRICS_HOST = knob(
    "--metrics-host",
    click.STRING,
    "127.0.0.1",
    "Address the metrics port binds (off loopback, scrapes need CRONLAB_METRICS_TOKEN as a "
    "bearer token).",
)


def with_operations(command: Callable[..., None]) -> Callable[..., None]:
    """``--keep``, ``--alert-webhook``, ``--metrics-port`` and ``--metrics-host`` on
    ``command``, which takes them as one checked ``ops`` (a bad one: a one-line error before
    the command does anything)."""

    @functools.wraps(command)
    def run(
        *args: Any,
        keep: str,
        alert_webhook: str | None,
        metrics_port: int | None,
        metrics_host: str,
        **kwargs: Any,
    ) -> None:
        command(*args, ops=operations(keep, alert_webhook, metrics_port, metrics_host), **kwargs)

    for option in (METRICS_HOST, METRICS_PORT, ALERT_WEBHOOK, KEEP):
        run = option(run)
    return run


def operations(
    keep: str, alert_webhook: str | None, metrics_port: int | None, metrics_host: str
) -> Operations:
    """The run-history, alert and metrics options as one value (checked: one-line errors)."""
    from cronlab.runtime import alerts, retention

    alerts.webhook(alert_webhook)
    if metrics_port is not None:
        from cronlab.metrics import server

        server.check(metrics_host, server.token_from_env())
        check_listen(metrics_port, metrics_host)
    return Operations(
        keep_ms=retention.parse_keep(keep),
        alert_webhook=alert_webhook,
        metrics_port=metrics_port,
        metrics_host=metrics_host,
    )


def check_listen(port: int, host: str) -> None:
    """Bind ``host:port`` and let it go: a host that is not this machine's or a port that is
    taken is a one-line error before anything is written (the server binds it later)."""
    try:
        family, kind, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
    except (OSError, ValueError, UnicodeError, TypeError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(f"--metrics-port {port} on {host[:80]!r}: {why}") from None


def check_election(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """Click callback for ``--election`` (``off`` refused: ``check_election_or_off``)."""
    checked = distributed.check_election(value)
    untyped_secret(checked, ctx, param)
    return checked


def check_election_or_off(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """Click callback for ``--election`` where ``off`` is taken: the lab's, and observers'."""
    checked = distributed.check_election(value, off=True)
    untyped_secret(checked, ctx, param)
    return checked


def election_option(help: str, *, off: bool = False) -> Callable[[F], F]:
    """``--election`` (or CRONLAB_ELECTION), checked; ``help`` says what it is to the command;
    ``off``: the anti-pattern is taken (the lab's commands, and those that observe)."""
    return click.option(
        "--election",
        envvar="CRONLAB_ELECTION",
        default="lease",
        show_default=True,
        callback=check_election_or_off if off else check_election,
        help=help,
    )


# cluster/scheduler: how the replicas elect a leader.
ELECTION = election_option(ELECTION_HELP + " (or CRONLAB_ELECTION: keeps a password out of ps).")
# status/chaos: where the leader lives (the store's lease row, or etcd's leader key).
OBSERVE_ELECTION = election_option(
    "The cluster's --election: etcd://host:2379[/prefix] to ask etcd for the leader.", off=True
)


def read_store(url: str) -> SqlStore:
    """The store behind ``--store`` for a command that only reads: never created, migrated or
    otherwise changed (a SQLite file is opened read-only)."""
    return distributed.store_for(url, create=False, read_only=True)


def app_for(spec: str | None) -> App:
    """The ``--app`` named, or the lab's invoice workload when none is."""
    from cronlab.lab import invoices

    return load_app(spec) if spec else invoices.app


class Stop:
    """Set by SIGTERM/SIGINT so a loop ends cleanly (and releases its lease)."""

    def __init__(self) -> None:
        self.flag = False
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, self._set)

    def _set(self, signum: int, frame: object) -> None:
        self.flag = True

    def __call__(self) -> bool:
        return self.flag


def store_url_for(given: str | None, app: App | None) -> str:
    """``--store``, else the app's own store URL, else ``CRONLAB_STORE`` (as ``cronlab run``)."""
    url = given or (app.store_url if app is not None else None) or os.environ.get("CRONLAB_STORE")
    if not url:
        raise ConfigError("no store: give --store URL (or CRONLAB_STORE, or a URL in the app)")
    return url
