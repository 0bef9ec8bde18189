"""The cluster: R scheduler and W worker processes, each a real OS process.

Each child runs ``python -m cronlab scheduler|worker …``; its pid and lease owner name go in
the store's process registry (``status`` and ``chaos`` read it). A child that dies is started
again after ``restart_after_s`` (None: never). SIGINT/SIGTERM stop every child, then return.

The first children are started before the cluster has checked its store (``launch``): each
imports what it runs while the parent opens, migrates and syncs the store, then waits on a
pipe, the *start gate*, before it touches anything. ``go`` opens the gate; ``abort`` (a store
that is not ours, an app that does not load) closes it unopened and they exit quietly, so a
mistake is still one line. Start-up is then one process's imports, not two in a row.
"""

from __future__ import annotations

import contextlib
import gc
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cronlab.exceptions import ConfigError
from cronlab.ports import Clock, Event, ProcessInfo, Store
from cronlab.runtime import proc, reports
from cronlab.runtime.duties import Operations
from cronlab.urls import redact

USAGE_EXIT = 2  # what cronlab exits with on a user's mistake
STARTUP_S = 30.0  # a child that exits so soon with USAGE_EXIT failed at start-up
METRICS_PREFIX = "cronlab-metrics-"  # + the cluster's pid + "-": a dead cluster's is reaped

POLL_S = 0.2
# A batch allocates thousands of short-lived objects (messages, contexts, rows): with the
# default 700 the young generation is collected several times per batch, for nothing.
GC_YOUNG_THRESHOLD = 100_000
STOP_GRACE_S = 5.0


def tune_gc() -> None:
    """For a long-running engine process, once its start-up is done: move what start-up built
    out of the collector's way and collect the young generation less often (cycles are
    still collected)."""
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, 50, 100)


@dataclass(frozen=True, kw_only=True)
class ClusterConfig:
    """What ``cronlab cluster`` starts."""

    store_url: str
    replicas: int = 3
    workers: int = 5
    election: str = "lease"
    lease_ttl_s: float = 10.0
    worker_rate: float | None = None
    restart_after_s: float | None = 300.0
    scan_interval_s: float = 1.0
    visibility_s: float = 30.0
    scan_batch: int = 10_000
    worker_batch: int = 10_000
    concurrency: int = 100  # async tasks a worker runs at once
    # The children's command: ``python -m cronlab *prefix ROLE … *ROLE_args`` (the lab's
    # clusters run ``lab scheduler`` and ``lab worker`` with its anti-patterns' flags).
    prefix: tuple[str, ...] = ()
    scheduler_args: tuple[str, ...] = ()
    worker_args: tuple[str, ...] = ()
    # the history's retention, the alerts' webhook, one port serving every child's metrics
    ops: Operations = field(default_factory=Operations)


NONCE_ENV = "CRONLAB_NONCE"
GATE_ENV = "CRONLAB_START_GATE"  # the read end of the start gate, in a first child


def identity(
    role: str,
    index: int,
    *,
    host: str | None = None,
    pid: int | None = None,
    nonce: str | None = None,
) -> str:
    """The name a process uses as lease holder and in the registry:
    ``ROLE-INDEX@HOST:PID:NONCE``. Unique even where every replica is PID 1 with the same
    ``--replica`` (pods started from one manifest): the nonce is random per process start,
    or ``CRONLAB_NONCE`` when a supervisor chose it (so it can name the process it started)."""
    host = host if host is not None else socket.gethostname()
    pid = pid if pid is not None else os.getpid()
    nonce = nonce or os.environ.get(NONCE_ENV) or secrets.token_hex(4)
    return f"{role}-{index}@{host}:{pid}:{nonce}"


def pid_of(name: str) -> int:
    """The PID inside an :func:`identity`; ``ValueError`` if ``name`` is not one."""
    return int(name.rsplit(":", 2)[-2])


@dataclass(frozen=True, kw_only=True)
class Identity:
    """What an :func:`identity` name says."""

    role: str
    index: int
    host: str
    pid: int


def parse_identity(name: str) -> Identity | None:
    """The parts of an :func:`identity` name; None for a name of another shape."""
    head, at, rest = name.partition("@")
    role, dash, index = head.rpartition("-")
    parts = rest.rsplit(":", 2)
    if not (at and dash and len(parts) == 3 and index.isdecimal() and parts[1].isdecimal()):
        return None
    return Identity(role=role, index=int(index), host=parts[0], pid=int(parts[1]))


