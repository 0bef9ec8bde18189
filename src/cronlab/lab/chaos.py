"""Chaos: real signals to the processes the store lists, each recorded as an event.

A pid is signalled only where it provably is the process the registry lists: on this machine
and boot, in the PID namespace its number was registered in, started when it was (its
``place``, ``runtime/proc.py``), and a cronlab process. Another host's leader, another pod's
(the same pid number, another namespace) or a pid reused since is never hit: one line says so.

The leader is whoever holds the lease: the store's lease row by default, or, when the
election lives elsewhere (etcd), the ``LeaseElector`` passed as ``elector`` (its ``current()``).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from cronlab import distributed
from cronlab.exceptions import NotFoundError
from cronlab.ports import Clock, Event, LeaseElector, ProcessInfo
from cronlab.runtime import proc
from cronlab.runtime.proc import alive
from cronlab.stores.sql import SqlStore


def live_processes(store: SqlStore, role: str) -> list[ProcessInfo]:
    """The registered processes of ``role`` running here, provably (see the module)."""
    return [p for p in _running(store) if p.role == role and ours(p)]


def ours(p: ProcessInfo) -> bool:
    """True when ``p.pid`` here is the process ``p`` registered, alive."""
    return proc.here(p.pid, p.place) and alive(p.pid)


def _running(store: SqlStore) -> list[ProcessInfo]:
    return [p for p in store.processes() if p.exited_ms is None]


def _unproven(p: ProcessInfo, what: str) -> NotFoundError:
    if proc.here(p.pid, p.place):
        return NotFoundError(f"{what} {p.owner!r} was not signalled: pid {p.pid} has exited")
    return NotFoundError(
        f"{what} {p.owner!r} was not signalled: nothing proves pid {p.pid} here is it (it "
        "may run on another host or in another PID namespace, or have exited and its pid "
        "been reused)"
    )


def leader(store: SqlStore, clock: Clock, elector: LeaseElector | None = None) -> ProcessInfo:
    """The live process holding an unexpired lease, or NotFoundError."""
    lease = distributed.current_lease(store, clock, elector)
    if lease is None:
        raise NotFoundError("no leader to crash: the lease is free or expired")
    for p in _running(store):
        if p.owner == lease.holder:
            if not ours(p):
                raise _unproven(p, "the leader")
            return p
    raise NotFoundError(f"no leader to crash: holder {lease.holder!r} is not a registered process")


def crash_leader(store: SqlStore, clock: Clock, elector: LeaseElector | None = None) -> Event:
    p = leader(store, clock, elector)
    detail = {"target": "leader", "was_leader": True, "replica": p.index}
    return _hit(store, clock, elector, p, signal.SIGKILL, "crash", detail)


def crash_replica(
    store: SqlStore, clock: Clock, index: int, elector: LeaseElector | None = None
) -> Event:
    p = _find(store, "scheduler", index)
    lease = distributed.current_lease(store, clock, elector)
    was_leader = lease is not None and lease.holder == p.owner
    detail = {"target": f"replica:{index}", "was_leader": was_leader, "replica": index}
    return _hit(store, clock, elector, p, signal.SIGKILL, "crash", detail)


def kill_worker(
    store: SqlStore, clock: Clock, index: int | None, *, mid_batch: bool = False
) -> Event:
    """SIGKILL worker ``index`` (default: the lowest live one). ``mid_batch``: ask it (a lab
    worker: ``cronlab lab cluster``) to kill itself right after it claims its next batch,
    which it then holds unacked; NotFoundError if it claimed nothing within
    ``MID_DISPATCH_WAIT_S``."""
    if index is None:
        live = live_processes(store, "worker")
        if not live:
            raise NotFoundError("no live worker to kill")
        index = live[0].index
    p = _find(store, "worker", index)
    if not mid_batch:
        return _hit(store, clock, None, p, signal.SIGKILL, "kill-worker", {"worker": index})
    now = clock.now_ms()
    until = now + int(MID_DISPATCH_WAIT_S * 1000)  # the worker honours it only until then
    asked = {"worker": index, "until_ms": until}
    store.record_event(
        Event(kind="kill_request", at_ms=now, holder=p.owner, pid=p.pid, detail=asked)
    )
    deadline = time.monotonic() + MID_DISPATCH_WAIT_S + REQUEST_MARGIN_S
    while alive(p.pid):
        if time.monotonic() > deadline:
            store.record_event(
                Event(kind="kill_cancelled", at_ms=clock.now_ms(), holder=p.owner, pid=p.pid)
            )
            raise NotFoundError(
                f"the worker claimed nothing within {MID_DISPATCH_WAIT_S:g} s: not killed"
            )
        time.sleep(0.01)
    detail = {"worker": index, "mid_batch": True}
    event = Event(
        kind="kill-worker", at_ms=clock.now_ms(), holder=p.owner, pid=p.pid, detail=detail
    )
    store.record_event(event)
    return event


MID_DISPATCH_WAIT_S = 120.0  # how long a mid-dispatch pause waits for something to dispatch
REQUEST_MARGIN_S = 5.0  # the chaos command waits this much longer than the leader honours it


def pause_leader(
    store: SqlStore,
    clock: Clock,
    seconds: float,
    elector: LeaseElector | None = None,
    *,
    mid_dispatch: bool = False,
) -> Event:
    """SIGSTOP the leader, wait ``seconds``, SIGCONT it; records ``pause`` and ``resume``.

    ``mid_dispatch``: ask the leader (a lab scheduler: ``cronlab lab cluster``) to stop itself
    between reading its next batch and writing it — where a GC pause hits a leader by chance —
    and send SIGCONT ``seconds`` after it stopped. NotFoundError if
    it had nothing to dispatch within ``MID_DISPATCH_WAIT_S``."""
    p = leader(store, clock, elector)
    detail = {"target": "leader", "was_leader": True, "replica": p.index, "for_s": seconds}
    if mid_dispatch:
        event = _stopped_mid_dispatch(store, clock, p, detail)
    else:
        event = _hit(store, clock, elector, p, signal.SIGSTOP, "pause", detail)
    time.sleep(seconds)
    try:
        os.kill(p.pid, signal.SIGCONT)
    except ProcessLookupError:
        return event
    store.record_event(
        Event(
            kind="resume",
            at_ms=clock.now_ms(),
            holder=p.owner,
            pid=p.pid,
            detail={"replica": p.index},
        )
    )
    return event


def _stopped_mid_dispatch(
    store: SqlStore, clock: Clock, p: ProcessInfo, detail: dict[str, object]
) -> Event:
    now = clock.now_ms()
    until = now + int(MID_DISPATCH_WAIT_S * 1000)  # the leader honours it only until then
    asked = {**detail, "until_ms": until}
    store.record_event(
        Event(kind="pause_request", at_ms=now, holder=p.owner, pid=p.pid, detail=asked)
    )
    deadline = time.monotonic() + MID_DISPATCH_WAIT_S + REQUEST_MARGIN_S
    while not stopped(p.pid):
        if not alive(p.pid) or time.monotonic() > deadline:
            cancelled = Event(
                kind="pause_cancelled", at_ms=clock.now_ms(), holder=p.owner, pid=p.pid
            )
            store.record_event(cancelled)
            raise NotFoundError(
                f"the leader had nothing to dispatch within {MID_DISPATCH_WAIT_S:g} s: not paused"
            )
        time.sleep(0.01)
    event = Event(
        kind="pause",
        at_ms=clock.now_ms(),
        holder=p.owner,
        pid=p.pid,
        detail={**detail, "mid_dispatch": True},
    )
    store.record_event(event)
    return event


def stopped(pid: int) -> bool:
    """True while ``pid`` is stopped (SIGSTOP: state T)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state in ("T", "t")


