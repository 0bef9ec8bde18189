"""Live mode: the real engine, driven only through its documented CLI, one run at a time.

A run lives in a fresh temporary folder holding one SQLite store. It seeds the invoice
workload (``cronlab invoices seed``), starts ``cronlab cluster`` in its own session so a stop
can signal every process it spawned, and polls ``cronlab status --json`` and ``cronlab report
--json`` into a snapshot the page streams. A run's reaper (``reaper.py``) stops its processes
and removes its folder if the lab dies without stopping it. Nothing here imports the engine:
the contract is the command line (issue 3), so the engine can change inside without breaking
the lab.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from cronlab.exceptions import ConfigError, ConflictError, NotFoundError, ParamError
from cronlab.lab import params
from cronlab.lab.model import simulate
from cronlab.lab.web import reaper

CRONLAB: tuple[str, ...] = (sys.executable, "-m", "cronlab")
POLL_S = 1.5  # each poll runs three short CLI processes; the engine needs the cores
CHAOS = ("crash-leader", "pause-leader", "kill-worker")
# Why the live run's "redelivered" differs from the model's (issue 29, item 9).
KILL_WORKER_NOTE = (
    "the worker dies right after its next claim; what it held comes back after the visibility "
    "timeout. The model's pod holds a whole second's share (its rate); a real rate-capped "
    "worker claims as its tokens come in, often one at a time, so fewer are redelivered live"
)
COMMAND_TIMEOUT_S = 30.0
RESTART_AFTER_S = 300  # cronlab cluster's --restart-after (the live run keeps its default)
STOP_GRACE_S = 8.0


@dataclass(frozen=True, kw_only=True)
class LiveConfig:
    """What the page asks for; the worker rate is derived so the drain takes ``drain_s``."""

    replicas: int = 3
    workers: int = 5
    election: str = "lease"
    timers: str = "durable"
    lease_ttl: int = 10
    count: int = 20_000
    drain_s: int = 60
    lead_s: int = 5
    fencing: str = "on"  # off: the engine's zombie anti-pattern (docs/engine.md)
    visibility: int = 30  # seconds a claimed message stays invisible (the model's too)

    def __post_init__(self) -> None:
        _check(1 <= self.replicas <= 7, "replicas", f"1..7, got {self.replicas}")
        _check(1 <= self.workers <= 16, "workers", f"1..16, got {self.workers}")
        _check(self.election in ("lease", "off"), "election", f"lease or off, {self.election!r}")
        _check(
            self.timers in ("durable", "in-memory"),
            "timers",
            f"durable or in-memory, {self.timers!r}",
        )
        _check(1 <= self.lease_ttl <= 120, "ttl", f"1..120 s, got {self.lease_ttl}")
        _check(self.fencing in ("on", "off"), "fencing", f"on or off, {self.fencing!r}")
        _check(
            self.fencing == "on" or self.election == "lease",
            "fencing",
            "on with election off (nobody holds a lease to fence)",
        )
        _check(1 <= self.count <= 1_000_000, "count", f"1..1,000,000, got {self.count}")
        _check(5 <= self.drain_s <= 3600, "drain_s", f"5..3600 s, got {self.drain_s}")
        _check(2 <= self.lead_s <= 120, "lead_s", f"2..120 s, got {self.lead_s}")
        _check(1 <= self.visibility <= 600, "visibility", f"1..600 s, got {self.visibility}")

    @property
    def worker_rate(self) -> int:
        """Tasks per second per pod so that ``count`` drains in about ``drain_s`` seconds."""
        return max(1, math.ceil(self.count / (self.workers * self.drain_s)))


def commands(cfg: LiveConfig, store: str) -> dict[str, list[str]]:
    """The engine commands one run uses (issue 3's operator contract), by role."""
    return {
        "seed": [
            *CRONLAB,
            "invoices",
            "seed",
            "--store",
            store,
            "--count",
            str(cfg.count),
            "--at",
            f"+{cfg.lead_s}",
            "--json",
        ],
        "cluster": [
            *CRONLAB,
            "lab",
            "cluster",
            "--store",
            store,
            "--replicas",
            str(cfg.replicas),
            "--workers",
            str(cfg.workers),
            "--election",
            cfg.election,
            "--timers",
            cfg.timers,
            "--lease-ttl",
            str(cfg.lease_ttl),
            "--worker-rate",
            str(cfg.worker_rate),
            "--fencing",
            cfg.fencing,
            "--visibility",
            str(cfg.visibility),
        ],
        "status": [*CRONLAB, "status", "--store", store, "--json"],
        "report": [*CRONLAB, "report", "--store", store, "--json"],
        "check": [
            *CRONLAB,
            "check",
            "--store",
            store,
            "--capacity",
            str(cfg.workers * cfg.worker_rate),
            "--json",
        ],
    }


@dataclass(kw_only=True)
class Faults:
    """The chaos a live run has had so far, in the model's words (seconds after the trigger)."""

    crashes: list[str] = field(default_factory=list)
    pauses: list[str] = field(default_factory=list)
    worker_crashes: list[str] = field(default_factory=list)


def prediction(cfg: LiveConfig, faults: Faults) -> dict[str, Any]:
    """The model's totals for the live scenario, with the faults sent so far."""
    scenario = params.build_scenario(
        tasks=cfg.count,
        replicas=cfg.replicas,
        workers=cfg.workers,
        rate=cfg.worker_rate,
        election=cfg.election,
        durable=cfg.timers == "durable",
        lease_ttl=cfg.lease_ttl,
        crashes=faults.crashes,
        pauses=faults.pauses,
        worker_crashes=faults.worker_crashes,
        fencing=cfg.fencing,
        visibility=cfg.visibility,
        restart_after=RESTART_AFTER_S,
        pod_restart=RESTART_AFTER_S,  # the cluster restarts a killed worker as a replica
    )
    result = simulate(scenario)
    return {
        "totals": params.totals_dict(result.totals),
        "sentence": params.sentence(scenario),
        "faults": params.fault_sentences(result),
        "verdict": params.verdict(result.totals),
    }


@dataclass(kw_only=True)
class Run:
    """One live run's processes, folder and what has been measured so far."""

    cfg: LiveConfig
    folder: str
    store: str
    cluster: subprocess.Popen[bytes]
    due_at: float
    faults: Faults = field(default_factory=Faults)
    events: list[dict[str, Any]] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)
    verdict: dict[str, Any] = field(default_factory=dict)
    exit_code: int | None = None
    chaos: list[subprocess.Popen[str]] = field(default_factory=list)
    reaper: subprocess.Popen[bytes] | None = None

    def watch(self, proc: subprocess.Popen[Any]) -> None:
        """Tell the reaper about a process group the run started (``proc`` leads it)."""
        if self.reaper is not None and self.reaper.stdin is not None:
            with contextlib.suppress(OSError):  # a reaper gone: the lab cleans up itself
                self.reaper.stdin.write(f"{proc.pid}\n".encode())
                self.reaper.stdin.flush()

    def note(self, kind: str, text: str) -> None:
        self.events.append({"t": round(time.time() - self.due_at, 1), "kind": kind, "text": text})