def command(cfg: ClusterConfig, role: str, index: int) -> list[str]:
    """The child's command line. It holds no URL: those may carry passwords, and every local
    user can read a process's argv (``ps``); the child reads them from ``secret_env``."""
    base = [sys.executable, "-m", "cronlab", *cfg.prefix, role]
    if role == "scheduler":
        return [
            *base,
            "--replica",
            str(index),
            "--lease-ttl",
            str(cfg.lease_ttl_s),
            "--scan-interval",
            str(cfg.scan_interval_s),
            "--batch",
            str(cfg.scan_batch),
            "--keep",
            f"{cfg.ops.keep_ms}ms",
            *cfg.scheduler_args,
        ]
    rate = [] if cfg.worker_rate is None else ["--rate", str(cfg.worker_rate)]
    batch = ["--batch", str(cfg.worker_batch), "--concurrency", str(cfg.concurrency)]
    visibility = ["--visibility", str(cfg.visibility_s)]
    return [*base, "--index", str(index), *visibility, *batch, *rate, *cfg.worker_args]


def secret_env(cfg: ClusterConfig) -> dict[str, str]:
    """The URLs a child needs, passed in its environment (readable by its user alone)."""
    env = {"CRONLAB_STORE": cfg.store_url, "CRONLAB_ELECTION": cfg.election}
    if cfg.ops.alert_webhook:
        env["CRONLAB_ALERT_WEBHOOK"] = cfg.ops.alert_webhook
    return env