def _find(store: SqlStore, role: str, index: int) -> ProcessInfo:
    label = "scheduler replica" if role == "scheduler" else role
    found = [p for p in _running(store) if p.role == role and p.index == index]
    for p in found:
        if ours(p):
            return p
    if found:  # (one per cluster: two clusters, or one per host, each have a replica 0)
        raise _unproven(found[0], f"{label} {index}")
    raise NotFoundError(f"no live {label} {index} to hit")


def _hit(
    store: SqlStore,
    clock: Clock,
    elector: LeaseElector | None,
    p: ProcessInfo,
    signum: int,
    kind: str,
    detail: dict[str, object],
) -> Event:
    lease = distributed.current_lease(store, clock, elector) if elector else None
    epoch = lease.epoch if lease else store.lease_read().epoch
    at = clock.now_ms()
    if not ours(p):  # (asked again just before: it may have exited since)
        raise _unproven(p, "process")
    os.kill(p.pid, signum)
    if signum == signal.SIGKILL:
        _wait_dead(p.pid)
    event = Event(kind=kind, at_ms=at, holder=p.owner, epoch=epoch, pid=p.pid, detail=detail)
    store.record_event(event)
    return event


def _wait_dead(pid: int, timeout_s: float = 2.0) -> None:
    # The next chaos command must not find (and hit again) a process that is still dying.
    deadline = time.monotonic() + timeout_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