class Live:
    """The lab's single live run. Thread-safe; ``version`` bumps on every change (for SSE)."""

    def __init__(self, cronlab: Sequence[str] = CRONLAB, poll_s: float = POLL_S) -> None:
        self._cronlab = tuple(cronlab)
        self._poll_s = poll_s
        self._lock = threading.Lock()
        self._run: Run | None = None
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None
        self.version = 0

    @property
    def running(self) -> bool:
        return self._run is not None

    def start(self, cfg: LiveConfig) -> dict[str, Any]:
        """Seed and start a cluster; ConflictError while another run is going."""
        with self._lock:
            if self._run is not None:
                raise ConflictError("a live run is already going: stop it first (one at a time)")
            self._run = self._launch(cfg)
            self._stop.clear()
            self._poller = threading.Thread(target=self._poll, name="cronlab-live", daemon=True)
            self._poller.start()
            self.version += 1
        return self.snapshot()

    def stop(self) -> dict[str, Any]:
        """Kill every process of the run and remove its folder; NotFoundError when idle."""
        with self._lock:
            run, self._run = self._run, None
            if run is None:
                raise NotFoundError("no live run to stop")
            self._stop.set()
        _dismiss(run.reaper)  # this stop does the cleaning
        for proc in run.chaos:
            if proc.poll() is None:  # a reaped pid may be reused: signal only live ones
                _terminate(proc)
        _terminate(run.cluster)
        shutil.rmtree(run.folder, ignore_errors=True)
        if self._poller is not None:
            self._poller.join(timeout=COMMAND_TIMEOUT_S)
        self.version += 1
        return {"stopped": True, "folder_removed": not os.path.exists(run.folder)}

    def close(self) -> None:
        """Stop the run if there is one (server shutdown)."""
        with contextlib.suppress(NotFoundError):
            self.stop()

    def chaos(self, action: str, seconds: int, mid_dispatch: bool = False) -> dict[str, Any]:
        """``crash-leader``, ``pause-leader`` (``mid_dispatch``: caught between reading its
        batch and writing it, the zombie) or
        ``kill-worker`` (SIGKILL the lowest live worker right after it claims a batch, which
        it then holds unacked: the lesson's crash) through ``cronlab chaos``: real signals.

        Returns at once: ``pause-leader`` blocks for its duration, so every chaos command runs
        in the background and its outcome lands in the run's events.
        """
        run = self._current()
        if action not in CHAOS:
            raise ConfigError(f"unknown chaos action {action!r} ({', '.join(CHAOS)})")
        argv = [*self._cronlab, "chaos", action, "--store", run.store]
        if action == "pause-leader":
            argv += ["--for", str(seconds), *(["--mid-dispatch"] if mid_dispatch else [])]
        if action == "kill-worker":
            argv += ["--mid-batch"]
        offset = round(time.time() - run.due_at)
        at = max(0, offset)
        if action == "crash-leader":
            run.faults.crashes.append(f"leader@{at}")
        elif action == "pause-leader":
            run.faults.pauses.append(f"leader@{at}:{seconds}")
        else:
            run.faults.worker_crashes.append(f"0@{at}")
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        run.chaos.append(proc)
        run.watch(proc)
        threading.Thread(target=self._chaos_done, args=(run, action, proc), daemon=True).start()
        run.note(
            "chaos", f"{action} sent" + (f" for {seconds} s" if action == "pause-leader" else "")
        )
        if action == "kill-worker":
            run.note("chaos", KILL_WORKER_NOTE)
        self.version += 1
        return {"sent": action, "at_s": offset}

    def _chaos_done(self, run: Run, action: str, proc: subprocess.Popen[str]) -> None:
        out, err = proc.communicate()
        if proc.returncode == 0:
            run.note("chaos", f"{action}: {_line(out) or 'done'}")
        elif proc.returncode > 0:
            run.note("error", f"{action} failed: {_line(err) or proc.returncode}")
        self.version += 1

    def snapshot(self) -> dict[str, Any]:
        """Plain data for the page: config, measured report and status, model prediction."""
        run = self._run
        if run is None:
            return {"running": False, "version": self.version}
        return {
            "running": True,
            "version": self.version,
            "config": {**asdict(run.cfg), "worker_rate": run.cfg.worker_rate},
            "t": round(time.time() - run.due_at, 1),
            "status": run.status,
            "report": run.report,
            "verdict": run.verdict,
            "prediction": prediction(run.cfg, run.faults),
            "events": list(run.events[-200:]),
            "cluster_exit": run.exit_code,
        }

    def _current(self) -> Run:
        run = self._run
        if run is None:
            raise NotFoundError("no live run: start one first")
        return run

    def _launch(self, cfg: LiveConfig) -> Run:
        folder = tempfile.mkdtemp(prefix=reaper.PREFIX)
        store = f"sqlite:///{os.path.join(folder, 'lab.db')}"
        cmds = {k: [*self._cronlab, *v[len(CRONLAB) :]] for k, v in commands(cfg, store).items()}
        asked = time.time()
        cleaner = _reaper(folder)
        seeded = _run_cmd(cmds["seed"])
        if seeded.returncode != 0:
            _dismiss(cleaner)
            shutil.rmtree(folder, ignore_errors=True)
            raise ConfigError(f"seeding failed: {_line(seeded.stderr) or seeded.returncode}")
        due_at = _due_at(seeded.stdout, asked + cfg.lead_s)
        log = open(os.path.join(folder, "cluster.log"), "wb")  # noqa: SIM115 - lives with the run
        cluster = subprocess.Popen(
            cmds["cluster"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # (a lab cluster: its leader can be paused mid-dispatch)
        )
        log.close()
        run = Run(
            cfg=cfg, folder=folder, store=store, cluster=cluster, due_at=due_at, reaper=cleaner
        )
        run.watch(cluster)
        run.note(
            "start",
            f"seeded {cfg.count:,} invoices due in {cfg.lead_s} s; "
            f"cluster pid {cluster.pid}: {cfg.replicas} replicas, {cfg.workers} workers × "
            f"{cfg.worker_rate}/s",
        )
        return run

    def _poll(self) -> None:
        while not self._stop.wait(self._poll_s):
            run = self._run
            if run is None:
                return
            self._refresh(run)

    def _refresh(self, run: Run) -> None:
        status = _json_cmd([*self._cronlab, "status", "--store", run.store, "--json"])
        report = _json_cmd([*self._cronlab, "report", "--store", run.store, "--json"])
        verdict = _json_cmd(self._check(run, report))
        if self._stop.is_set():
            return
        if verdict is not None:
            run.verdict = verdict
        if status is not None:
            _note_leader(run, run.status, status)
            run.status = status
        if report is not None:
            run.report = report
        if run.exit_code is None and run.cluster.poll() is not None:
            run.exit_code = run.cluster.returncode
            run.note("exit", f"cluster exited with code {run.exit_code}")
        self.version += 1

    def _check(self, run: Run, report: dict[str, Any] | None) -> list[str]:
        """``cronlab check`` on the run; ``--final`` once every invoice has been run or lost."""
        argv = [*self._cronlab, *commands(run.cfg, run.store)["check"][len(CRONLAB) :]]
        tasks = (report or {}).get("tasks") or {}
        settled = sum(int(tasks.get(s, 0)) for s in ("DONE", "FAILED", "MISSED", "SKIPPED"))
        done = settled >= run.cfg.count and not int((report or {}).get("backlog_now", 0) or 0)
        return [*argv, "--final"] if done else argv


def _note_leader(run: Run, old: dict[str, Any], new: dict[str, Any]) -> None:
    """Log a lease acquisition when the leader or its epoch changes between two polls."""
    before, after = _leader(old), _leader(new)
    if after != before and after[1] is not None:
        replica, epoch = after
        who = "no replica" if replica is None else f"replica {replica}"
        run.note("acquire", f"{who} holds the lease (epoch {epoch})")


def _leader(status: dict[str, Any]) -> tuple[Any, Any]:
    leader = status.get("leader") or {}
    if not isinstance(leader, dict):
        return (leader, None)
    return (leader.get("replica"), leader.get("epoch"))


def _run_cmd(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"timed out after {COMMAND_TIMEOUT_S} s")


def _json_cmd(argv: list[str]) -> dict[str, Any] | None:
    done = _run_cmd(argv)
    if done.returncode != 0:
        return None
    try:
        data = json.loads(done.stdout)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def _terminate(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    """SIGCONT (a paused leader cannot die politely), SIGTERM, then SIGKILL the whole session."""
    for sig in (signal.SIGCONT, signal.SIGTERM):
        _signal_group(proc.pid, sig)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=STOP_GRACE_S)
    _signal_group(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=STOP_GRACE_S)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    # The cluster leads its own session: the group holds every replica and worker it spawned.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _reaper(folder: str) -> subprocess.Popen[bytes]:
    """The reaper of the run in ``folder``: it cleans up if this lab dies without stopping the
    run. Its own session, so Ctrl-C in the lab's terminal reaches the lab alone."""
    argv = [sys.executable, "-m", "cronlab.lab.web.reaper", folder]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, start_new_session=True)


def _dismiss(proc: subprocess.Popen[bytes] | None) -> None:
    """Kill a reaper that has nothing left to do (its run is being cleaned up here)."""
    if proc is None:
        return
    proc.kill()
    proc.wait()
    if proc.stdin is not None:
        proc.stdin.close()


def _due_at(seed_json: str, fallback: float) -> float:
    """The trigger instant ``invoices seed --json`` reports (``trigger_ms``), in epoch seconds."""
    try:
        return float(json.loads(seed_json)["trigger_ms"]) / 1000
    except (ValueError, KeyError, TypeError):
        return fallback


def _line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _check(ok: bool, name: str, expected: str) -> None:
    if not ok:
        raise ParamError(name, f"live {name} must be {expected}")