class Cluster:
    """Starts, watches, restarts and stops the children."""

    def __init__(self, cfg: ClusterConfig, clock: Clock) -> None:
        self.cfg, self.clock = cfg, clock
        self._store: Store | None = None
        self._gate: int | None = None  # the write end while the first children wait
        self.children: dict[tuple[str, int], subprocess.Popen[bytes]] = {}
        self.owners: dict[tuple[str, int], str] = {}
        self.restarts: dict[tuple[str, int], float] = {}
        self.started: dict[tuple[str, int], float] = {}  # monotonic, of each slot's first start
        self.started_ms: dict[tuple[str, int], int] = {}  # wall clock, of its latest start
        self.restarted: set[tuple[str, int]] = set()
        self.stop = False
        self.failed: str | None = None
        self.metrics_dir: str | None = None
        self._ended = False  # run has stopped every child
        self._starting = False  # serve has not begun to run: an interrupt raises too
        self.metrics_env: dict[str, str] = {}
        self._reports: tuple[int, int] | None = None  # the children's report pipe (r, w)
        self._reported: dict[int, tuple[str, str]] = {}  # pid → (kind, line)

    def slots(self) -> list[tuple[str, int]]:
        return [("scheduler", i) for i in range(self.cfg.replicas)] + [
            ("worker", i) for i in range(self.cfg.workers)
        ]

    @property
    def store(self) -> Store:
        assert self._store is not None, "the cluster's store comes with go()"
        return self._store

    def launch(self) -> None:
        """Start every child; each waits at the start gate until ``go`` or ``abort``."""
        self._serve_metrics()
        self._reports = os.pipe()
        os.set_blocking(self._reports[0], False)
        read, self._gate = os.pipe()
        try:
            for slot in self.slots():
                self._start(slot, gate=read)
        finally:
            os.close(read)

    def go(self, store: Store) -> None:
        """The store is checked: register the children, then let them start."""
        self._store = store
        self._forget_dead()
        for slot in self.children:
            self._register(slot)
        gate, self._gate = self._gate, None
        if gate is not None:
            with contextlib.suppress(BrokenPipeError):  # every child died already
                os.write(gate, b"g" * len(self.children))
            os.close(gate)

    def serve(self, check: Callable[[], Store]) -> None:
        """``launch``, ``go`` with the store ``check`` returns, ``run``: the whole life of a
        cluster in the foreground. Whatever ends it, wherever it lands, leaves no child,
        metrics directory or pipe.

        SIGINT/SIGTERM are this cluster's from the first step: each sets ``stop``, which no
        exception handler can swallow, and during start-up also raises KeyboardInterrupt, so
        a long ``check`` (a busy store) ends at once. CPython discards an exception raised
        where a destructor, a weakref callback or an at-fork callback runs; the interrupt
        was once lost so and the cluster ran on — so ``stop`` is looked at again after each
        step of the start (``_started``)."""
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self._starting = True
            self.launch()
            self._started()
            store = check()
            self._started()
            self.go(store)
            self._started()
            self._starting = False
            self.run()
        except BaseException:
            self.abort()
            raise
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)

    def _started(self) -> None:
        """A step of the start is done: an interrupt that came meanwhile stops it here."""
        if self.stop:
            raise KeyboardInterrupt

    def abort(self) -> None:
        """The cluster cannot start: the gate closes unopened and the children exit (opened
        already, when the start was interrupted after ``go``: they are stopped). Nothing
        once ``run`` has stopped them (their pids may be another's by now)."""
        if self._ended:
            return
        gate, self._gate = self._gate, None
        if gate is not None:
            os.close(gate)
        elif self._store is not None:
            for child in self.children.values():
                _signal(child.pid, signal.SIGTERM)
        for child in self.children.values():
            try:
                child.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        self._drop_metrics()
        self._close_reports()

    def run(self) -> None:
        """Foreground, after ``launch`` and ``go``: watch until SIGINT/SIGTERM, restart
        what dies, stop everything."""
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            while not self.stop:
                self._watch()
                time.sleep(POLL_S)
        finally:
            self._ended = True
            try:
                self._stop_all()
            finally:
                for s, handler in old.items():
                    signal.signal(s, handler)
                self._drop_metrics()
                self._close_reports()
        if self.failed is not None:
            raise ConfigError(self.failed)

    def _drop_metrics(self) -> None:
        if self.metrics_dir is not None:
            shutil.rmtree(self.metrics_dir, ignore_errors=True)
            self.metrics_dir = None

    def _close_reports(self) -> None:
        if self._reports is not None:
            for fd in self._reports:
                os.close(fd)
            self._reports = None

    def _serve_metrics(self) -> None:
        """With ``metrics_port``: one server for every child, which write their instruments to
        a fresh directory (Prometheus's multiprocess mode)."""
        if self.cfg.ops.metrics_port is None:
            return
        from cronlab import stores
        from cronlab.metrics import prometheus

        reap_metrics(tempfile.gettempdir())
        while True:  # (not tempfile.mkdtemp: the name is noted before the directory
            # exists, so an interrupt between the two never leaves one nobody removes)
            self.metrics_dir = _unused_name(f"{METRICS_PREFIX}{os.getpid()}-")
            with contextlib.suppress(FileExistsError):
                os.mkdir(self.metrics_dir, 0o700)
                break
        self.metrics_env = prometheus.for_cluster(
            self.cfg.ops.metrics_port,
            self.cfg.ops.metrics_host,
            self.metrics_dir,
            lambda: stores.open_store(self.cfg.store_url, create=False),
            self.clock.now_ms,
        )

    def _on_signal(self, signum: int, frame: object) -> None:
        self.stop = True
        if self._starting:
            raise KeyboardInterrupt

    def _forget_dead(self) -> None:
        """Mark exited the processes of this host that the registry still lists as running but
        are gone (their cluster was SIGKILLed: nobody recorded their exit)."""
        host, now = socket.gethostname(), self.clock.now_ms()
        for p in self.store.processes():
            who = parse_identity(p.owner)
            if p.exited_ms is None and who and who.host == host and not proc.alive(p.pid):
                self.store.process_exited(p.owner, now)

    def _spawn(self, slot: tuple[str, int]) -> None:
        """Start the child of ``slot`` again (it died), registered at once."""
        self._start(slot)
        self._register(slot)

    def _start(self, slot: tuple[str, int], gate: int | None = None) -> None:
        role, index = slot
        nonce = secrets.token_hex(4)
        env = {**os.environ, NONCE_ENV: nonce, **secret_env(self.cfg), **self.metrics_env}
        fds = [] if gate is None else [gate]
        if gate is not None:
            env[GATE_ENV] = str(gate)
        if self._reports is not None:
            env[reports.ENV] = str(self._reports[1])
            fds.append(self._reports[1])
        env[proc.PARENT_ENV] = str(os.getpid())  # it dies with us (proc.die_with_parent)
        child = subprocess.Popen(
            command(self.cfg, role, index), stdin=subprocess.DEVNULL, env=env, pass_fds=fds
        )
        self.children[slot] = child
        self.owners[slot] = identity(role, index, pid=child.pid, nonce=nonce)
        self.started.setdefault(slot, time.monotonic())  # the first start only
        self.started_ms[slot] = self.clock.now_ms()

    def _register(self, slot: tuple[str, int]) -> None:
        role, index = slot
        pid = self.children[slot].pid
        info = ProcessInfo(
            role=role,
            index=index,
            pid=pid,
            owner=self.owners[slot],
            started_ms=self.started_ms[slot],
            place=proc.place(pid),  # (its child: the same machine and PID namespace)
        )
        self.store.register_process(info)

    def _watch(self) -> None:
        now = time.monotonic()
        if self.store.missing():
            self.failed = (
                f"the store {redact(self.cfg.store_url)} was deleted or replaced: stopping"
            )
            self.stop = True
            return
        if self._reports is not None:
            self._reported.update(reports.read(self._reports[0]))
        for slot, child in list(self.children.items()):
            if child.poll() is not None and slot not in self.restarts:
                self._exited(slot, child, now)
        for slot, at in list(self.restarts.items()):
            if now >= at:
                del self.restarts[slot]
                self._spawn(slot)

    def _exited(self, slot: tuple[str, int], child: subprocess.Popen[bytes], now: float) -> None:
        role, index = slot
        self.store.process_exited(self.owners[slot], self.clock.now_ms())
        if self.metrics_dir is not None:
            from cronlab.metrics import prometheus

            prometheus.child_exited(child.pid, self.metrics_dir)
        self.store.record_event(
            Event(
                kind="exit",
                at_ms=self.clock.now_ms(),
                pid=child.pid,
                detail={"role": role, "index": index, "code": child.returncode},
            )
        )
        first_run = slot not in self.restarted
        self.restarted.add(slot)
        kind, line = self._reported.pop(child.pid, ("", ""))
        at_start = first_run and now - self.started[slot] < STARTUP_S
        if at_start and child.returncode == USAGE_EXIT and kind != "unavailable":
            # A configuration error (a bad URL, an app that does not load here): starting it
            # again cannot help. Stop, with its line (once, however many children said it).
            self.failed = (
                self.failed
                or line
                or (
                    f"{role} {index} stopped at start-up with a configuration error (exit 2; "
                    "its line is above): the cluster stops too"
                )
            )
            self.stop = True
        if self.cfg.restart_after_s is not None:
            self.restarts[slot] = now + self.cfg.restart_after_s
        else:
            self.restarts[slot] = float("inf")
        if line and not self.stop:
            again = (
                "not started again (--restart-after never)"
                if self.cfg.restart_after_s is None
                else f"started again in {self.cfg.restart_after_s:g} s"
            )
            _say(f"cronlab: {role} {index} exited: {line}; {again}")

    def _stop_all(self) -> None:
        live = [c for c in self.children.values() if c.poll() is None]
        for child in live:
            _signal(child.pid, signal.SIGCONT)  # a paused child cannot handle SIGTERM
            _signal(child.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for child in live:
            try:
                child.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        now = self.clock.now_ms()
        for slot in self.children:
            self.store.process_exited(self.owners[slot], now)


def _unused_name(prefix: str) -> str:
    """A path in the temporary folder not taken yet: ``prefix`` and random letters."""
    return os.path.join(tempfile.gettempdir(), prefix + secrets.token_hex(8))


def reap_metrics(folder: str) -> None:
    """Remove the metrics directories in ``folder`` that a cluster no longer running left
    (a SIGKILLed one could not remove its own): this user's, named with a dead pid."""
    for found in Path(folder).glob(f"{METRICS_PREFIX}*-*"):
        pid = found.name.removeprefix(METRICS_PREFIX).partition("-")[0]
        with contextlib.suppress(OSError):
            mine = found.is_dir() and found.stat().st_uid == os.getuid()
            if mine and pid.isdecimal() and not proc.alive(int(pid)):
                shutil.rmtree(found, ignore_errors=True)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def pass_gate() -> None:
    """In a first child (``GATE_ENV`` set): wait at the start gate; exit quietly if the
    cluster could not start (the gate closed unopened). Elsewhere: return at once."""
    fd = os.environ.pop(GATE_ENV, None)
    if fd is None:
        return
    opened = os.read(int(fd), 1)
    os.close(int(fd))
    if not opened:
        sys.exit(0)


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
